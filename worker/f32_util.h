// Helpers the float32 kernels share: reading and making "f32" Buffers,
// deterministic inputs and argument checks. Each throws
// std::invalid_argument with a message naming the kernel and the culprit.
//
// Thread-safety: free functions over values; safe from any thread.
#pragma once

#include <cstdint>
#include <span>
#include <string_view>
#include <vector>

#include "hmpmd/protocol/buffer.h"
#include "hmpmd/worker/kernel_args.h"

namespace hmpmd::worker {

// Largest element count a built-in kernel allocates for one tensor (1 GiB
// of floats); beyond it the task fails instead of the worker running out of
// memory.
inline constexpr int64_t kMaxKernelElements = int64_t{1} << 28;

// The elements of `buffer`, which must be dtype "f32" with a data size that
// matches its shape (an empty shape means a flat vector).
std::vector<float> ReadF32(const Buffer& buffer, std::string_view kernel, std::string_view which);
// True when `buffer` is f32 with exactly `elements` elements.
inline bool IsF32(const Buffer& buffer, size_t elements) {
  return buffer.dtype == "f32" && buffer.data.size() == elements * sizeof(float);
}

// An "f32" Buffer holding `values` with `shape`.
Buffer MakeF32(std::span<const float> values, std::vector<int64_t> shape);

// Fills `out` with values that depend only on the index and `stream`: small
// multiples of 1/8 in [-1, 1], so sums of their products stay exact.
void FillDeterministic(std::span<float> out, uint32_t stream);

// Argument `name` as an integer in [1, kMaxKernelElements]; `fallback` when
// absent, or a throw when absent and `fallback` is 0.
int64_t SizeArg(const KernelArgs& args, std::string_view kernel, std::string_view name,
                int64_t fallback);

}  // namespace hmpmd::worker
