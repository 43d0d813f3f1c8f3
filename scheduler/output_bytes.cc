#include "hmpmd/scheduler/output_bytes.h"

#include <algorithm>
#include <numeric>

namespace hmpmd {
namespace {

constexpr uint64_t kUnknown = UINT64_MAX;

uint64_t NumberArg(const TaskSpec& spec, std::string_view name, uint64_t fallback) {
  const double x = ArgNumber(spec.args, name, -1);
  return x >= 0 ? static_cast<uint64_t>(x) : fallback;
}

}  // namespace

// Mirrors what worker/builtin_kernels.cc, elementwise_kernels.cc,
// gemm_kernel.cc and collective_kernels.cc store; a guess may be off where
// inputs are not f32 (the kernels then generate data by `n`), which only
// moves a placement.
OutputGuess GuessOutputBytes(const TaskSpec& spec, std::span<const uint64_t> inputs,
                             uint32_t group_size) {
  const std::string& k = spec.kernel;
  if (k == "noop" || k == "spin" || k == "sleep") return {true, 0};
  // A driver's put keeps the bytes the driver put, which it says.
  if (k == kPutKernel) {
    const double bytes = ArgNumber(spec.args, "bytes", -1);
    return bytes >= 0 ? OutputGuess{true, static_cast<uint64_t>(bytes)} : OutputGuess{};
  }
  if (k == "gemm") {
    const uint64_t m = NumberArg(spec, "m", 0), n = NumberArg(spec, "n", 0);
    if (m == 0 || n == 0) return {};
    return {true, m * n * 4};
  }
  const bool reads = k == "send" || k == "add" || k == "scale" || IsCollectiveKernel(k);
  if (!reads) return {};  // a worker's own kernel
  if (std::find(inputs.begin(), inputs.end(), kUnknown) != inputs.end()) return {};
  const uint64_t in = std::accumulate(inputs.begin(), inputs.end(), uint64_t{0});
  if (k == "send") return {true, in > 0 ? in : NumberArg(spec, "bytes", 4096)};
  const uint64_t generated = 4 * NumberArg(spec, "n", 1024);
  if (k == "add") {
    // Two inputs of one size are added; else they order only.
    const bool data = inputs.size() == 2 && inputs[0] == inputs[1] && inputs[0] > 0;
    return {true, data ? inputs[0] : generated};
  }
  if (k == "scale") return {true, inputs.size() == 1 && in > 0 ? in : generated};
  // A collective member sends its inputs' data, else `n`, `bytes` / 4 or
  // 1024 elements; what it keeps depends on the op.
  uint64_t mine = in / 4 * 4;
  if (mine == 0) {
    mine = ArgNumber(spec.args, "n", -1) >= 0 ? generated : NumberArg(spec, "bytes", 4096) / 4 * 4;
  }
  const uint64_t p = std::max<uint32_t>(group_size, 1);
  if (k == "allgather") return {true, mine * p};
  if (k == "reduce_scatter") return {true, (mine / 4 + p - 1) / p * 4};
  return {true, mine};  // allreduce; broadcast and alltoall when sizes agree
}

}  // namespace hmpmd
