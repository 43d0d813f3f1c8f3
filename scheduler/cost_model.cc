#include "hmpmd/scheduler/cost_model.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <functional>

namespace hmpmd {
namespace {

// The number that sets a task's size: what its duration scales with.
double SizeOf(const TaskSpec& t) {
  if (t.kernel == "spin" || t.kernel == "sleep") return ArgNumber(t.args, "us", 0);
  if (t.kernel == "gemm") {
    return 2.0 * ArgNumber(t.args, "m", 0) * ArgNumber(t.args, "n", 0) * ArgNumber(t.args, "k", 0);
  }
  return t.cost.flops + CommBytes(t) + ArgNumber(t.args, "n", 0);
}

// Compute whose time follows the device's speed: not a timer (spin,
// sleep), not communication (its time follows the links).
bool ScalesWithDevice(const TaskSpec& t) {
  return t.kernel != "spin" && t.kernel != "sleep" && !IsCommKernel(t.kernel) && !t.collective;
}

}  // namespace

uint64_t CostModel::BucketKey(const TaskSpec& task) {
  // Sizes within a factor of two share a bucket.
  double size = SizeOf(task);
  uint64_t bucket = size < 1 ? 0 : static_cast<uint64_t>(std::ilogb(size)) + 1;
  return std::hash<std::string_view>{}(task.kernel) * 31 + bucket;
}

double CostModel::Prior(const TaskSpec& t, CoreKind kind) const {
  if (t.kernel == "spin" || t.kernel == "sleep") return std::max(1.0, ArgNumber(t.args, "us", 0));
  double flops_per_us =
      kind == CoreKind::kCube ? options_.cube_flops_per_us : options_.vector_flops_per_us;
  double flops = t.cost.flops;
  if (t.kernel == "gemm" && flops == 0) flops = SizeOf(t);
  const double bytes = CommBytes(t);
  double us = flops / flops_per_us;
  if (bytes > 0) us += options_.link_latency_us + bytes / options_.link_bytes_per_us;
  if (us <= 0) us = options_.default_us;
  return std::max(1.0, us);
}

double CostModel::Estimate(const TaskSpec& t, CoreKind kind) const {
  if (!calibrated_.empty()) {
    auto it = calibrated_.find(BucketKey(t));
    if (it != calibrated_.end()) return std::max(1.0, it->second.mean);
  }
  return Prior(t, kind);
}

void CostModel::Observe(const TaskSpec& t, double duration_us) {
  if (!(duration_us >= 0)) return;  // also rejects NaN
  Ewma& e = calibrated_[BucketKey(t)];
  e.mean = e.samples == 0 ? duration_us : e.mean + options_.ewma_alpha * (duration_us - e.mean);
  ++e.samples;
}

uint64_t CostModel::Samples(const TaskSpec& t) const {
  auto it = calibrated_.find(BucketKey(t));
  return it == calibrated_.end() ? 0 : it->second.samples;
}

}  // namespace hmpmd

namespace hmpmd {

double CostModel::DeviceFactor(uint32_t device) const {
  return device < device_factor_.size() ? device_factor_[device] : 1.0;
}

double CostModel::Estimate(const TaskSpec& t, CoreKind kind, uint32_t device) const {
  double us = Estimate(t, kind);
  return ScalesWithDevice(t) ? std::max(1.0, us * DeviceFactor(device)) : us;
}

void CostModel::Observe(const TaskSpec& t, double duration_us, uint32_t device) {
  if (!(duration_us >= 0)) return;  // also rejects NaN
  if (!ScalesWithDevice(t)) {
    Observe(t, duration_us);
    return;
  }
  if (device >= device_factor_.size()) device_factor_.resize(device + 1, 1.0);
  double& factor = device_factor_[device];
  auto it = calibrated_.find(BucketKey(t));
  if (it != calibrated_.end() && it->second.mean > 0) {
    // This device against the calibrated mean (other devices' samples
    // divided by their factors), floored at 1 us as Estimate() is: against
    // a mean below that, sub-microsecond kernels (noop) fed the factor and
    // the mean into each other until estimates overflowed.
    factor += options_.ewma_alpha * (duration_us / std::max(1.0, it->second.mean) - factor);
    factor = std::clamp(factor, 1e-3, 1e3);
  }
  Observe(t, duration_us / factor);
}

}  // namespace hmpmd
