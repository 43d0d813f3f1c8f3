"""Ports for test clusters on 127.0.0.1."""
import os
import random
import socket
import time


def free_port():
    """A free port on 127.0.0.1 below the kernel's ephemeral range.

    A port from the ephemeral range, free when picked, can be handed to
    another test's outgoing connection before our controller binds it (tests
    run side by side under ctest -j); ports below the range are only ever
    taken by name. Same rule as tests/integration/process_cluster.cc.
    """
    lo = 32768
    try:
        with open("/proc/sys/net/ipv4/ip_local_port_range") as f:
            lo = int(f.read().split()[0])
    except (OSError, ValueError, IndexError):
        pass
    first = 10000
    span = max(1000, lo - first)
    rng = random.Random(os.getpid() * 7919 + time.monotonic_ns())
    for _ in range(200):
        port = first + rng.randrange(span)
        with socket.socket() as s:
            s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                continue
            return port
    raise RuntimeError("no free port below %d on 127.0.0.1 after 200 tries" % lo)
