#!/usr/bin/env python3
"""No split brain across a partition: a primary controller and a standby on
one store, two workers in network namespaces of their own.

Needs root and iproute2; otherwise it prints "SKIPPED: <reason>" and exits 77,
which ctest reports as skipped. See netns_cluster.py for the topology; the
standby runs beside the primary (`--standby`, its own ports) and the workers
are given both endpoints.

  1. A job of two chains of sleeps runs on the primary.
  2. Both workers' links go down for 3 s, three times the worker time-out:
     the primary is cut off from every worker and declares them dead. The
     standby must not take over (the primary still holds the store's lock,
     and the lock, not the network, decides who is primary), no worker may
     register anywhere meanwhile, and the job must not move.
  3. The links come back: the workers register with the primary again and
     the job succeeds there. The standby never served.
  4. The primary is paused (SIGSTOP) for 3 s: the same must hold. Then it
     is killed: the standby takes over and runs a new job.

Exit codes: 0 passed, 1 failed (one line on stderr), 77 skipped.
"""

import argparse
import json
import os
import signal
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import netns_cluster  # noqa: E402

SKIP = 77
HOLD_S = 3.0  # three worker time-outs


class Failed(Exception):
    pass


def check(cond, message):
    if not cond:
        raise Failed(message)


def chains_spec(path, links, sleep_us):
    tasks = []
    for c in range(2):
        for i in range(links):
            t = {"id": "c%d_%d" % (c, i), "kernel": "sleep", "args": {"us": sleep_us}}
            if i:
                t["inputs"] = ["c%d_%d" % (c, i - 1)]
            tasks.append(t)
    with open(path, "w") as f:
        json.dump({"name": "chains", "tasks": tasks}, f)
    return path


def job(cluster, job_id):
    return cluster.get("/api/v1/jobs/%d" % job_id)


def wait_done(cluster, job_id, at_least, timeout_s):
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        j = job(cluster, job_id)
        if j.get("done", 0) >= at_least or j.get("state") in ("succeeded", "failed", "cancelled"):
            return j
        time.sleep(0.05)
    raise Failed("job %d: fewer than %d tasks done after %.0f s" % (job_id, at_least, timeout_s))


def standby_log(tmp):
    with open(os.path.join(tmp, "standby.log")) as f:
        return f.read()


def hold_without_split_brain(cluster, tmp, job_id, what):
    """Over HOLD_S: the standby does not take over and the job stands
    still once the primary has no worker."""
    time.sleep(1.5)  # the worker time-out (1 s) and a little: both declared dead
    before = job(cluster, job_id) if what == "partition" else None
    time.sleep(HOLD_S - 1.5)
    check("the primary released" not in standby_log(tmp),
          "%s: the standby took over while the primary held the store" % what)
    check(cluster.alive("standby"), "%s: the standby exited" % what)
    if before is not None:
        after = job(cluster, job_id)
        check(after.get("done") == before.get("done"),
              "%s: the job moved with every worker cut off (%s -> %s done)" %
              (what, before.get("done"), after.get("done")))
        check(cluster.alive_devices() == 0,
              "%s: a worker registered while cut off" % what)


def run(cluster, tmp):
    spec = chains_spec(os.path.join(tmp, "chains.json"), 60, 50000)
    job_id = cluster.cli_json("submit", spec)["id"]
    wait_done(cluster, job_id, 10, 30)
    for i in range(2):
        cluster.cut_link(i)
    hold_without_split_brain(cluster, tmp, job_id, "partition")
    for i in range(2):
        cluster.restore_link(i)
    cluster.wait_for_workers(2, timeout_s=30)
    j = wait_done(cluster, job_id, 120, 60)
    check(j.get("state") == "succeeded", "job %d ended %s after the partition healed" %
          (job_id, j.get("state")))
    print("partition: the standby stayed standby; the job succeeded on the primary")

    job2 = cluster.cli_json("submit", spec)["id"]
    wait_done(cluster, job2, 10, 30)
    cluster.signal("controller", signal.SIGSTOP)
    try:
        hold_without_split_brain(cluster, tmp, job2, "pause")
    finally:
        cluster.signal("controller", signal.SIGCONT)
    print("pause: the standby stayed standby")

    cluster.signal("controller", signal.SIGKILL)
    deadline = time.monotonic() + 20
    while "the primary released" not in standby_log(tmp) and time.monotonic() < deadline:
        time.sleep(0.05)
    check("the primary released" in standby_log(tmp), "the standby did not take over after the kill")
    rc, out, err = cluster.cli("submit", spec, "--wait", "--wait-timeout", "60", "--json",
                               http=netns_cluster.STANDBY_HTTP)
    check(out.strip().startswith("{") and json.loads(out).get("state") == "succeeded",
          "a job on the standby after the takeover: exit %d: %s" % (rc, (out + err).strip()))
    print("kill: the standby took over and ran a new job")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--bin", required=True, help="directory holding hmpmd and hmpmd-worker")
    args = ap.parse_args()
    try:
        netns_cluster.check_host()
    except netns_cluster.SkipTest as e:
        print("SKIPPED: %s" % e)
        return SKIP
    netns_cluster.remove_stale_namespaces()
    with tempfile.TemporaryDirectory(prefix="hmpmd-netns-standby-") as tmp:
        try:
            with netns_cluster.NetnsCluster(args.bin, workers=2, log_dir=tmp,
                                            db=os.path.join(tmp, "jobs.db"),
                                            standby=True) as cluster:
                run(cluster, tmp)
        except (Failed, RuntimeError) as e:
            print("FAILED: %s" % e, file=sys.stderr)
            netns_cluster.print_log_tails(tmp)
            return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
