// Conversions between the driver API's C++ types and Python objects, and
// the Python exceptions hmpmd raises.
//
// Thread-safety: every function here needs the GIL.
#pragma once

#include <pybind11/pybind11.h>

#include <map>
#include <string>
#include <vector>

#include "hmpmd/client/call.h"
#include "hmpmd/protocol/buffer.h"
#include "hmpmd/protocol/status.h"
#include "hmpmd/protocol/types.h"

namespace hmpmd::python {

// Creates hmpmd.Error and its subclasses in `m`. Call once, at import.
void RegisterExceptions(pybind11::module_& m);

// Raises the Python exception for `status` (which must not be OK), with
// its one-line message: TaskFailed (kAborted), Cancelled, Timeout
// (kDeadlineExceeded, also a TimeoutError), InvalidArgument (kInvalidArgument
// and kAlreadyExists, also a ValueError), Unavailable (also a ConnectionError),
// PermissionDenied (also a PermissionError), else Error.
[[noreturn]] void Raise(const Status& status);

// Returns the value of `r`, or raises its status.
template <typename T>
T Unwrap(Result<T> r) {
  if (!r.ok()) Raise(r.status());
  return std::move(r).value();
}
inline void Check(const Status& s) {
  if (!s.ok()) Raise(s);
}

// A dict of str -> int | float | bool | str, in insertion order. Raises
// InvalidArgument naming the key of a value of another type.
Args ArgsFromDict(const pybind11::dict& args);
// The inverse, for Call.args in Python.
pybind11::dict ArgsToDict(const Args& args);

// "cube" | "vector"; raises InvalidArgument otherwise.
CoreKind CoreFromString(const std::string& core);
// "actor", "learner", ...; raises InvalidArgument otherwise.
SubmodelKind SubmodelKindFromString(const std::string& kind);

// Fills `call` from the keyword arguments every submit method takes;
// `collective` is None or {"group": str, "op": str[, "bytes": number]};
// `max_retries` an int 0..100, `retry_on` None or a list of str,
// `requires` None or a dict of str to str (LabelsFromDict).
client::Call MakeCall(std::string kernel, const pybind11::object& args,
                      std::vector<client::Future> inputs, const std::string& core,
                      std::string actor, std::string label, double flops, double bytes,
                      const pybind11::object& collective, const pybind11::object& max_retries,
                      const pybind11::object& retry_on, const pybind11::object& requires_);

// None or {"accel": "910c", ...}; raises InvalidArgument naming `where`
// for anything else (the controller or worker checks the labels' text).
std::map<std::string, std::string> LabelsFromDict(const pybind11::object& labels,
                                                  const std::string& where);

// Binds hmpmd.Buffer (bytes, shape, dtype; the buffer protocol, so
// memoryview(b) and numpy.asarray(b) read it without a copy).
void BindBuffer(pybind11::module_& m);

}  // namespace hmpmd::python
