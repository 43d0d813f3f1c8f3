#!/usr/bin/env python3
"""Keeps deploy/ consistent with the binaries it starts.

- Every flag that deploy/ passes to `hmpmd-worker` or `hmpmd controller`
  (systemd units, Kubernetes manifests, the Slurm script) is one the built
  binary's --help lists.
- Every device description in deploy/ is accepted by `hmpmd-worker --device`.
- The Kubernetes manifests parse (PyYAML), selectors match their pod
  labels, every volumeMount has its volume, every ConfigMap they use is
  defined, every Secret is created in deploy/README.md, Service target ports
  exist, the workers point at the controller Service, and the controller's
  store (--db) is an absolute path on a writable persistent volume claim.

Exit codes: 0 passed, 1 failed (one line per problem). Without PyYAML the
manifest checks are skipped with a note; the others still run.
"""

import argparse
import os
import re
import subprocess
import sys

problems = []


def problem(where, what):
    problems.append("%s: %s" % (where, what))


def help_flags(argv):
    out = subprocess.run(argv + ["--help"], capture_output=True, text=True, timeout=30).stdout
    return set(re.findall(r"(--[a-z][a-z0-9-]*)", out))


def flags_of(args):
    return [a.split("=", 1)[0] for a in args if a.startswith("--")]


def check_flags(where, argv, worker_flags, controller_flags):
    """argv: a command line (list) that starts hmpmd-worker or hmpmd controller."""
    prog = os.path.basename(argv[0])
    if prog == "hmpmd-worker" or argv[:2] == ["hmpmd", "worker"]:
        known = worker_flags
    elif prog == "hmpmd" and len(argv) > 1 and argv[1] == "controller":
        known = controller_flags
    else:
        return
    for f in flags_of(argv[1:]):
        if f not in known:
            problem(where, "%s does not know %s" % (" ".join(argv[:2]), f))


def systemd_units(root, worker_flags, controller_flags):
    for name in ("hmpmd-controller.service", "hmpmd-worker@.service"):
        path = os.path.join(root, "deploy", "systemd", name)
        text = open(path).read().replace("\\\n", " ")
        m = re.search(r"^ExecStart=(.*)$", text, re.M)
        if not m:
            problem(path, "no ExecStart")
            continue
        check_flags(path, m.group(1).split(), worker_flags, controller_flags)
    default = os.path.join(root, "deploy", "systemd", "hmpmd.default")
    for var in re.findall(r"^(HMPMD_[A-Z_]+)=", open(default).read(), re.M):
        for name in ("hmpmd-controller.service", "hmpmd-worker@.service"):
            if var in open(os.path.join(root, "deploy", "systemd", name)).read():
                break
        else:
            problem(default, "%s is used by no unit" % var)


def slurm_script(root, worker_flags, controller_flags):
    path = os.path.join(root, "deploy", "slurm", "hmpmd.sbatch")
    text = open(path).read().replace("\\\n", " ")
    for line in text.splitlines():
        m = re.search(r'hmpmd-worker"?\s+(.*)', line) or re.search(r'hmpmd"?\s+(controller\s.*)', line)
        if not m:
            continue
        words = m.group(1).split()
        argv = (["hmpmd-worker"] if "hmpmd-worker" in line else ["hmpmd"]) + words
        check_flags(path, argv, worker_flags, controller_flags)


def check_device(where, worker, text, tmp):
    path = os.path.join(tmp, "device.json")
    with open(path, "w") as f:
        f.write(text)
    # The file parses if the worker is still running (retrying an endpoint
    # where nothing listens) when `timeout` stops it; a bad file exits 2.
    p = subprocess.run(["timeout", "1", worker, "--controller", "tcp://127.0.0.1:9",
                        "--device", path, "--log-level", "error"],
                       capture_output=True, text=True, timeout=30)
    if p.returncode not in (0, 124):
        problem(where, "hmpmd-worker rejects its device file: " + p.stderr.strip())


def check_store(where, args, mounts, volumes, claims):
    """The controller's --db is an absolute path on a persistent volume (a
    claim), so its jobs survive the pod."""
    db = [a.split("=", 1)[1] for a in args if a.startswith("--db=")]
    if not db or not os.path.isabs(db[0]):
        problem(where, "the controller needs an absolute --db= on a volume (it has %s)" %
                (db[0] if db else "none: the default is relative to its working directory"))
        return
    mount = max((m for m in mounts if db[0].startswith(m["mountPath"].rstrip("/") + "/")),
                key=lambda m: len(m["mountPath"]), default=None)
    if mount is None:
        problem(where, "--db=%s is on no volumeMount: the store dies with the pod" % db[0])
    elif mount.get("readOnly"):
        problem(where, "--db=%s is on the read-only mount %s" % (db[0], mount["name"]))
    elif mount["name"] not in claims and \
            "persistentVolumeClaim" not in volumes.get(mount["name"], {}):
        problem(where, "--db=%s is on %s, which is no persistent volume claim" %
                (db[0], mount["name"]))


