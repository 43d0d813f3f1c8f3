"""The tests' clusters are hmpmd.local's (python/hmpmd/local.py), loaded
from the source tree by path: the CLI tests use them too and must not need
the compiled Python module.

    with Cluster(bin_dir, workers=2) as c:
        c.endpoint   # tcp://127.0.0.1:PORT, for hmpmd.Client.connect
        c.url        # http://127.0.0.1:PORT, the REST API
"""
import importlib.util
import os

_path = os.path.join(os.path.dirname(os.path.abspath(__file__)), os.pardir, os.pardir, "python",
                     "hmpmd", "local.py")
_spec = importlib.util.spec_from_file_location("hmpmd_local_for_tests", _path)
_local = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_local)

Cluster = _local.LocalCluster
free_port = _local.free_port
