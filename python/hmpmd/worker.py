"""python3 -m hmpmd.worker: a worker serving the Python kernels of a module.

    python3 -m hmpmd.worker --controller tcp://127.0.0.1:5555 --kernels mykernels \\
        --cores cube=1,vector=1 --name py0

MODULE (imported by name; the current directory is on the path) defines

    def register(worker):          # worker: an hmpmd.Worker, not yet running
        @worker.kernel("double", core="cube")
        def double(ctx, inputs, args):
            return inputs[0] * 2

and the worker serves until the controller shuts it down, SIGTERM or Ctrl-C.
"""
import argparse
import importlib
import logging
import signal
import sys

import hmpmd


def parse_cores(text):
    cores = {}
    for part in text.split(","):
        kind, sep, count = part.partition("=")
        if not sep or not count.strip().isdigit():
            raise argparse.ArgumentTypeError(
                "--cores: expected KIND=N[,KIND=N], e.g. cube=1,vector=1; got %r" % text)
        cores[kind.strip()] = int(count)
    return cores


def parse_label(text):
    key, eq, value = text.partition("=")
    if not eq:
        raise argparse.ArgumentTypeError("expected KEY=VALUE, found no '='")
    return key, value


def labels_of(pairs):
    """The --label pairs as a dict; one key given twice with two values is
    an error naming both."""
    out = {}
    for key, value in pairs:
        if out.get(key, value) != value:
            raise SystemExit("hmpmd.worker: --label: %s=%s conflicts with %s=%s" % (key, value, key, out[key]))
        out[key] = value
    return out


def main(argv=None):
    p = argparse.ArgumentParser(prog="python3 -m hmpmd.worker", description=__doc__.split("\n")[0])
    p.add_argument("--controller", required=True, help="the controller's endpoint, tcp://HOST:PORT")
    p.add_argument("--kernels", required=True, action="append", metavar="MODULE",
                   help="a module with register(worker); may be given more than once")
    p.add_argument("--cores", type=parse_cores, default={"cube": 1, "vector": 1},
                   help="cores per kind (default cube=1,vector=1)")
    p.add_argument("--name", default="", help="the worker's name (default HOSTNAME:PID)")
    p.add_argument("--memory-mb", type=int, default=1024, help="object store cap (default 1024)")
    p.add_argument("--token-file", default="", help="a file holding the controller's token")
    p.add_argument("--data-host", default="", help="interface of the data socket")
    p.add_argument("--label", action="append", default=[], type=parse_label, metavar="KEY=VALUE",
                   help="a label the device advertises, e.g. accel=910c (repeatable); tasks that "
                        "require labels run only where all of them are")
    p.add_argument("--log-level", default="info",
                   choices=["trace", "debug", "info", "warn", "error", "off"])
    a = p.parse_args(argv)
    py_level = {"trace": logging.DEBUG, "debug": logging.DEBUG, "info": logging.INFO,
                "warn": logging.WARNING, "error": logging.ERROR, "off": logging.CRITICAL + 1}
    logging.basicConfig(level=py_level[a.log_level], stream=sys.stderr,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    token = ""
    if a.token_file:
        with open(a.token_file) as f:
            token = f.read().strip()
    if "" not in sys.path:
        sys.path.insert(0, "")
    try:
        worker = hmpmd.Worker(controller=a.controller, cores=a.cores, name=a.name,
                              memory_mb=a.memory_mb, token=token, data_host=a.data_host,
                              log_level=a.log_level, labels=labels_of(a.label))
        for name in a.kernels:
            module = importlib.import_module(name)
            register = getattr(module, "register", None)
            if not callable(register):
                raise SystemExit("hmpmd.worker: module %r has no register(worker) function" % name)
            register(worker)
    except hmpmd.Error as e:
        raise SystemExit("hmpmd.worker: %s" % e)
    # SIGTERM stops it as Ctrl-C does, cleanly.
    signal.signal(signal.SIGTERM, lambda *_: worker.stop())
    try:
        worker.run()
    except KeyboardInterrupt:
        return 130
    except hmpmd.Error as e:
        print("hmpmd.worker: %s" % e, file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
