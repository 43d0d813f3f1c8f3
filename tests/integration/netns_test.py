#!/usr/bin/env python3
"""The multimodal example across three network namespaces, then a cut link.

Needs root and iproute2; otherwise it prints "SKIPPED: <reason>" and exits 77,
which ctest reports as skipped. See netns_cluster.py for the topology.

  1. The controller runs in one namespace, a worker in each of two others,
     joined by veth pairs. `hmpmd submit --wait --json` runs the multimodal
     example; the job must succeed with tasks on both workers.
  2. A longer run of the same example (more steps) starts; once a fifth of
     its tasks are done, worker 0's link goes down (`ip link set down`). The
     controller must declare worker 0 dead (--worker-timeout-ms 1000), run its
     tasks again on worker 1, and the job must still succeed; every task that
     was not done at the cut must have run on worker 1.
  3. The link comes back up: worker 0 must join again by itself (workers may
     join at any time), and the example must run on both workers again.
  4. Worker 0 is restarted while its namespace has no route to the
     controller (a blackhole rule): it must wait for a route, then bind and
     advertise its data socket on its link's address (not loopback, which
     its peer cannot reach), and the example must run on both workers.

With --delay-ms X both ends of every link get `tc netem delay Xms` first (a
variant; skipped when the kernel lacks sch_netem).

Exit codes: 0 passed, 1 failed (one line per failed check on stderr), 77
skipped.
"""

import argparse
import json
import os
import re
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import netns_cluster  # noqa: E402

SKIP = 77
CUT_STEPS = 60  # ~3.5 s of multimodal work on two workers: room to cut mid-job


class Failed(Exception):
    pass


def check(cond, message):
    if not cond:
        raise Failed(message)


def device_ids(cluster):
    """{worker name: device id} from the controller's pool."""
    rc, out, err = cluster.cli("pool", "--json", timeout=15)
    check(rc == 0, "hmpmd pool failed: " + err.strip())
    return {d["name"]: d["id"] for d in json.loads(out)["devices"]}, json.loads(out)


def wait_terminal(cluster, job_id, timeout_s):
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        j = cluster.cli_json("status", str(job_id), timeout=15)
        if j["state"] in ("succeeded", "failed", "cancelled"):
            return j
        time.sleep(0.1)
    raise Failed("job %d not finished after %ds" % (job_id, timeout_s))


def run_example(cluster, spec):
    """Runs `spec` with submit --wait --json; checks it succeeded on both live workers."""
    rc, out, err = cluster.cli("submit", spec, "--wait", "--wait-timeout", "60", "--json")
    check(out.strip().startswith("{"), "submit --wait failed (exit %d): %s" % (rc, err.strip()))
    job = json.loads(out)
    check(rc == 0 and job["state"] == "succeeded",
          "multimodal job ended %s (exit %d): %s" % (job["state"], rc, job.get("error", "")))
    check(job["done"] == job["tasks"], "%d of %d tasks done" % (job["done"], job["tasks"]))
    tasks = cluster.all_tasks(job["id"])
    used = {t.get("device") for t in tasks}
    check(len(used) == 2, "tasks ran on devices %s; expected both workers" % sorted(used))
    print("multimodal job %d succeeded across namespaces: %d tasks, makespan %.1f ms, "
          "devices %s" % (job["id"], job["tasks"], job["makespan_s"] * 1e3, sorted(used)))


def run_with_cut(cluster, spec, tmp):
    with open(spec) as f:
        doc = json.load(f)
    doc["repeat"] = CUT_STEPS
    long_spec = os.path.join(tmp, "multimodal-long.json")
    with open(long_spec, "w") as f:
        json.dump(doc, f)
    ids, _ = device_ids(cluster)
    victim, survivor = ids["ns-worker0"], ids["ns-worker1"]

    job_id = cluster.cli_json("submit", long_spec)["id"]
    deadline = time.monotonic() + 60
    while True:
        j = cluster.cli_json("status", str(job_id), timeout=15)
        check(j["state"] in ("pending", "running"),
              "job %d ended %s before the cut; raise CUT_STEPS" % (job_id, j["state"]))
        if j["done"] * 5 >= j["tasks"]:
            break
        check(time.monotonic() < deadline, "job %d made no progress in 60 s" % job_id)
        time.sleep(0.05)
    cluster.cut_link(0)
    # Sampled after the cut: nothing from worker 0 can arrive any more.
    done_at_cut = cluster.cli_json("status", str(job_id), timeout=15)["done"]
    print("phase 2: cut worker 0's link with %d of %d tasks done" % (done_at_cut, j["tasks"]))

    final = wait_terminal(cluster, job_id, 120)
    check(final["state"] == "succeeded",
          "job %d ended %s after the cut: %s" % (job_id, final["state"], final.get("error", "")))
    check(final["done"] == final["tasks"], "%d of %d tasks done" % (final["done"], final["tasks"]))
    _, pool = device_ids(cluster)
    alive = {d["name"]: d["alive"] for d in pool["devices"]}
    check(alive.get("ns-worker0") is False, "worker 0 still alive after its link was cut")
    check(alive.get("ns-worker1") is True, "worker 1 not alive: %s" % alive)
    tasks = cluster.all_tasks(job_id)
    on_survivor = sum(1 for t in tasks if t.get("device") == survivor)
    on_victim = sum(1 for t in tasks if t.get("device") == victim)
    check(on_survivor >= final["tasks"] - done_at_cut,
          "only %d tasks ran on worker 1, but %d were not done at the cut" %
          (on_survivor, final["tasks"] - done_at_cut))
    reruns = sum(1 for t in tasks if t.get("attempt", 0) > 0)
    print("phase 2: job %d succeeded on the remaining worker: %d tasks on worker 1, %d on "
          "worker 0 (before the cut), %d re-run" % (job_id, on_survivor, on_victim, reruns))


