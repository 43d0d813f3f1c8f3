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
  const double us = args.Number("us", 0.0);
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

}  // namespace

std::vector<NamedKernel> BuiltinKernels() {
  return {
      {"noop", NoopKernel}, {"spin", SpinKernel}, {"sleep", SleepKernel},
      {"gemm", GemmKernel}, {"add", AddKernel},   {"scale", ScaleKernel},
  };
}

}  // namespace hmpmd::worker
