#include "hmpmd/protocol/dtype.h"

#include <cstring>
#include <utility>

namespace hmpmd {
namespace {

constexpr DtypeInfo kDtypes[] = {
    {"f16", 2, 'f', "e"},       {"f32", 4, 'f', "f"}, {"f64", 8, 'f', "d"}, {"i8", 1, 'i', "b"},
    {"i16", 2, 'i', "h"},       {"i32", 4, 'i', "i"}, {"i64", 8, 'i', "q"}, {"u8", 1, 'u', "B"},
    {"u16", 2, 'u', "H"},       {"u32", 4, 'u', "I"}, {"u64", 8, 'u', "Q"}, {"bool", 1, 'b', "?"},
    {kBytesDtype, 1, 'V', "B"},
};

std::string ShapeText(const std::vector<int64_t>& shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

}  // namespace

std::span<const DtypeInfo> KnownDtypes() { return kDtypes; }

const DtypeInfo* FindDtype(std::string_view name) {
  for (const DtypeInfo& d : kDtypes) {
    if (d.name == name) return &d;
  }
  return nullptr;
}

const DtypeInfo* DtypeOfKind(char kind, size_t itemsize) {
  for (const DtypeInfo& d : kDtypes) {
    if (d.kind == kind && d.itemsize == itemsize && d.kind != 'V') return &d;
  }
  return nullptr;
}

Status CheckLayout(const Buffer& b) {
  const DtypeInfo* d = FindDtype(b.dtype);
  if (d == nullptr) return Status::InvalidArgument("dtype '" + b.dtype + "' is not a known dtype");
  uint64_t bytes = d->itemsize;
  for (int64_t dim : b.shape) {
    if (dim < 0) {
      return Status::InvalidArgument("shape " + ShapeText(b.shape) + ": a negative dimension");
    }
    if (__builtin_mul_overflow(bytes, static_cast<uint64_t>(dim), &bytes)) {
      return Status::InvalidArgument("shape " + ShapeText(b.shape) + " of " + b.dtype +
                                     " overflows 64 bits");
    }
  }
  if (bytes != b.data.size()) {
    return Status::InvalidArgument("shape " + ShapeText(b.shape) + " of " + b.dtype + " is " +
                                   std::to_string(bytes) + " bytes, the data " +
                                   std::to_string(b.data.size()));
  }
  return Status::Ok();
}

Result<Buffer> MakeTensor(std::string_view dtype, std::vector<int64_t> shape,
                          std::span<const std::byte> data) {
  Buffer b;
  b.dtype = std::string(dtype);
  b.shape = std::move(shape);
  b.data.assign(data.begin(), data.end());
  RETURN_IF_ERROR(CheckLayout(b));
  return b;
}

Buffer BytesBuffer(std::span<const std::byte> data) {
  Buffer b;
  b.dtype = std::string(kBytesDtype);
  b.shape = {static_cast<int64_t>(data.size())};
  b.data.assign(data.begin(), data.end());
  return b;
}

}  // namespace hmpmd
