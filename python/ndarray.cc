#include "ndarray.h"

#include <pybind11/numpy.h>

#include <cstring>
#include <utility>

#include "convert.h"
#include "hmpmd/protocol/dtype.h"

namespace py = pybind11;

namespace hmpmd::python {
namespace {

// A capsule owning a copy of `owner`: the base object of array views.
py::capsule Keeper(std::shared_ptr<const void> owner) {
  auto* held = new std::shared_ptr<const void>(std::move(owner));
  return py::capsule(held, [](void* p) { delete static_cast<std::shared_ptr<const void>*>(p); });
}

bool NumpyAvailable() {
  static const bool available = [] {
    try {
      py::module_::import("numpy");
      return true;
    } catch (const py::error_already_set&) {
      return false;
    }
  }();
  return available;
}

std::string TypeName(const py::handle& h) {
  return py::str(py::type::handle_of(h).attr("__name__")).cast<std::string>();
}

}  // namespace

py::object ViewAsArray(const Buffer& b, std::shared_ptr<const void> owner) {
  const DtypeInfo* d = FindDtype(b.dtype);
  std::vector<py::ssize_t> shape;
  py::dtype dtype("B");
  if (d != nullptr && d->kind != 'V' && CheckLayout(b).ok()) {
    dtype = py::dtype(std::string(d->format));
    shape.assign(b.shape.begin(), b.shape.end());
  } else {
    shape = {static_cast<py::ssize_t>(b.data.size())};
  }
  // NumPy allocates memory of its own for a null pointer, even of 0 bytes.
  static const std::byte kNoData{};
  const void* data = b.data.empty() ? &kNoData : b.data.data();
  py::array a(dtype, shape, {}, data, Keeper(std::move(owner)));
  a.attr("setflags")(py::arg("write") = false);
  return a;
}

py::object ValueOf(const Buffer& b, std::shared_ptr<const void> owner) {
  if (b.dtype == kBytesDtype) {
    return py::bytes(reinterpret_cast<const char*>(b.data.data()), b.data.size());
  }
  const DtypeInfo* d = FindDtype(b.dtype);
  if (d == nullptr || !CheckLayout(b).ok() || !NumpyAvailable()) return py::cast(b);
  return ViewAsArray(b, std::move(owner));
}

Buffer BufferFromValue(const py::handle& value, const std::string& what) {
  if (py::isinstance<py::bytes>(value) || py::isinstance<py::bytearray>(value) ||
      py::isinstance<py::memoryview>(value)) {
    Py_buffer view;
    if (PyObject_GetBuffer(value.ptr(), &view, PyBUF_C_CONTIGUOUS) != 0) {
      PyErr_Clear();
      Raise(Status::InvalidArgument(what + ": a " + TypeName(value) + " that is not C-contiguous"));
    }
    Buffer b =
        BytesBuffer({static_cast<const std::byte*>(view.buf), static_cast<size_t>(view.len)});
    PyBuffer_Release(&view);
    return b;
  }
  if (NumpyAvailable() && !py::isinstance<py::array>(value) &&
      py::isinstance(value, py::module_::import("numpy").attr("generic"))) {
    // A NumPy scalar (numpy.float32(2), what a reduction returns): rank 0.
    return BufferFromValue(py::module_::import("numpy").attr("asarray")(value), what);
  }
  if (!NumpyAvailable() || !py::isinstance<py::array>(value)) {
    Raise(Status::InvalidArgument(what + ": expected a numpy.ndarray or bytes, not " +
                                  TypeName(value)));
  }
  py::array a = py::reinterpret_borrow<py::array>(value);
  const py::dtype dt = a.dtype();
  const DtypeInfo* d = DtypeOfKind(dt.kind(), static_cast<size_t>(dt.itemsize()));
  if (d == nullptr) {
    Raise(Status::InvalidArgument(what + ": arrays of dtype " +
                                  py::str(dt.attr("name")).cast<std::string>() +
                                  " cannot travel (use bool, int, uint or float of 1 to 8 bytes)"));
  }
  // Little-endian and C-contiguous, as the data plane carries it: NumPy
  // copies only an array that is not so already.
  const std::string little = std::string("<") + dt.kind() + std::to_string(dt.itemsize());
  py::module_ np = py::module_::import("numpy");
  const py::object want = d->kind == 'b' ? py::object(py::dtype("?")) : np.attr("dtype")(little);
  // asarray, not ascontiguousarray, which makes a rank-0 array rank 1.
  py::array c = np.attr("asarray")(a, want, py::arg("order") = "C");
  Buffer b;
  b.dtype = std::string(d->name);
  b.shape.assign(c.shape(), c.shape() + c.ndim());
  b.data.resize(static_cast<size_t>(c.nbytes()));
  if (!b.data.empty()) std::memcpy(b.data.data(), c.data(), b.data.size());
  return b;
}

std::vector<Buffer> BuffersFromResult(const py::handle& result, const std::string& what) {
  std::vector<Buffer> out;
  if (result.is_none()) return out;
  if (py::isinstance<py::tuple>(result) || py::isinstance<py::list>(result)) {
    size_t i = 0;
    for (py::handle item : result) {
      out.push_back(BufferFromValue(item, what + " output " + std::to_string(i++)));
    }
    return out;
  }
  out.push_back(BufferFromValue(result, what));
  return out;
}

}  // namespace hmpmd::python