def restart_without_a_route(cluster, spec):
    cluster.stop_worker(0)
    cut = cluster.net.lose(cluster.ns_workers[0], dst=cluster.controller_ip(0))
    try:
        cluster.start_worker(0)
        time.sleep(1.0)  # it would have bound its data socket by now
    finally:
        cluster.net.heal(cut)
    deadline = time.monotonic() + 30
    while True:
        _, pool = device_ids(cluster)
        live = [d for d in pool["devices"] if d["name"] == "ns-worker0" and d["alive"]]
        if live:
            break
        check(time.monotonic() < deadline, "worker 0 did not join after its route came back")
        time.sleep(0.1)
    # What the restarted worker bound and advertises (its log: "data socket on ...").
    with open(os.path.join(cluster.log_dir, "worker0.log")) as f:
        bound = re.findall(r"data socket on (\S+)", f.read())
    want = "tcp://%s:" % cluster.worker_ip(0)
    check(bound and bound[-1].startswith(want),
          "worker 0 bound its data socket on %s, not on %s" % (bound[-1:], want))
    print("phase 4: worker 0, started with no route to the controller, joined once it had one; "
          "data socket %s" % bound[-1])
    run_example(cluster, spec)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--bin", required=True, help="directory holding hmpmd and hmpmd-worker")
    ap.add_argument("--spec", required=True, help="examples/multimodal.json")
    ap.add_argument("--delay-ms", type=float, default=0.0, help="tc netem delay on every link")
    ap.add_argument("--cut-spec", help="spec for the link-cut phase (default: --spec); the "
                    "spin-only variant keeps tensors out of it, whose loss mid-read the "
                    "data plane does not yet rebuild in every case")
    args = ap.parse_args()

    try:
        netns_cluster.check_host()
        if args.delay_ms > 0 and not netns_cluster.netem_available():
            raise netns_cluster.SkipTest("the kernel has no netem qdisc (sch_netem)")
    except netns_cluster.SkipTest as e:
        print("SKIPPED: %s" % e)
        return SKIP
    netns_cluster.remove_stale_namespaces()

    with tempfile.TemporaryDirectory(prefix="hmpmd-netns-") as tmp:
        try:
            with netns_cluster.NetnsCluster(args.bin, workers=2, delay_ms=args.delay_ms,
                                            log_dir=tmp) as cluster:
                print("namespaces %s, %s; links %s" % (
                    cluster.ns_controller, ", ".join(cluster.ns_workers),
                    ", ".join("%s-%s" % (cluster.controller_ip(i), cluster.worker_ip(i))
                              for i in range(2))))
                run_example(cluster, args.spec)
                run_with_cut(cluster, args.cut_spec or args.spec, tmp)
                cluster.restore_link(0)
                cluster.wait_for_workers(2, timeout_s=60)
                print("phase 3: worker 0 joined again after its link came back")
                run_example(cluster, args.spec)
                restart_without_a_route(cluster, args.spec)
        except (Failed, RuntimeError) as e:
            print("FAILED: %s" % e, file=sys.stderr)
            netns_cluster.print_log_tails(tmp)
            return 1
    leftover = [l for l in netns_cluster._run(["ip", "netns", "list"]).splitlines()
                if l.startswith("%s%d" % (netns_cluster.PREFIX, os.getpid()))]
    if leftover:
        print("FAILED: namespaces left behind: %s" % leftover, file=sys.stderr)
        return 1
    print("PASSED")
    return 0


if __name__ == "__main__":
    sys.exit(main())
