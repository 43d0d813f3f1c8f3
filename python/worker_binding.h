// hmpmd.Worker: the embeddable worker (hmpmd::worker::Worker) serving
// kernels written in Python, and hmpmd.KernelContext, what such a kernel
// gets besides its inputs and arguments.
//
// Thread-safety: Worker.kernel() and Worker.run() belong to one Python
// thread; Worker.stop() is safe from any thread. A kernel runs on its
// lane's thread holding the GIL only while its Python code runs; the
// worker's other threads (the controller link, the data socket, fetches,
// collectives, C++ kernels on other lanes) never take the GIL.
#pragma once

#include <pybind11/pybind11.h>

namespace hmpmd::python {

// Binds hmpmd.Worker and hmpmd.KernelContext into `m`.
void BindWorker(pybind11::module_& m);

}  // namespace hmpmd::python
