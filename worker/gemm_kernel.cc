#include "gemm_kernel.h"

#include <algorithm>
#include <memory>
#include <stdexcept>
#include <string>

#include "f32_util.h"
#include "hmpmd/worker/actor_state.h"

namespace hmpmd::worker {
namespace {

// Blocking (for a core with 32 KiB L1 and >= 512 KiB L2):
//   1. a panel of B, kKc x kNc floats (256 KiB), stays in L2 while every
//      row block of A streams past it;
//   2. the micro-kernel updates 4 rows of C (4 x kNc floats, 4 KiB, in L1)
//      at once, so each B row loaded serves 4 rows of C;
//   3. the innermost loop runs over contiguous columns, which the compiler
//      vectorises (the file builds with -O3).
constexpr int64_t kKc = 256;
constexpr int64_t kNc = 256;
constexpr int64_t kMr = 4;
// How often a multiply asks whether its task was cancelled (a multiple of kMr).
constexpr int64_t kStopRows = 64 * kMr;

// C[0..rows) x [0..nc) += A[0..rows) x [0..kc) * B[0..kc) x [0..nc), rows <= kMr.
void MicroKernel(const float* a, int64_t lda, const float* b, int64_t ldb, float* c, int64_t ldc,
                 int64_t rows, int64_t kc, int64_t nc) {
  if (rows == kMr) {
    float* __restrict c0 = c;
    float* __restrict c1 = c + ldc;
    float* __restrict c2 = c + 2 * ldc;
    float* __restrict c3 = c + 3 * ldc;
    for (int64_t p = 0; p < kc; ++p) {
      const float a0 = a[p];
      const float a1 = a[lda + p];
      const float a2 = a[2 * lda + p];
      const float a3 = a[3 * lda + p];
      const float* __restrict bp = b + p * ldb;
      for (int64_t j = 0; j < nc; ++j) {
        const float bv = bp[j];
        c0[j] += a0 * bv;
        c1[j] += a1 * bv;
        c2[j] += a2 * bv;
        c3[j] += a3 * bv;
      }
    }
    return;
  }
  for (int64_t i = 0; i < rows; ++i) {
    float* __restrict ci = c + i * ldc;
    for (int64_t p = 0; p < kc; ++p) {
      const float ai = a[i * lda + p];
      const float* __restrict bp = b + p * ldb;
      for (int64_t j = 0; j < nc; ++j) ci[j] += ai * bp[j];
    }
  }
}

void CheckElements(int64_t rows, int64_t cols, const char* what) {
  if (rows * cols > kMaxKernelElements) {
    throw std::invalid_argument(std::string("gemm: ") + what + " has more than " +
                                std::to_string(kMaxKernelElements) + " elements");
  }
}

// The k x n weights of `args`' sub-model under "gemm B KxN" in its state,
// made (as a generated B) on the first call where there are none.
std::shared_ptr<const Buffer> StateWeights(const KernelArgs& args, int64_t k, int64_t n) {
  const std::string name = "gemm B " + std::to_string(k) + "x" + std::to_string(n);
  ActorState& state = args.state();
  if (std::shared_ptr<const Buffer> held = state.Get(name)) return held;
  std::vector<float> b(static_cast<size_t>(k * n));
  FillDeterministic(b, 2);
  // Update, not Put: two lanes making it at once keep one.
  state.Update(name, [&](Buffer& kept) {
    if (kept.data.empty()) kept = MakeF32(b, {k, n});
  });
  return state.Get(name);
}

}  // namespace

bool GemmF32(const float* a, const float* b, float* c, int64_t m, int64_t n, int64_t k,
             const KernelArgs* cancel) {
  std::fill(c, c + m * n, 0.0f);
  for (int64_t p0 = 0; p0 < k; p0 += kKc) {
    const int64_t kc = std::min(kKc, k - p0);
    for (int64_t j0 = 0; j0 < n; j0 += kNc) {
      const int64_t nc = std::min(kNc, n - j0);
      for (int64_t i0 = 0; i0 < m; i0 += kMr) {
        // Every kStopRows rows (at most 2 * 256 * 256 * kStopRows flops).
        if (cancel != nullptr && i0 % kStopRows == 0 && cancel->cancelled()) return false;
        const int64_t rows = std::min(kMr, m - i0);
        MicroKernel(a + i0 * k + p0, k, b + p0 * n + j0, n, c + i0 * n + j0, n, rows, kc, nc);
      }
    }
  }
  return true;
}

std::vector<Buffer> GemmKernel(const KernelArgs& args, std::span<const Buffer> inputs) {
  const int64_t m = SizeArg(args, "gemm", "m", 0);
  const int64_t n = SizeArg(args, "gemm", "n", 0);
  const int64_t k = SizeArg(args, "gemm", "k", 0);
  CheckElements(m, k, "A (m x k)");
  CheckElements(k, n, "B (k x n)");
  CheckElements(m, n, "C (m x n)");

  // Inputs that fit (A and B, or A alone) are used; other inputs are
  // ordering-only edges and the operands are generated.
  const size_t want_a = static_cast<size_t>(m * k), want_b = static_cast<size_t>(k * n);
  std::vector<float> a;
  std::vector<float> b;
  const std::string weights = args.String("weights", "");
  if (weights == "state") {
    // B is the sub-model's weights: made once where none are, then kept in
    // its state, which follows the sub-model to other workers
    // (docs/scheduling.md#live-state). A from inputs[0] when it fits.
    b = ReadF32(*StateWeights(args, k, n), "gemm", "the weights (B) in its state");
    if (!inputs.empty() && IsF32(inputs[0], want_a)) {
      a = ReadF32(inputs[0], "gemm", "inputs[0] (A)");
    } else {
      a.resize(want_a);
      FillDeterministic(a, 1);
    }
  } else if (!weights.empty()) {
    throw std::invalid_argument("gemm: weights must be \"state\" or absent, not \"" + weights +
                                "\"");
  } else if (inputs.size() == 2 && IsF32(inputs[0], want_a) && IsF32(inputs[1], want_b)) {
    a = ReadF32(inputs[0], "gemm", "inputs[0] (A)");
    b = ReadF32(inputs[1], "gemm", "inputs[1] (B)");
  } else if (inputs.size() == 1 && IsF32(inputs[0], want_a)) {
    a = ReadF32(inputs[0], "gemm", "inputs[0] (A)");
    b.resize(want_b);
    FillDeterministic(b, 2);
  } else {
    a.resize(want_a);
    b.resize(want_b);
    FillDeterministic(a, 1);
    FillDeterministic(b, 2);
  }
  std::vector<float> c(static_cast<size_t>(m * n));
  // A cancelled job frees its core within a few milliseconds, not when a
  // multiply of minutes ends.
  if (!GemmF32(a.data(), b.data(), c.data(), m, n, k, &args)) {
    throw std::runtime_error("gemm: cancelled");
  }
  std::vector<Buffer> out;
  out.push_back(MakeF32(c, {m, n}));
  return out;
}

}  // namespace hmpmd::worker
