// The built-in kernel table, and the timing kernels noop, spin and sleep.
#include "hmpmd/worker/builtin_kernels.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <stdexcept>
#include <string>
#include <thread>

#include "elementwise_kernels.h"
#include "gemm_kernel.h"

namespace hmpmd::worker {
namespace {

std::vector<Buffer> NoopKernel(const KernelArgs&, std::span<const Buffer>) { return {}; }

// Argument `us` as a duration; absent means 0.
std::chrono::microseconds DurationArg(const KernelArgs& args, const char* kernel) {
  // Present but not a number reads as NaN, so it fails below, not as 0.
  const double us = args.Has("us") ? args.Number("us", NAN) : 0.0;
  // One day bounds a typo without limiting any real benchmark.
  constexpr double kMaxUs = 86400e6;
  if (!std::isfinite(us) || us < 0 || us > kMaxUs) {
    throw std::invalid_argument(std::string(kernel) +
                                ": argument 'us' must be a number in [0, 86400e6]");
  }
  return std::chrono::microseconds(static_cast<int64_t>(us));
}

// Busy for `us` microseconds of wall time, holding its core the way real
// compute would.
std::vector<Buffer> SpinKernel(const KernelArgs& args, std::span<const Buffer>) {
  const auto until = std::chrono::steady_clock::now() + DurationArg(args, "spin");
  while (std::chrono::steady_clock::now() < until) {
    if (args.cancelled()) throw std::runtime_error("spin: cancelled");
  }
  return {};
}

// Idle for `us` microseconds; the lane is occupied but the CPU is free.
std::vector<Buffer> SleepKernel(const KernelArgs& args, std::span<const Buffer>) {
  // In slices, so a cancelled job frees the lane within one slice.
  constexpr auto kSlice = std::chrono::milliseconds(10);
  const auto until = std::chrono::steady_clock::now() + DurationArg(args, "sleep");
  for (auto now = std::chrono::steady_clock::now(); now < until;
       now = std::chrono::steady_clock::now()) {
    if (args.cancelled()) throw std::runtime_error("sleep: cancelled");
    std::this_thread::sleep_for(std::min<std::chrono::steady_clock::duration>(kSlice, until - now));
  }
  return {};
}

// Pure communication: hands its inputs on to its consumers (who fetch them
// from this worker), or, without inputs, `bytes` bytes (default 4096).
std::vector<Buffer> SendKernel(const KernelArgs& args, std::span<const Buffer> inputs) {
  if (!inputs.empty()) return std::vector<Buffer>(inputs.begin(), inputs.end());
  const int64_t bytes = args.Has("bytes") ? args.Int("bytes", -1) : 4096;
  if (bytes < 0 || bytes > (int64_t{1} << 30)) {
    throw std::invalid_argument("send: argument 'bytes' must be in [0, 2^30]");
  }
  Buffer b;
  b.dtype = "u8";
  b.shape = {bytes};
  b.data.assign(static_cast<size_t>(bytes), std::byte{0x5a});
  return {std::move(b)};
}

// The collectives run on their gang inside the lane; a call through the
// kernel table means the task came without one.
std::vector<Buffer> GanglessCollective(const KernelArgs&, std::span<const Buffer>) {
  throw std::invalid_argument("collective kernel ran without a gang (no members assigned)");
}

}  // namespace

std::vector<NamedKernel> BuiltinKernels() {
  return {
      {"noop", NoopKernel},
      {"spin", SpinKernel},
      {"sleep", SleepKernel},
      {"gemm", GemmKernel},
      {"add", AddKernel},
      {"scale", ScaleKernel},
      {"send", SendKernel},
      {"allreduce", GanglessCollective},
      {"allgather", GanglessCollective},
      {"reduce_scatter", GanglessCollective},
      {"alltoall", GanglessCollective},
      {"broadcast", GanglessCollective},
  };
}

}  // namespace hmpmd::worker
