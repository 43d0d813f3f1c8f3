"""Ports for test clusters on 127.0.0.1: hmpmd.local's rule (see cluster.py)."""
from cluster import free_port  # noqa: F401
