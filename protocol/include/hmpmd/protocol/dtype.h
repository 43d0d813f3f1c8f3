// Element types of a Buffer: the names that travel in a buffer's meta
// (data_frames.h, EncodeMeta) with its shape, and the checks that a shape
// describes a buffer's bytes. C++ kernels, the Python worker and drivers
// read and write the same names, so an array put by a Python driver reaches
// a C++ kernel as the same dtype and shape, and back.
//
// Thread-safety: pure functions over a constant table.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "hmpmd/protocol/buffer.h"
#include "hmpmd/protocol/status.h"

namespace hmpmd {

// Raw bytes: a buffer of this dtype has the shape {size} and is handed to
// Python as `bytes`, not as an array.
inline constexpr std::string_view kBytesDtype = "bytes";

// One element type.
struct DtypeInfo {
  std::string_view name;  // as in Buffer::dtype: "f32", "i64", "bool", "bytes"
  size_t itemsize;        // bytes per element
  // NumPy's array-interface kind and Python's struct format of one element
  // ("f" and "f" for f32; 'b' and "?" for bool; 'V' and "B" for bytes).
  char kind;
  std::string_view format;
};

// The known dtypes: f16 f32 f64 i8 i16 i32 i64 u8 u16 u32 u64 bool bytes.
std::span<const DtypeInfo> KnownDtypes();

// The entry of `name`, or nullptr when it is not a known dtype (a kernel
// may still use a dtype of its own; it travels as bytes).
const DtypeInfo* FindDtype(std::string_view name);

// The dtype of NumPy kind `kind` ('f', 'i', 'u', 'b') and item size, or
// nullptr for one HyperMPMD has no name for (complex, datetime, ...).
const DtypeInfo* DtypeOfKind(char kind, size_t itemsize);

// Ok when `b` is a tensor whose dtype is known and whose shape describes its
// bytes exactly (product of the dims x itemsize, without overflow; a rank-0
// shape is one element). InvalidArgument naming what is wrong otherwise,
// e.g. "shape [2, 3] of f32 is 24 bytes, the data 20".
Status CheckLayout(const Buffer& b);

// A tensor of `dtype` and `shape` holding a copy of `data`; InvalidArgument
// as CheckLayout when they do not agree.
Result<Buffer> MakeTensor(std::string_view dtype, std::vector<int64_t> shape,
                          std::span<const std::byte> data);

// A copy of `data` as raw bytes (dtype kBytesDtype, shape {size}).
Buffer BytesBuffer(std::span<const std::byte> data);

}  // namespace hmpmd