def k8s(root, worker_flags, controller_flags, worker, tmp):
    try:
        import yaml
    except ImportError:
        print("note: PyYAML missing; Kubernetes manifest checks skipped")
        return
    readme = open(os.path.join(root, "deploy", "README.md")).read()
    kdir = os.path.join(root, "deploy", "k8s")
    objects = []
    for name in sorted(os.listdir(kdir)):
        path = os.path.join(kdir, name)
        try:
            docs = [d for d in yaml.safe_load_all(open(path)) if d]
        except yaml.YAMLError as e:
            problem(path, "not valid YAML: %s" % str(e).replace("\n", " "))
            continue
        if name == "kustomization.yaml":
            for r in docs[0].get("resources", []):
                if not os.path.exists(os.path.join(kdir, r)):
                    problem(path, "resource %s does not exist" % r)
            continue
        for d in docs:
            for key in ("apiVersion", "kind", "metadata"):
                if key not in d:
                    problem(path, "an object without %s" % key)
            objects.append((path, d))
    by_kind = {}
    for path, d in objects:
        by_kind.setdefault(d["kind"], {})[d["metadata"]["name"]] = (path, d)
    services = by_kind.get("Service", {})
    configmaps = by_kind.get("ConfigMap", {})
    for kind in ("StatefulSet", "Deployment", "DaemonSet"):
        for name, (path, d) in by_kind.get(kind, {}).items():
            where = "%s %s/%s" % (path, kind, name)
            spec = d["spec"]
            pod_labels = spec["template"]["metadata"].get("labels", {})
            for k, v in spec["selector"]["matchLabels"].items():
                if pod_labels.get(k) != v:
                    problem(where, "selector %s=%s does not match the pod labels" % (k, v))
            pod = spec["template"]["spec"]
            volumes = {v["name"]: v for v in pod.get("volumes", [])}
            claims = {c["metadata"]["name"] for c in spec.get("volumeClaimTemplates", [])}
            if kind == "StatefulSet" and spec.get("serviceName") not in services:
                problem(where, "serviceName %s is no Service" % spec.get("serviceName"))
            for v in volumes.values():
                if "secret" in v and v["secret"]["secretName"] not in readme:
                    problem(where, "Secret %s is not created in deploy/README.md" %
                            v["secret"]["secretName"])
                if "configMap" in v and v["configMap"]["name"] not in configmaps:
                    problem(where, "ConfigMap %s is not defined" % v["configMap"]["name"])
            for c in pod["containers"]:
                for m in c.get("volumeMounts", []):
                    if m["name"] not in volumes and m["name"] not in claims:
                        problem(where, "volumeMount %s has no volume" % m["name"])
                args = [a.replace("$(NODE_NAME)", "n").replace("$(POD_NAME)", "p")
                        for a in c.get("command", []) + c.get("args", [])]
                check_flags(where, args, worker_flags, controller_flags)
                if args[:2] == ["hmpmd", "controller"]:
                    check_store(where, args, c.get("volumeMounts", []), volumes, claims)
                for a in args:
                    m = re.match(r"--controller=tcp://([^.:]+)\.([^.:]+)\.svc:(\d+)$", a)
                    if a.startswith("--controller="):
                        if not m or m.group(1) not in services:
                            problem(where, "%s does not name a Service of these manifests" % a)
                        elif int(m.group(3)) not in [p["port"] for p in
                                                     services[m.group(1)][1]["spec"]["ports"]]:
                            problem(where, "%s: the Service has no such port" % a)
            for s_path, s in services.values():
                sel = s["spec"].get("selector", {})
                if sel and all(pod_labels.get(k) == v for k, v in sel.items()):
                    names = {p.get("name") for c in pod["containers"] for p in c.get("ports", [])}
                    for p in s["spec"]["ports"]:
                        if isinstance(p.get("targetPort"), str) and p["targetPort"] not in names:
                            problem(s_path, "targetPort %s is no container port" % p["targetPort"])
    for name, (path, d) in configmaps.items():
        if "device.json" in d.get("data", {}):
            check_device("%s ConfigMap/%s" % (path, name), worker, d["data"]["device.json"], tmp)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--bin", required=True)
    ap.add_argument("--root", required=True, help="the repository root")
    args = ap.parse_args()
    worker = os.path.join(args.bin, "hmpmd-worker")
    worker_flags = help_flags([worker])
    controller_flags = help_flags([os.path.join(args.bin, "hmpmd"), "controller"])
    if "--controller" not in worker_flags or "--listen" not in controller_flags:
        print("FAILED: could not read the flags from %s's --help" % args.bin, file=sys.stderr)
        return 1
    import tempfile
    with tempfile.TemporaryDirectory(prefix="hmpmd-deploy-") as tmp:
        systemd_units(args.root, worker_flags, controller_flags)
        slurm_script(args.root, worker_flags, controller_flags)
        example = os.path.join(args.root, "deploy", "systemd", "device-0.json")
        check_device(example, worker, open(example).read(), tmp)
        k8s(args.root, worker_flags, controller_flags, worker, tmp)
    for p in problems:
        print("FAILED: " + p, file=sys.stderr)
    if not problems:
        print("PASSED: deploy/ matches the binaries")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
