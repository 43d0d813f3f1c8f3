#!/usr/bin/env python3
"""A driver session for fault_run.py: chains of `scale` links, each after a
`sleep`, submitted from a Python driver (hmpmd.Client) while the faults
run; each chain's last output is fetched and checked element by element
against its source times the product of its factors. Prints one JSON
line, {"ok": true} or {"ok": false, "error": "..."}, and exits 0 either
way (the harness judges whether a failure was expected); "job" names the
session's job once it opened. A failure names its first cause: a link that
failed because its input did is reported by the error of the first task
that failed of its own accord (it names the limit or fault that ended it).

Usage: fault_driver.py PYTHON_DIR ENDPOINT SEED CHAINS LINKS HEARTBEAT_MS [DATA_HOST]
(DATA_HOST: the interface its data socket binds, which the workers must
reach: with --netns, the controller namespace's address, not loopback.)
"""
import json
import random
import re
import sys

# A task that failed only because an input did says so.
DEPENDENT = re.compile(r"input '[^']*' (failed|was cancelled)")


def first_cause(futures, hmpmd):
    """The first ended Future's own error among `futures`, in submission
    order, as "label: message"; None when none failed of its own accord."""
    for f in futures:
        if not f.ready:
            continue
        try:
            f.wait(0)
        except hmpmd.Error as e:
            if not DEPENDENT.search(str(e)):
                return f"{type(e).__name__}: {e}"
    return None


def main():
    python_dir, endpoint, seed, chains, links, heartbeat_ms = sys.argv[1:7]
    data_host = sys.argv[7] if len(sys.argv) > 7 else ""
    sys.path.insert(0, python_dir)
    import numpy as np
    import hmpmd
    rng = random.Random(f"driver-{seed}")
    said = {}
    try:
        with hmpmd.Client.connect(endpoint, session="fault-driver", heartbeat_ms=int(heartbeat_ms),
                                  connect_timeout_ms=30000, data_host=data_host) as c:
            said["job"] = c.job
            finals, submitted = [], []
            for k in range(int(chains)):
                src = c.submit("scale", args={"n": 1024, "factor": 1.0}, label=f"d{k}x0")
                submitted.append(src)
                prev, product = src, 1.0
                for j in range(1, int(links) + 1):
                    nap = c.submit("sleep", core="vector", inputs=[prev],
                                   args={"us": rng.choice((50000, 100000))})
                    f = rng.choice((0.5, 2.0))
                    product *= f
                    prev = c.submit("scale", inputs=[prev, nap], args={"factor": f},
                                    label=f"d{k}x{j}")
                    submitted += [nap, prev]
                finals.append((src, prev, product))
            for k, (src, last, product) in enumerate(finals):
                try:
                    a, b = src.get(120000)[0], last.get(120000)[0]
                except hmpmd.Error as e:
                    cause = DEPENDENT.search(str(e)) and first_cause(submitted, hmpmd)
                    if not cause:
                        raise
                    print(json.dumps(dict(said, ok=False, waited_on=f"{type(e).__name__}: {e}",
                                          error=cause)))
                    return 0
                if not np.array_equal(b, a * np.float32(product)):
                    print(json.dumps(dict(said, ok=False, data=True,
                                          error=f"chain d{k}: its last output is not its "
                                                f"source times {product}")))
                    return 0
        print(json.dumps(dict(said, ok=True)))
    except hmpmd.Error as e:
        print(json.dumps(dict(said, ok=False, error=f"{type(e).__name__}: {e}")))
    return 0


if __name__ == "__main__":
    sys.exit(main())
