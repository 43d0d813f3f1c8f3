"""HyperMPMD from Python: a driver (Client, Future, Actor, put) and a worker
serving Python kernels (Worker).

    import hmpmd
    with hmpmd.Client.connect("tcp://127.0.0.1:5555", session="demo") as c:
        x = c.put(numpy.arange(4, dtype=numpy.float32))
        y = c.submit("scale", args={"factor": 2.0}, inputs=[x])
        print(y.get()[0])          # array([0., 2., 4., 6.], dtype=float32)

`python3 -m hmpmd.worker --controller tcp://HOST:PORT --kernels MODULE`
starts a worker serving MODULE's kernels (see hmpmd/worker.py).
"""
from ._hmpmd import *  # noqa: F401,F403  (the compiled module's classes and errors)
from ._hmpmd import __doc__ as _native_doc  # noqa: F401
