#include "f32_util.h"

#include <cstring>
#include <stdexcept>
#include <string>

#include "hmpmd/protocol/tensor_bytes.h"

namespace hmpmd::worker {

std::vector<float> ReadF32(const Buffer& buffer, std::string_view kernel, std::string_view which) {
  std::string where = std::string(kernel) + ": " + std::string(which);
  if (buffer.dtype != "f32") {
    throw std::invalid_argument(where + " has dtype '" + buffer.dtype + "', expected 'f32'");
  }
  if (buffer.data.size() % sizeof(float) != 0) {
    throw std::invalid_argument(where + " holds " + std::to_string(buffer.data.size()) +
                                " bytes, not a whole number of floats");
  }
  const size_t count = buffer.data.size() / sizeof(float);
  if (!buffer.shape.empty()) {
    uint64_t want = 1;
    for (int64_t d : buffer.shape) {
      if (d < 0 || d > kMaxKernelElements) throw std::invalid_argument(where + " has a bad shape");
      want *= static_cast<uint64_t>(d);
      if (want > static_cast<uint64_t>(kMaxKernelElements)) {
        throw std::invalid_argument(where + " is too large");
      }
    }
    if (want != count) {
      throw std::invalid_argument(where + " has " + std::to_string(count) +
                                  " elements but its shape says " + std::to_string(want));
    }
  }
  std::vector<float> values(count);
  if (count > 0) std::memcpy(values.data(), buffer.data.data(), count * sizeof(float));
  return values;
}

Buffer MakeF32(std::span<const float> values, std::vector<int64_t> shape) {
  Buffer b;
  SizeTensorBytesForOverwrite(&b.data, values.size_bytes());
  if (!values.empty()) std::memcpy(b.data.data(), values.data(), values.size_bytes());
  b.shape = std::move(shape);
  b.dtype = "f32";
  return b;
}

void FillDeterministic(std::span<float> out, uint32_t stream) {
  for (size_t i = 0; i < out.size(); ++i) {
    const uint64_t h = i * 7 + uint64_t{stream} * 13;
    out[i] = static_cast<float>(static_cast<int>(h % 17) - 8) / 8.0f;
  }
}

int64_t SizeArg(const KernelArgs& args, std::string_view kernel, std::string_view name,
                int64_t fallback) {
  const std::string where = std::string(kernel) + ": argument '" + std::string(name) + "'";
  if (!args.Has(name)) {
    if (fallback > 0) return fallback;
    throw std::invalid_argument(where + " is required");
  }
  const int64_t v = args.Int(name, -1);
  if (v < 1 || v > kMaxKernelElements) {
    throw std::invalid_argument(where + " must be an integer in [1, " +
                                std::to_string(kMaxKernelElements) + "]");
  }
  return v;
}

}  // namespace hmpmd::worker
