"""Drives my_kernels.py's kernels and a built-in C++ one:
    python3 driver.py tcp://127.0.0.1:5555
A kernel that raises fails its task with "Type: message" (e.g. submit
"relu" without inputs: "IndexError: list index out of range"), and the
session then ends failed."""
import sys

import numpy as np

import hmpmd

with hmpmd.Client.connect(sys.argv[1] if len(sys.argv) > 1 else "tcp://127.0.0.1:5555",
                          session="python-worker-demo") as c:
    x = c.put(np.array([[-1.0, 2.0], [3.0, -4.0]], dtype=np.float32))  # the driver's own data
    r = c.submit("relu", inputs=[x])                                    # Python kernel
    s = c.submit("scale", args={"factor": 10.0}, inputs=[r], core="vector")  # C++ built-in
    mean, status = c.submit("running_mean", inputs=[s], core="vector").get()
    print(x.get())          # [[-1.  2.] [ 3. -4.]]  (a numpy array: dtype and shape kept)
    print(s.get()[0])       # [[ 0. 20.] [30.  0.]]
    print(mean, status)     # [[ 0. 20.] [30.  0.]] b'ok'
