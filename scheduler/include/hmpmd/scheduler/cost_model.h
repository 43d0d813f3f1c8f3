// CostModel: how long a task takes, from its hints, then from what was seen.
//
// 1. A prior from the spec: `spin`/`sleep` take args.us; `gemm` takes
//    2*m*n*k flops; otherwise cost.flops over the core kind's throughput plus
//    cost.bytes over the link bandwidth; a kernel with no hint costs
//    default_us.
// 2. Live, Observe() folds each measured duration into an exponentially
//    weighted mean per (kernel, size bucket); once a bucket has a sample the
//    estimate is that mean, so decisions follow the machine we run on.
// 3. Per device, compute durations (not spin/sleep timers, not
//    communication) over the calibrated mean of their bucket give the
//    device's speed factor (an exponentially weighted mean, starting at 1):
//    a worker on a slower machine gets longer estimates on every compute
//    kernel, and its samples enter the per-kernel means divided by its
//    factor, so they do not skew the estimates for the other devices.
// Thread-safety: not thread-safe; owned by the scheduler's single thread.
#pragma once

#include <cstdint>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "hmpmd/protocol/job_spec.h"
#include "hmpmd/protocol/types.h"

namespace hmpmd {

struct CostModelOptions {
  // Matrix throughput of one core, in flops per microsecond. Default: 2e4
  // (20 GFLOP/s, a CPU core running the built-in gemm); pools override it.
  double cube_flops_per_us = 2e4;
  // Element-wise throughput of one vector core. Default: 5e3.
  double vector_flops_per_us = 5e3;
  // Bandwidth and latency of moving bytes between devices. Defaults: 2000
  // bytes/us (2 GB/s, loopback TCP) and 30 us.
  double link_bytes_per_us = 2000;
  double link_latency_us = 30;
  // Estimate for a kernel with no hint and no sample yet. Default: 5 us.
  double default_us = 5;
  // Weight of a new sample in the running mean. Higher adapts faster and
  // trusts noise more. Default: 0.25.
  double ewma_alpha = 0.25;
};

class CostModel {
 public:
  explicit CostModel(CostModelOptions options = {}) : options_(options) {}

  // Estimated run time in microseconds on a core of `kind`, at least 1.
  double Estimate(const TaskSpec& task, CoreKind kind) const;
  // The prior alone, ignoring samples.
  double Prior(const TaskSpec& task, CoreKind kind) const;
  // Folds a measured duration into the calibrated mean of the task's bucket.
  void Observe(const TaskSpec& task, double duration_us);
  // Samples seen for the task's bucket.
  uint64_t Samples(const TaskSpec& task) const;

  // The estimate on `device`: Estimate() times the device's speed factor
  // for compute kernels.
  double Estimate(const TaskSpec& task, CoreKind kind, uint32_t device) const;
  // Folds a duration measured on `device` into its speed factor and the
  // task's bucket (see 3. above).
  void Observe(const TaskSpec& task, double duration_us, uint32_t device);
  // The device's speed factor: its compute durations over the calibrated
  // means (1 until it has reported one).
  double DeviceFactor(uint32_t device) const;

  const CostModelOptions& options() const { return options_; }

 private:
  struct Ewma {
    double mean = 0;
    uint64_t samples = 0;
  };
  static uint64_t BucketKey(const TaskSpec& task);

  CostModelOptions options_;
  std::unordered_map<uint64_t, Ewma> calibrated_;
  std::vector<double> device_factor_;  // by device id; 1 where unknown
};

}  // namespace hmpmd
