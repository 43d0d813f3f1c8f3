#!/usr/bin/env python3
"""`hmpmd sim` on job specs and pools of odd shapes, as an outside checker
gives them: deep chains, wide fan-out/fan-in, diamonds over repeated steps,
many sub-models, sub-models of one task, collectives of every op and size
from 1 to the pool, send between sub-models, zero, tiny and huge costs,
program orders, pinned and elastic sets, Unicode and 4096-byte ids; pools of
1 device, 1 node x 1000 devices, no vector core, latency 0, tiny bandwidth.
Every run must exit 0/1/2 in bounded time, keep the invariants (no policy
beats the lower bound, ratios in [0, 1], every task accounted for, a valid
trace with one event per task run) and repeat itself exactly.
Usage: cli_sim_probe_test.py BIN_DIR SOURCE_DIR"""
import json
import os
import subprocess
import sys
import tempfile
import unittest

BIN = sys.argv[1]
HMPMD = os.path.join(BIN, "hmpmd")
OPS = ("allreduce", "allgather", "reduce_scatter", "alltoall", "broadcast")
KINDS = ("encoder", "pipeline_stage", "expert", "actor", "reward", "learner", "generic")


def run(*args, timeout=120):
    return subprocess.run([HMPMD, *args], capture_output=True, text=True, timeout=timeout)


def task(tid, kernel="noop", **fields):
    return {"id": tid, "kernel": kernel, **fields}


def member(tid, group, op, size, **fields):
    args = {"n": 8 * size}
    if op == "alltoall":
        args = {"n": size, "sizes": ",".join(["1"] * size)}
    if op == "broadcast":
        args = {"n": 8, "root": size - 1}
    return {"id": tid, "kernel": op, "core": "vector", "args": args,
            "collective": {"group": group, "op": op, "bytes": 4096}, **fields}


def specs(devices):
    """Odd but valid job specs for a pool of `devices` devices."""
    out = {
        "chain": {"tasks": [task(f"c{i}", "spin", args={"us": 3},
                                 inputs=[f"c{i - 1}"] if i else []) for i in range(3000)]},
        "fan": {"tasks": [task("root", "spin", args={"us": 5})]
                + [task(f"s{i}", "spin", args={"us": 1 + i % 7}, inputs=["root"],
                        core="vector" if i % 3 == 0 else "cube") for i in range(3000)]
                + [task(f"j{j}", "noop", inputs=[f"s{i}" for i in range(j * 100, j * 100 + 100)])
                   for j in range(30)]
                + [task("sink", "noop", inputs=[f"j{j}" for j in range(30)])]},
        "diamonds": {"repeat": 3, "tasks": sum(
            [[task(f"a{k}", "spin", args={"us": 3}, inputs=[f"d{k - 1}"] if k else []),
              task(f"b{k}", "gemm", args={"m": 8, "n": 8, "k": 8}, inputs=[f"a{k}"]),
              task(f"c{k}", "add", args={"n": 64}, core="vector", inputs=[f"a{k}"]),
              task(f"d{k}", "noop", inputs=[f"b{k}", f"c{k}"])] for k in range(50)], [])},
        "submodels": {"submodels": [
            {"name": f"sm{i}", "kind": KINDS[i % 7], "devices": i % min(devices, 4),
             **({"state_bytes": 1e6} if KINDS[i % 7] in ("actor", "reward", "learner") else {})}
            for i in range(50)],
            "tasks": [task(f"t{i}", "spin", submodel=f"sm{i % 50}", args={"us": 10 + i % 7},
                           inputs=[f"t{i - 50}"] if i >= 50 else []) for i in range(300)]},
        "one_task_sets": {"submodels": [{"name": f"a{i}", "kind": "actor", "devices": 1,
                                         "state_bytes": 1e6} for i in range(20)],
                          "tasks": [task(f"t{i}", "spin", submodel=f"a{i}", args={"us": 100})
                                    for i in range(20)]},
        "send_between": {"submodels": [{"name": "a"}, {"name": "b", "kind": "pipeline_stage"}],
                         "tasks": [task("x", "spin", submodel="a", args={"us": 10}),
                                   task("s", "send", submodel="a", core="vector", inputs=["x"],
                                        cost={"bytes": 1e6}),
                                   task("y", "spin", submodel="b", inputs=["s"],
                                        args={"us": 10})]},
        "costs": {"tasks": [task("z", "gemm", args={"m": 1, "n": 1, "k": 1},
                                 cost={"flops": 0, "bytes": 0}),
                            task("t", "gemm", cost={"flops": 1e-300}, inputs=["z"]),
                            task("n", "send", core="vector", cost={"bytes": 5e-324},
                                 inputs=["t"]),
                            task("s", "sleep", args={"us": 0}, inputs=["n"])]},
        "orders": {"repeat": 4, "submodels": [
            {"name": f"s{s}", "kind": "pipeline_stage", "devices": 1} for s in range(2)],
            "tasks": [task(f"f{s}_{m}", "spin", submodel=f"s{s}",
                           inputs=[f"f{s - 1}_{m}"] if s else [],
                           args={"us": 10, "mb": m, "pass": "f"})
                      for m in range(4) for s in range(2)]
            + [task(f"b{s}_{m}", "spin", submodel=f"s{s}",
                    inputs=[f"f1_{m}"] if s == 1 else [f"b1_{m}"],
                    args={"us": 20, "mb": m, "pass": "b"})
               for m in range(4) for s in (1, 0)]},
        "pinned": {"elastic": False, "submodels": [
            {"name": "a", "kind": "actor", "devices": 1, "state_bytes": 1e6},
            {"name": "l", "kind": "learner", "devices": 1, "elastic": True, "state_bytes": 1e6}],
            "tasks": [task(f"a{i}", "spin", submodel="a", args={"us": 50}) for i in range(8)]
            + [task(f"l{i}", "spin", submodel="l", args={"us": 50}, inputs=[f"a{i}"])
               for i in range(8)]},
        "names": {"name": "ジョブ🚀", "submodels": [{"name": "視覚", "kind": "encoder"}],
                  "tasks": [task("タスク🚀", "spin", submodel="視覚", args={"us": 5}),
                            task("x" * 4096, "noop", inputs=["タスク🚀"])]},
    }
    for op in OPS:  # every op, every size from 1 to the pool (at most 9)
        for size in sorted({min(devices, s) for s in (1, 2, 3, 9)}):
            out[f"{op}_{size}"] = {"tasks": [task("p", "spin", args={"us": 5})] + [
                member(f"m{m}", "g", op, size, inputs=["p"]) for m in range(size)]
                + [task("after", "noop", inputs=[f"m{m}" for m in range(size)])]}
    return out


