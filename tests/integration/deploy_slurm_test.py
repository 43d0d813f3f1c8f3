#!/usr/bin/env python3
"""Runs deploy/slurm/hmpmd.sbatch as Slurm would on one node, with the real
binaries and stand-ins for the three Slurm commands it calls (scontrol,
sbcast, srun) on PATH.

It checks that the script brings up the controller and one worker per task
slot, runs the job specs it is given to success, keeps the job store in an
absolute path outside the allocation (the directory sbatch ran from) where
the job is recorded as succeeded, exits 0, and leaves no process behind.
A job spec the controller refuses makes it exit 1.

usage: deploy_slurm_test.py BIN_DIR REPO_ROOT
"""
import json
import os
import signal
import sqlite3
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python"))
from ports import free_port  # noqa: E402

# srun: runs the command once per task slot (SLURM_NTASKS_PER_NODE, one
# node), with SLURM_LOCALID set; `--ntasks-per-node=1` runs it once. It
# forwards SIGTERM to its tasks, as srun does, and waits for them.
FAKE_SRUN = r"""#!/bin/bash
n=${SLURM_NTASKS_PER_NODE:-1}
while [ $# -gt 0 ]; do
  case "$1" in
    --ntasks-per-node=*) n=${1#*=}; shift ;;
    --*) shift ;;
    *) break ;;
  esac
done
pids=()
trap 'kill -TERM "${pids[@]}" 2>/dev/null' TERM
for ((i = 0; i < n; i++)); do
  SLURM_LOCALID=$i "$@" &
  pids+=($!)
done
status=0
for p in "${pids[@]}"; do
  while true; do
    wait "$p"; rc=$?
    # A trapped signal interrupts wait (rc > 128) while the task still runs.
    if [ $rc -gt 128 ] && kill -0 "$p" 2>/dev/null; then continue; fi
    break
  done
  [ $rc -eq 0 ] || status=$rc
done
exit $status
"""
FAKE_SCONTROL = "#!/bin/bash\necho localhost\n"
# sbcast --force SRC DST
FAKE_SBCAST = "#!/bin/bash\nshift\ncp \"$1\" \"$2\"\n"

STATES = {0: "queued", 1: "running", 2: "succeeded", 3: "failed", 4: "cancelled"}


def write(path, text, mode=0o644):
    with open(path, "w") as f:
        f.write(text)
    os.chmod(path, mode)


def group_alive(pgid):
    try:
        os.killpg(pgid, 0)
        return True
    except ProcessLookupError:
        return False


def run_sbatch(bin_dir, root, tmp, job_id, specs):
    """Runs the script in its own session; returns (exit code, output).
    Whatever of its process group is left after it exits is killed (by its
    group id) and reported as a failure."""
    fake = os.path.join(tmp, "slurm-bin")
    os.makedirs(fake, exist_ok=True)
    write(os.path.join(fake, "srun"), FAKE_SRUN, 0o755)
    write(os.path.join(fake, "scontrol"), FAKE_SCONTROL, 0o755)
    write(os.path.join(fake, "sbcast"), FAKE_SBCAST, 0o755)
    submit_dir = os.path.join(tmp, "submit")
    os.makedirs(submit_dir, exist_ok=True)
    env = dict(os.environ)
    env.update({
        "PATH": fake + os.pathsep + env.get("PATH", ""),
        "SLURM_JOB_ID": str(job_id),
        "SLURM_JOB_NODELIST": "localhost",
        "SLURM_NNODES": "1",
        "SLURM_NTASKS_PER_NODE": "2",
        "SLURM_SUBMIT_DIR": submit_dir,
        "HMPMD_BIN": bin_dir,
        "HMPMD_PORT": str(free_port()),
        "HMPMD_HTTP_PORT": str(free_port()),
        "HMPMD_DEVICE_DIR": os.path.join(tmp, "no-devices"),
    })
    env.pop("HMPMD_DB", None)
    script = os.path.join(root, "deploy", "slurm", "hmpmd.sbatch")
    p = subprocess.Popen(["bash", script, *specs], cwd=submit_dir, env=env,
                         stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                         start_new_session=True)
    try:
        out, _ = p.communicate(timeout=180)
    except subprocess.TimeoutExpired:
        os.killpg(p.pid, signal.SIGKILL)
        out, _ = p.communicate()
        return None, out
    left = False
    for _ in range(100):  # the script's cleanup waits for its children
        if not group_alive(p.pid):
            break
        time.sleep(0.05)
    else:
        left = True
        os.killpg(p.pid, signal.SIGKILL)
    if left:
        out += "\nLEFT BEHIND: processes of the script's group outlived it"
    return (p.returncode if not left else -1), out


def stored_jobs(db):
    con = sqlite3.connect(db)
    try:
        return [(name, STATES.get(state, state))
                for name, state in con.execute("SELECT name, state FROM jobs ORDER BY id")]
    finally:
        con.close()


def main():
    bin_dir, root = os.path.abspath(sys.argv[1]), os.path.abspath(sys.argv[2])
    failures = []
    with tempfile.TemporaryDirectory(prefix="hmpmd-slurm-") as tmp:
        good = os.path.join(tmp, "good.json")
        write(good, json.dumps({"name": "slurm-ok", "tasks": [
            {"id": "a", "kernel": "scale", "args": {"n": 256}},
            {"id": "b", "kernel": "scale", "inputs": ["a"], "args": {"factor": 2.0}},
            {"id": "v", "kernel": "noop", "core": "vector"}]}))
        bad = os.path.join(tmp, "bad.json")
        write(bad, json.dumps({"name": "slurm-refused", "tasks": [
            {"id": "x", "kernel": "no-such-kernel"}]}))

        rc, out = run_sbatch(bin_dir, root, tmp, 4242, [good])
        db = os.path.join(tmp, "submit", "hmpmd-4242.db")
        if rc != 0:
            failures.append("a good job: exit %s, not 0" % rc)
        if "2 of 2 workers joined" not in out:
            failures.append("the two task slots' workers did not both join")
        if "(store %s)" % db not in out:
            failures.append("the controller's store is not the absolute %s" % db)
        if not os.path.exists(db):
            failures.append("no store at %s after the allocation ended" % db)
        elif stored_jobs(db) != [("slurm-ok", "succeeded")]:
            failures.append("the store holds %s" % stored_jobs(db))
        if os.path.exists("/tmp/hmpmd-4242.token"):
            failures.append("the per-job token was left in /tmp")

        rc, out2 = run_sbatch(bin_dir, root, tmp, 4243, [bad])
        if rc != 1:
            failures.append("a refused job: exit %s, not 1" % rc)
        out += "\n--- refused job ---\n" + out2
    if failures:
        print(out)
        for f in failures:
            print("FAILED: " + f, file=sys.stderr)
        return 1
    print("PASSED: hmpmd.sbatch ran its jobs, kept its store and left nothing behind")
    return 0


if __name__ == "__main__":
    sys.exit(main())
