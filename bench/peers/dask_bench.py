#!/usr/bin/env python3
"""bench/peers, the Dask half: the workloads of peers_bench.cc on Dask distributed.

A LocalCluster of 2 worker processes with 1 thread each, everything on
127.0.0.1, dashboard off, driven the way Dask users drive it:

  1 independent  client.map(noop, range(N), pure=False), then wait()      tasks/s
  2 chain        N client.submit(noop, previous_future), then .result()  us per task
  3 tree         L leaves by client.map, then client.submit(noop, *8 inputs)
                 level by level to one root, then root.result()          makespan
  4 multimodal   the job spec's DAG (spin kernels busy-wait their `us`), every
                 step's roots depending on the previous step's sinks, all
                 submitted at once, then wait()                          makespan

Times run from the first submission to the last result, on the client.
Every figure gets one smaller warm-up run, then --runs timed runs; each timed
run is one CSV row "system,workload,metric,unit,run,value".
"""
import argparse
import json
import logging
import sys
import time


def noop(*args):
    return None


def spin(us, *deps):
    end = time.perf_counter() + us * 1e-6
    while time.perf_counter() < end:
        pass
    return None


def settle(client, timeout_s=30.0):
    """Waits until the scheduler has forgotten every task of the last run."""
    end = time.monotonic() + timeout_s
    while time.monotonic() < end:
        if client.run_on_scheduler(lambda dask_scheduler: len(dask_scheduler.tasks)) == 0:
            return
        time.sleep(0.05)


def independent(client, wait, n):
    t0 = time.perf_counter()
    futures = client.map(noop, range(n), pure=False)
    wait(futures)
    seconds = time.perf_counter() - t0
    del futures
    settle(client)
    return seconds


def chain(client, n):
    t0 = time.perf_counter()
    f = client.submit(noop, None, pure=False)
    for _ in range(n - 1):
        f = client.submit(noop, f, pure=False)
    f.result()
    seconds = time.perf_counter() - t0
    del f
    settle(client)
    return seconds


def tree(client, leaves, fan_in):
    t0 = time.perf_counter()
    level = client.map(noop, range(leaves), pure=False)
    while len(level) > 1:
        level = [client.submit(noop, *level[i:i + fan_in], pure=False)
                 for i in range(0, len(level), fan_in)]
    level[0].result()
    seconds = time.perf_counter() - t0
    del level
    settle(client)
    return seconds


def load_multimodal(path):
    """(repeat, [(id, us, [inputs])]) from a job spec of spin tasks."""
    try:
        with open(path) as f:
            spec = json.load(f)
    except (OSError, ValueError) as e:
        sys.exit(f"dask_bench: {path}: {e}")
    tasks, seen = [], set()
    for n, t in enumerate(spec.get("tasks", [])):
        if t.get("kernel") != "spin" or "us" not in t.get("args", {}):
            sys.exit(f"dask_bench: {path}: tasks[{n}] '{t.get('id')}': kernel: only spin tasks with args.us run here")
        for i in t.get("inputs", []):
            if i not in seen:
                sys.exit(f"dask_bench: {path}: tasks[{n}] '{t['id']}': inputs: '{i}' is not an earlier task")
        seen.add(t["id"])
        tasks.append((t["id"], float(t["args"]["us"]), list(t.get("inputs", []))))
    if not tasks:
        sys.exit(f"dask_bench: {path}: tasks: empty")
    return int(spec.get("repeat", 1)), tasks


def multimodal(client, wait, repeat, tasks):
    consumed = {i for _, _, inputs in tasks for i in inputs}
    sinks = [tid for tid, _, _ in tasks if tid not in consumed]
    t0 = time.perf_counter()
    previous_sinks = []
    every = []
    for _ in range(repeat):
        futures = {}
        for tid, us, inputs in tasks:  # the spec lists inputs before their users
            deps = [futures[i] for i in inputs] if inputs else previous_sinks
            futures[tid] = client.submit(spin, us, *deps, pure=False)
        previous_sinks = [futures[s] for s in sinks]
        every.extend(futures.values())
    wait(every)
    seconds = time.perf_counter() - t0
    del every, previous_sinks, futures
    settle(client)
    return seconds


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--runs", type=int, default=3)
    p.add_argument("--independent", type=int, default=20000)
    p.add_argument("--chain", type=int, default=2000)
    p.add_argument("--leaves", type=int, default=5000)
    p.add_argument("--fan-in", type=int, default=8)
    p.add_argument("--multimodal", default="", help="job spec of spin tasks (skipped if empty)")
    p.add_argument("--csv", default="", help="append the rows to this file instead of stdout")
    a = p.parse_args()
    if min(a.runs, a.independent, a.chain, a.leaves) < 1 or a.fan_in < 2:
        sys.exit("dask_bench: --runs, --independent, --chain, --leaves must be >= 1 and --fan-in >= 2")

    import dask
    import distributed
    from distributed import Client, LocalCluster, wait

    out = open(a.csv, "a") if a.csv else sys.stdout

    def row(workload, metric, unit, run, value):
        out.write(f"dask,{workload},{metric},{unit},{run},{value:.6g}\n")
        out.flush()

    mm = load_multimodal(a.multimodal) if a.multimodal else None
    print(f"dask_bench: dask {dask.__version__}, distributed {distributed.__version__}", file=sys.stderr)
    with LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None,
                      host="127.0.0.1", silence_logs=logging.ERROR) as cluster, Client(cluster) as client:
        client.wait_for_workers(2)
        independent(client, wait, min(a.independent, 2000))
        for r in range(a.runs):
            row("w1_independent", "tasks_per_s", "tasks/s", r, a.independent / independent(client, wait, a.independent))
        chain(client, min(a.chain, 200))
        for r in range(a.runs):
            row("w2_chain", "latency_us", "us/task", r, chain(client, a.chain) * 1e6 / a.chain)
        tree(client, min(a.leaves, 500), a.fan_in)
        for r in range(a.runs):
            row("w3_tree", "makespan_ms", "ms", r, tree(client, a.leaves, a.fan_in) * 1e3)
        if mm:
            multimodal(client, wait, *mm)
            for r in range(a.runs):
                row("w4_multimodal", "makespan_ms", "ms", r, multimodal(client, wait, *mm) * 1e3)
    if out is not sys.stdout:
        out.close()


if __name__ == "__main__":
    main()
