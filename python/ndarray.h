// Buffers as NumPy arrays and back, for the Python worker's kernels and the
// driver's put() and get(). NumPy is loaded when first needed (pybind11's
// numpy support imports it at run time), so the driver alone runs without
// it.
//
// Where copies happen: a Buffer becomes an array without a copy (a
// read-only view whose base keeps the Buffer alive); an array or bytes
// becomes a Buffer with one copy (a Buffer owns its bytes), after NumPy has
// made the array C-contiguous and little-endian where it was not.
//
// Thread-safety: every function needs the GIL.
#pragma once

#include <pybind11/pybind11.h>

#include <memory>
#include <string>
#include <vector>

#include "hmpmd/protocol/buffer.h"

namespace hmpmd::python {

// A read-only view of `b` as an array of its dtype and shape, whose base
// holds `owner` (which must keep `b` alive and unchanged). A buffer whose
// dtype is not known, whose shape does not describe its bytes, or of dtype
// "bytes", is viewed as flat uint8.
pybind11::object ViewAsArray(const Buffer& b, std::shared_ptr<const void> owner);

// What get() returns for `b`: the array view as above when the dtype is a
// known array dtype and the shape describes the bytes; `bytes` for dtype
// "bytes"; else the Buffer itself (hmpmd.Buffer). Without NumPy, a Buffer.
pybind11::object ValueOf(const Buffer& b, std::shared_ptr<const void> owner);

// A numpy.ndarray, bytes, bytearray or memoryview as a Buffer (one copy).
// Raises InvalidArgument "WHAT: ..." for any other object, and for arrays
// of a dtype HyperMPMD has no name for (complex, object, ...).
Buffer BufferFromValue(const pybind11::handle& value, const std::string& what);

// A kernel's return value as its outputs: None (no outputs), one value, or
// a tuple or list of them (BufferFromValue each; `what` names the kernel).
std::vector<Buffer> BuffersFromResult(const pybind11::handle& result, const std::string& what);

}  // namespace hmpmd::python
