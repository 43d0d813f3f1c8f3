#include "hmpmd/scheduler/job_shares.h"

#include <algorithm>
#include <limits>

namespace hmpmd {

void JobShares::SetCores(const ResourcePool& pool) {
  for (size_t k = 0; k < kNumCoreKinds; ++k) {
    cores_[k] = pool.alive_cores(static_cast<CoreKind>(k));
  }
}

void JobShares::AddJob(JobId job, uint32_t weight) {
  if (jobs_.contains(job)) return;
  Account a;
  a.weight = std::max(1u, weight);
  for (size_t k = 0; k < kNumCoreKinds; ++k) {
    // The least clock of the active jobs: no credit for the time before
    // it came, and no debt either.
    double least = std::numeric_limits<double>::infinity();
    for (const auto& [id, other] : jobs_)
      least = std::min(least, std::max(other.clock[k], Floor(k)));
    a.clock[k] = jobs_.empty() ? lead_[k] : least;
  }
  jobs_.emplace(job, a);
  total_weight_ += a.weight;
}

void JobShares::RemoveJob(JobId job) {
  auto it = jobs_.find(job);
  if (it == jobs_.end()) return;
  total_weight_ -= it->second.weight;
  jobs_.erase(it);
  if (jobs_.empty()) {
    lead_ = {};
    max_step_ = {};
    total_weight_ = 0;
  }
}

void JobShares::Charge(JobId job, CoreKind kind, double core_us) {
  auto it = jobs_.find(job);
  const size_t k = Index(kind);
  if (it == jobs_.end() || cores_[k] <= 0 || !(core_us == core_us)) return;
  double& clock = it->second.clock[k];
  const double step = core_us * total_weight_ / (it->second.weight * cores_[k]);
  clock = std::max(clock, Floor(k)) + step;
  lead_[k] = std::max(lead_[k], clock);
  max_step_[k] = std::max(max_step_[k], step);
}

double JobShares::Clock(JobId job, CoreKind kind) const {
  auto it = jobs_.find(job);
  if (it == jobs_.end()) return 0;
  const size_t k = Index(kind);
  return std::max(it->second.clock[k], Floor(k));
}

}  // namespace hmpmd