POOLS = {
    "one": {"nodes": 1, "devices_per_node": 1},
    "wide": {"nodes": 1, "devices_per_node": 1000},
    "lat0": {"nodes": 2, "devices_per_node": 4,
             "links": {t: {"latency_us": 0} for t in ("device", "node", "fabric")}},
    "thin": {"nodes": 3, "devices_per_node": 3, "cores": {"vector": {"count": 2}},
             "links": {"fabric": {"bytes_per_us": 1e-3}, "node": {"bytes_per_us": 10}}},
}


class OddShapes(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()

    def tearDown(self):
        self.tmp.cleanup()

    def path(self, name, obj):
        p = os.path.join(self.tmp.name, name)
        with open(p, "w") as f:
            f.write(obj if isinstance(obj, str) else json.dumps(obj))
        return p

    def check(self, spec, pool, devices, tag):
        r = run("sim", spec, "--pool", pool, "--json")
        self.assertIn(r.returncode, (0, 1), f"{tag}: {r.stderr}")
        out = json.loads(r.stdout)
        with open(spec) as f:
            steps = json.load(f).get("repeat", 1)
        for name, p in out["policies"].items():
            where = f"{tag} {name}"
            if p["state"] != "succeeded":
                # Only the time limit (tiny bandwidth) may stop a run here.
                self.assertIn("time limit", p.get("error", ""), where)
                continue
            self.assertEqual(p["tasks"], out["tasks_per_step"] * steps, where)
            self.assertGreaterEqual(p["makespan_s"], p["lower_bound_s"] * (1 - 1e-9), where)
            self.assertGreaterEqual(p["makespan_s"], p["tight_bound_s"] * (1 - 1e-9), where)
            for key in ("masking_ratio", "bubble_ratio", "utilisation"):
                self.assertTrue(0 <= p[key] <= 1 + 1e-9, f"{where}: {key} {p[key]}")
            for kind, u in p["utilisation_by_kind"].items():
                self.assertTrue(0 <= u <= 1 + 1e-9, f"{where}: {kind} {u}")
        return out

    def test_odd_specs_on_odd_pools_keep_the_invariants_and_repeat_exactly(self):
        for pool_name, pool in POOLS.items():
            devices = pool["nodes"] * pool["devices_per_node"]
            pool_path = self.path(f"pool_{pool_name}.json", pool)
            for name, spec in specs(devices).items():
                tag = f"{name} on {pool_name}"
                path = self.path(f"{name}.json", spec)
                first = self.check(path, pool_path, devices, tag)
                # Deterministic: the same figures again (wall time aside).
                again = json.loads(run("sim", path, "--pool", pool_path, "--json").stdout)
                for o in (first, again):
                    for p in o["policies"].values():
                        p.pop("sim_wall_s")
                self.assertEqual(first, again, tag)

    def test_traces_are_valid_json_with_one_event_per_task_run(self):
        pool = self.path("pool.json", POOLS["lat0"])
        for name in ("diamonds", "allreduce_3", "names", "orders"):
            spec = self.path(f"{name}.json", specs(8)[name])
            trace = os.path.join(self.tmp.name, f"{name}.trace.json")
            r = run("sim", spec, "--pool", pool, "--json", "--trace", trace)
            self.assertEqual(r.returncode, 0, r.stderr)
            for policy, p in json.loads(r.stdout)["policies"].items():
                with open(os.path.join(self.tmp.name, f"{name}.trace.{policy}.json")) as f:
                    events = [e for e in json.load(f)["traceEvents"] if e.get("ph") == "X"]
                self.assertEqual(len(events), p["tasks"], f"{name} {policy}")
                for e in events:
                    self.assertGreaterEqual(e["dur"], 0)
                    self.assertIn("task", e["args"])

    def test_work_of_a_kind_the_pool_lacks_is_refused_in_one_line(self):
        pool = self.path("cube_only.json", {"nodes": 1, "devices_per_node": 2,
                                            "cores": {"vector": {"count": 0}}})
        spec = self.path("vec.json", {"tasks": [task("v", "add", core="vector",
                                                     args={"n": 4})]})
        r = run("sim", spec, "--pool", pool)
        self.assertEqual(r.returncode, 2, r.stdout)
        self.assertEqual(r.stderr.count("\n"), 1, r.stderr)
        self.assertIn("tasks[0] 'v': core: no worker has a 'vector' core", r.stderr)
        # A gang larger than the pool: refused before simulating, naming it.
        spec = self.path("gang.json", {"tasks": [member(f"m{m}", "g", "allreduce", 3)
                                                 for m in range(3)]})
        r = run("sim", spec, "--pool", self.path("one.json", POOLS["one"]))
        self.assertEqual(r.returncode, 2, r.stdout)
        self.assertIn("tasks[0] 'm0': collective.group: group 'g' has 3 members", r.stderr)

    def test_a_gemm_with_nothing_to_time_it_by_is_refused_in_one_line(self):
        # It took the 1 us minimum, silently; `run` refuses it too.
        spec = self.path("gemm.json", {"tasks": [task("g", "gemm", args={"m": 4096, "n": 4096})]})
        r = run("sim", spec, "--devices", "1")
        self.assertEqual(r.returncode, 2, r.stdout)
        self.assertEqual(r.stdout, "")
        self.assertEqual(r.stderr, f"hmpmd: {spec}: tasks[0] 'g': args.k: required: gemm is "
                                   "timed by m, n and k, or by cost.flops in their place\n")
        spec = self.path("flops.json", {"tasks": [task("g", "gemm", cost={"flops": 1e9})]})
        self.assertEqual(run("sim", spec, "--devices", "1").returncode, 0)
        # A pass hint the policy does not read is refused, not ignored.
        spec = self.path("pass.json", {"tasks": [task("s", "spin", args={"us": 1, "pass": "fwd"})]})
        r = run("sim", spec, "--devices", "1")
        self.assertEqual(r.returncode, 2, r.stdout)
        self.assertIn("tasks[0] 's': args.pass: must be \"f\" or \"b\"", r.stderr)

    def test_a_job_that_ended_keeps_its_state_when_another_passes_the_time_limit(self):
        # Two spins of the whole limit (86,400 s) in a chain: that job stops
        # the simulation; the other job had ended and was reported failed.
        long = self.path("long.json", {"name": "long", "tasks": [
            task("h0", "spin", args={"us": 86400e6}),
            task("h1", "spin", args={"us": 86400e6}, inputs=["h0"])]})
        short = self.path("short.json", {"name": "short", "repeat": 3, "tasks": [
            task("a", "spin", args={"us": 10})]})
        r = run("sim", long, short, "--devices", "2", "--json")
        self.assertEqual(r.returncode, 1, r.stderr)
        for name, p in json.loads(r.stdout)["policies"].items():
            self.assertEqual(p["state"], "failed", name)
            self.assertIn("task 'h1' starts at 86400.000000 s", p["error"], name)
            self.assertEqual([j["state"] for j in p["jobs"]], ["failed", "succeeded"], name)
            self.assertEqual(p["jobs"][1]["tasks"], 3, name)
        r = run("sim", long, short, "--devices", "2")
        self.assertRegex(r.stdout, r"hmpmd +short +1 +succeeded")


if __name__ == "__main__":
    unittest.main(argv=[sys.argv[0], "-v"])
