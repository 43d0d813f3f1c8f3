// The `gemm` kernel: a cache-blocked float32 matrix multiply.
//
// Thread-safety: stateless; safe to run on several lanes at once.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "hmpmd/protocol/buffer.h"
#include "hmpmd/worker/kernel_args.h"

namespace hmpmd::worker {

// C = A * B for row-major A (m x k), B (k x n) and C (m x n); C is
// overwritten. REQUIRES: the three arrays do not overlap. With `cancel`,
// asks cancel->cancelled() every few hundred rows: once it is true the
// multiply stops and returns false (C is then partial).
bool GemmF32(const float* a, const float* b, float* c, int64_t m, int64_t n, int64_t k,
             const KernelArgs* cancel = nullptr);

// args m, n, k (required). A = inputs[0] and B = inputs[1] when given, else
// deterministic values. Returns C as {m, n}.
std::vector<Buffer> GemmKernel(const KernelArgs& args, std::span<const Buffer> inputs);

}  // namespace hmpmd::worker
