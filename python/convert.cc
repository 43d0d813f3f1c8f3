#include "convert.h"

#include <pybind11/stl.h>

#include <cstddef>
#include <cstring>
#include <optional>
#include <string_view>
#include <utility>
#include <variant>

#include "hmpmd/protocol/dtype.h"

namespace py = pybind11;

namespace hmpmd::python {
namespace {

// The exception types, created at import and kept for the life of the
// process (a py::object in static storage would be released after the
// interpreter is gone).
PyObject* g_error = nullptr;
PyObject* g_task_failed = nullptr;
PyObject* g_cancelled = nullptr;
PyObject* g_timeout = nullptr;
PyObject* g_invalid_argument = nullptr;
PyObject* g_unavailable = nullptr;
PyObject* g_permission_denied = nullptr;

PyObject* NewException(py::module_& m, const char* name, const char* doc, PyObject* bases) {
  const std::string qualified = std::string("hmpmd.") + name;
  PyObject* type = PyErr_NewExceptionWithDoc(qualified.c_str(), doc, bases, nullptr);
  if (type == nullptr) throw py::error_already_set();
  m.attr(name) = py::reinterpret_borrow<py::object>(type);  // `type` keeps its own reference
  return type;
}

PyObject* Subclass(py::module_& m, const char* name, const char* doc, PyObject* other) {
  py::tuple bases = other == nullptr ? py::make_tuple(py::handle(g_error))
                                     : py::make_tuple(py::handle(g_error), py::handle(other));
  return NewException(m, name, doc, bases.ptr());
}

// Python's struct-module format of a dtype, and its item size; nullptr for
// a dtype without one (exported as raw bytes).
const char* FormatOf(const std::string& dtype, size_t* itemsize) {
  const DtypeInfo* d = FindDtype(dtype);
  if (d == nullptr || d->kind == 'V') return nullptr;
  *itemsize = d->itemsize;
  return d->format.data();  // string literals in the table: NUL-terminated
}

// The view of `b` typed by its dtype and shape, or false when the shape
// does not describe its bytes. Every product is checked: [2**62, 4] of f32
// wrapped to 0 bytes, matched an empty buffer, and memoryview read wild
// memory.
bool ShapedInfo(Buffer& b, py::buffer_info* info) {
  size_t itemsize = 0;
  const char* format = FormatOf(b.dtype, &itemsize);
  if (format == nullptr || b.shape.empty()) return false;
  size_t bytes = itemsize;
  for (int64_t d : b.shape) {
    if (d < 0 || __builtin_mul_overflow(bytes, static_cast<uint64_t>(d), &bytes)) return false;
  }
  if (bytes != b.data.size()) return false;
  std::vector<py::ssize_t> shape(b.shape.begin(), b.shape.end());
  std::vector<py::ssize_t> strides(shape.size());
  // A 0 dim makes 0 bytes of any other dims: their strides can still wrap.
  py::ssize_t stride = static_cast<py::ssize_t>(itemsize);
  for (size_t i = shape.size(); i-- > 0;) {
    strides[i] = stride;
    if (__builtin_mul_overflow(stride, shape[i], &stride)) return false;
  }
  *info = py::buffer_info(b.data.data(), static_cast<py::ssize_t>(itemsize), format,
                          static_cast<py::ssize_t>(shape.size()), shape, strides,
                          /*readonly=*/true);
  return true;
}

py::buffer_info BufferInfo(Buffer& b) {
  py::buffer_info info;
  if (ShapedInfo(b, &info)) return info;
  // Unknown dtype or a shape that does not match the bytes: flat bytes.
  return py::buffer_info(b.data.data(), 1, "B", 1, {static_cast<py::ssize_t>(b.data.size())},
                         {py::ssize_t{1}}, /*readonly=*/true);
}

}  // namespace

void RegisterExceptions(py::module_& m) {
  g_error = NewException(m, "Error", "A failure reported by HyperMPMD (base of every hmpmd error).",
                         PyExc_RuntimeError);
  g_task_failed = Subclass(m, "TaskFailed",
                           "A task failed: its kernel threw (the message is the kernel's) or one "
                           "of its inputs failed; also a session that ended failed.",
                           nullptr);
  g_cancelled = Subclass(m, "Cancelled", "The task was cancelled.", nullptr);
  g_timeout = Subclass(m, "Timeout", "A wait ran past its timeout.", PyExc_TimeoutError);
  g_invalid_argument =
      Subclass(m, "InvalidArgument", "A bad call: the message names the field.", PyExc_ValueError);
  g_unavailable = Subclass(m, "Unavailable", "The controller, a worker or the session is gone.",
                           PyExc_ConnectionError);
  g_permission_denied =
      Subclass(m, "PermissionDenied", "The controller refused the credentials (a wrong token).",
               PyExc_PermissionError);
}

void Raise(const Status& status) {
  PyObject* type = g_error;
  switch (status.code()) {
    case StatusCode::kAborted:
      type = g_task_failed;
      break;
    case StatusCode::kCancelled:
      type = g_cancelled;
      break;
    case StatusCode::kDeadlineExceeded:
      type = g_timeout;
      break;
    case StatusCode::kInvalidArgument:
    case StatusCode::kAlreadyExists:  // a duplicate name is a bad call too
      type = g_invalid_argument;
      break;
    case StatusCode::kUnavailable:
      type = g_unavailable;
      break;
    case StatusCode::kPermissionDenied:
      type = g_permission_denied;
      break;
    default:
      break;
  }
  std::string message = status.message();
  if (message.empty()) message = status.ToString();
  PyErr_SetString(type, message.c_str());
  throw py::error_already_set();
}

Args ArgsFromDict(const py::dict& args) {
  Args out;
  out.reserve(args.size());
  for (auto [key, value] : args) {
    if (!py::isinstance<py::str>(key)) Raise(Status::InvalidArgument("args: keys must be str"));
    std::string name = key.cast<std::string>();
    // bool before int: Python's bool is an int.
    if (py::isinstance<py::bool_>(value)) {
      out.push_back({std::move(name), value.cast<bool>()});
    } else if (py::isinstance<py::int_>(value)) {
      try {
        out.push_back({std::move(name), value.cast<int64_t>()});
      } catch (const py::cast_error&) {
        Raise(Status::InvalidArgument("args['" + key.cast<std::string>() +
                                      "']: integer out of the int64 range"));
      }
    } else if (py::isinstance<py::float_>(value)) {
      out.push_back({std::move(name), value.cast<double>()});
    } else if (py::isinstance<py::str>(value)) {
      out.push_back({std::move(name), value.cast<std::string>()});
    } else {
      Raise(
          Status::InvalidArgument("args['" + name + "']: must be int, float, bool or str, not " +
                                  py::str(value.get_type().attr("__name__")).cast<std::string>()));
    }
  }
  return out;
}

py::dict ArgsToDict(const Args& args) {
  py::dict out;
  for (const Arg& a : args) {
    std::visit([&](const auto& v) { out[py::str(a.name)] = py::cast(v); }, a.value);
  }
  return out;
}

CoreKind CoreFromString(const std::string& core) {
  std::optional<CoreKind> kind = ParseCoreKind(core);
  if (!kind) Raise(Status::InvalidArgument("core: '" + core + "' is not cube or vector"));
  return *kind;
}

SubmodelKind SubmodelKindFromString(const std::string& kind) {
  std::optional<SubmodelKind> k = ParseSubmodelKind(kind);
  if (!k) {
    Raise(Status::InvalidArgument("kind: '" + kind +
                                  "' is not one of encoder, pipeline_stage, expert, actor, "
                                  "reward, learner, generic"));
  }
  return *k;
}

namespace {

CollectiveSpec CollectiveFromDict(const py::object& obj) {
  if (!py::isinstance<py::dict>(obj)) {
    Raise(Status::InvalidArgument(
        "collective: must be a dict {'group': str, 'op': str, 'bytes': number}"));
  }
  CollectiveSpec c;
  for (const auto& [key, value] : obj.cast<py::dict>()) {
    const std::string k = py::str(key);
    if (k == "group" || k == "op") {
      if (!py::isinstance<py::str>(value)) {
        Raise(Status::InvalidArgument("collective." + k + ": must be a str"));
      }
      (k == "group" ? c.group : c.op) = value.cast<std::string>();
    } else if (k == "bytes") {
      if (!py::isinstance<py::int_>(value) && !py::isinstance<py::float_>(value)) {
        Raise(Status::InvalidArgument("collective.bytes: must be a number"));
      }
      c.bytes = value.cast<double>();
    } else {
      Raise(Status::InvalidArgument("collective." + k + ": no such field (group, op, bytes)"));
    }
  }
  return c;
}

}  // namespace

client::Call MakeCall(std::string kernel, const py::object& args,
                      std::vector<client::Future> inputs, const std::string& core,
                      std::string actor, std::string label, double flops, double bytes,
                      const py::object& collective, const py::object& max_retries,
                      const py::object& retry_on, const py::object& requires_) {
  client::Call call;
  call.kernel = std::move(kernel);
  if (!args.is_none()) {
    if (!py::isinstance<py::dict>(args)) Raise(Status::InvalidArgument("args: must be a dict"));
    call.args = ArgsFromDict(args.cast<py::dict>());
  }
  call.core = CoreFromString(core);
  call.inputs = std::move(inputs);
  call.actor = std::move(actor);
  call.label = std::move(label);
  call.cost.flops = flops;
  call.cost.bytes = bytes;
  if (!collective.is_none()) call.collective = CollectiveFromDict(collective);
  // bool is an int in Python; True retries would be a typo.
  if (!py::isinstance<py::int_>(max_retries) || py::isinstance<py::bool_>(max_retries)) {
    Raise(Status::InvalidArgument("max_retries: must be an int, not " +
                                  std::string(py::str(max_retries.get_type().attr("__name__")))));
  }
  const auto n = max_retries.cast<long long>();
  if (n < 0 || n > 100) Raise(Status::InvalidArgument("max_retries: must be between 0 and 100"));
  call.max_retries = static_cast<uint32_t>(n);
  if (!retry_on.is_none()) {
    if (!py::isinstance<py::list>(retry_on) && !py::isinstance<py::tuple>(retry_on)) {
      Raise(Status::InvalidArgument("retry_on: must be a list of str"));
    }
    for (const py::handle e : retry_on) {
      if (!py::isinstance<py::str>(e))
        Raise(Status::InvalidArgument("retry_on: must be a list of str"));
      call.retry_on.push_back(e.cast<std::string>());
    }
  }
  call.required = LabelsFromDict(requires_, "requires");
  return call;
}

std::map<std::string, std::string> LabelsFromDict(const py::object& labels,
                                                  const std::string& where) {
  std::map<std::string, std::string> out;
  if (labels.is_none()) return out;
  const std::string want = where + ": must be a dict of str to str, like {\"accel\": \"910c\"}";
  if (!py::isinstance<py::dict>(labels)) Raise(Status::InvalidArgument(want));
  for (auto [key, value] : labels.cast<py::dict>()) {
    if (!py::isinstance<py::str>(key) || !py::isinstance<py::str>(value)) {
      Raise(Status::InvalidArgument(want));
    }
    out[key.cast<std::string>()] = value.cast<std::string>();
  }
  return out;
}

void BindBuffer(py::module_& m) {
  py::class_<Buffer>(m, "Buffer", py::buffer_protocol(),
                     "A task output: raw bytes, a shape and a dtype ('f32', 'i64', ...).\n"
                     "memoryview(b) reads it in place, typed by its dtype and shape "
                     "(e.g. memoryview(b).tolist()).")
      .def(py::init([](py::bytes data, std::vector<int64_t> shape, std::string dtype) {
             Buffer b;
             std::string bytes = data;
             b.data.resize(bytes.size());
             std::memcpy(b.data.data(), bytes.data(), bytes.size());
             b.shape = std::move(shape);
             b.dtype = std::move(dtype);
             return b;
           }),
           py::arg("data"), py::arg("shape") = std::vector<int64_t>{},
           py::arg("dtype") = std::string("u8"))
      .def_buffer([](Buffer& b) { return BufferInfo(b); })
      .def_property_readonly(
          "data",
          [](const Buffer& b) {
            return py::bytes(reinterpret_cast<const char*>(b.data.data()), b.data.size());
          },
          "The bytes (a copy; memoryview(buffer) avoids it).")
      .def_readonly("shape", &Buffer::shape)
      .def_readonly("dtype", &Buffer::dtype)
      .def("__len__", [](const Buffer& b) { return b.data.size(); })
      .def("__repr__", [](const Buffer& b) {
        std::string shape;
        for (size_t i = 0; i < b.shape.size(); ++i) {
          shape += (i ? ", " : "") + std::to_string(b.shape[i]);
        }
        return "Buffer(dtype='" + b.dtype + "', shape=[" + shape + "], " +
               std::to_string(b.data.size()) + " bytes)";
      });
}

}  // namespace hmpmd::python
