#!/usr/bin/env python3
"""Dispatch latency and makespan across network namespaces with added link delay.

First a baseline with the workers in the controller's namespace (127.0.0.1,
no veth). Then, for each added one-way delay (default 0, 0.1 and 1 ms, set with
`tc netem delay` on both ends of every veth link, so a round trip gains twice
the delay) this builds the three-namespace cluster of
tests/integration/netns_cluster.py (controller + 2 workers), then runs
  - a chain of --chain `noop` tasks, each needing the one before: chain
    latency per task = (job finished - job started) / tasks, on the
    controller's clock; it is one dispatch + one result across a link;
  - examples/multimodal.json: its makespan as the controller reports it;
each --runs times, and prints the medians in a table, with the change
against the no-delay row measured in the same run.

Root and iproute2 only. A delay row the kernel cannot add (no sch_netem)
prints "n/a" and the reason; nothing is estimated. Not part of ctest.

  sudo bench/netns/netns_bench.py --bin build/bin --runs 5
"""

import argparse
import json
import os
import statistics
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(ROOT, "tests", "integration"))
import netns_cluster  # noqa: E402


def chain_spec(n):
    tasks = [{"id": "t0", "kernel": "noop"}]
    for i in range(1, n):
        tasks.append({"id": "t%d" % i, "kernel": "noop", "inputs": ["t%d" % (i - 1)]})
    return {"name": "chain-%d" % n, "tasks": tasks}


def submit(cluster, spec):
    rc, out, err = cluster.cli("submit", spec, "--wait", "--wait-timeout", "300", "--json",
                               timeout=330)
    if rc != 0 or not out.strip().startswith("{"):
        raise RuntimeError("submit %s failed (exit %d): %s" % (spec, rc, err.strip() or out))
    job = json.loads(out)
    if job["state"] != "succeeded":
        raise RuntimeError("%s ended %s: %s" % (spec, job["state"], job.get("error", "")))
    return job


def measure(bin_dir, delay_ms, runs, chain_path, chain_len, multimodal, loopback=False):
    chain_ms, makespan_ms = [], []
    with netns_cluster.NetnsCluster(bin_dir, workers=2, delay_ms=delay_ms,
                                    loopback=loopback) as cluster:
        submit(cluster, chain_path)  # warm-up: connections, cost model
        for _ in range(runs):
            job = submit(cluster, chain_path)
            chain_ms.append((job["finished_us"] - job["started_us"]) / 1e3 / chain_len)
            job = submit(cluster, multimodal)
            makespan_ms.append(job["makespan_s"] * 1e3)
    return statistics.median(chain_ms), statistics.median(makespan_ms)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--bin", default=os.path.join(ROOT, "build", "bin"))
    ap.add_argument("--spec", default=os.path.join(ROOT, "examples", "multimodal.json"))
    ap.add_argument("--delays", default="0,0.1,1", help="one-way delays in ms, comma-separated")
    ap.add_argument("--runs", type=int, default=3, help="runs per row (median; at least 3)")
    ap.add_argument("--chain", type=int, default=200, help="tasks in the chain job")
    args = ap.parse_args()
    if args.runs < 3:
        ap.error("--runs must be at least 3")
    try:
        netns_cluster.check_host()
    except netns_cluster.SkipTest as e:
        print("netns_bench: %s" % e, file=sys.stderr)
        return 2
    netns_cluster.remove_stale_namespaces()
    netem = netns_cluster.netem_available()

    rows = []  # (label, delay, chain, makespan, note)
    with tempfile.TemporaryDirectory(prefix="hmpmd-netns-bench-") as tmp:
        chain_path = os.path.join(tmp, "chain.json")
        with open(chain_path, "w") as f:
            json.dump(chain_spec(args.chain), f)
        chain, makespan = measure(args.bin, 0, args.runs, chain_path, args.chain, args.spec,
                                  loopback=True)
        rows.append(("loopback (1 ns)", 0, chain, makespan, ""))
        for d in (float(x) for x in args.delays.split(",")):
            label = "veth +%g ms" % d
            if d > 0 and not netem:
                rows.append((label, d, None, None, "n/a: the kernel has no netem qdisc (sch_netem)"))
                continue
            chain, makespan = measure(args.bin, d, args.runs, chain_path, args.chain, args.spec)
            rows.append((label, d, chain, makespan, ""))

    base = next((r for r in rows if r[0].startswith("veth") and r[1] == 0 and r[2] is not None),
                None)
    print("HyperMPMD across network namespaces: controller + 2 workers (cube=1,vector=1), "
          "veth links, medians of %d runs" % args.runs)
    print("%-16s %-20s %-10s %-20s %-10s" % ("link (one-way)", "chain latency/task",
                                            "vs +0 ms", "multimodal makespan", "vs +0 ms"))
    for label, d, chain, makespan, note in rows:
        if chain is None:
            print("%-16s %s" % (label, note))
            continue
        rc = "%.2fx" % (chain / base[2]) if base else "-"
        rm = "%.2fx" % (makespan / base[3]) if base else "-"
        print("%-16s %-20s %-10s %-20s %-10s" % (label, "%.3f ms" % chain, rc,
                                                "%.2f ms" % makespan, rm))
    return 0


if __name__ == "__main__":
    sys.exit(main())
