#include "hmpmd/scheduler/job_shares.h"

#include <algorithm>
#include <limits>

namespace hmpmd {

void JobShares::SetCores(const ResourcePool& pool) {
  for (size_t k = 0; k < kNumCoreKinds; ++k) {
    cores_[k] = pool.alive_cores(static_cast<CoreKind>(k));
  }
}

void JobShares::Join(Level& level, uint64_t key, double weight) const {
  Level::Account a;
  a.weight = weight;
  for (size_t k = 0; k < kNumCoreKinds; ++k) {
    // The least clock of the active members: no credit for the time before
    // it came, and no debt either.
    double least = std::numeric_limits<double>::infinity();
    for (const auto& [id, other] : level.members)
      least = std::min(least, std::max(other.clock[k], Floor(level, k)));
    a.clock[k] = level.members.empty() ? level.lead[k] : least;
  }
  level.members.emplace(key, a);
  level.total_weight += a.weight;
}

void JobShares::Leave(Level& level, uint64_t key) {
  auto it = level.members.find(key);
  if (it == level.members.end()) return;
  level.total_weight -= it->second.weight;
  level.members.erase(it);
  if (level.members.empty()) level = Level{};
}

void JobShares::Advance(Level& level, uint64_t key, size_t k, double core_us) const {
  Level::Account& a = level.members.at(key);
  const double step = core_us * level.total_weight / (a.weight * cores_[k]);
  a.clock[k] = std::max(a.clock[k], Floor(level, k)) + step;
  level.lead[k] = std::max(level.lead[k], a.clock[k]);
  level.max_step[k] = std::max(level.max_step[k], step);
}

double JobShares::ClockIn(const Level& level, uint64_t key, size_t k) const {
  return std::max(level.members.at(key).clock[k], Floor(level, k));
}

void JobShares::AddJob(JobId job, uint32_t weight, const JobTenant& tenant) {
  if (tenant_of_.contains(job)) return;
  const double share = std::max(1u, tenant.share);
  auto [it, fresh] = by_name_.try_emplace(tenant.name);
  Tenant& t = it->second;
  if (fresh) {
    t.key = next_tenant_key_++;
    Join(tenants_, t.key, share);
  } else if (Level::Account& a = tenants_.members.at(t.key); a.weight != share) {
    tenants_.total_weight += share - a.weight;
    a.weight = share;
  }
  Join(t.jobs, job, std::max(1u, weight));
  tenant_of_.emplace(job, &t);
}

void JobShares::RemoveJob(JobId job) {
  auto it = tenant_of_.find(job);
  if (it == tenant_of_.end()) return;
  Tenant& t = *it->second;
  tenant_of_.erase(it);
  Leave(t.jobs, job);
  if (!t.jobs.members.empty()) return;
  Leave(tenants_, t.key);
  std::erase_if(by_name_, [&t](const auto& e) { return &e.second == &t; });
}

void JobShares::Charge(JobId job, CoreKind kind, double core_us) {
  auto it = tenant_of_.find(job);
  const size_t k = Index(kind);
  if (it == tenant_of_.end() || cores_[k] <= 0 || !(core_us == core_us)) return;
  Advance(it->second->jobs, job, k, core_us);
  Advance(tenants_, it->second->key, k, core_us);
}

JobShares::Standing JobShares::StandingOf(JobId job, CoreKind kind) const {
  auto it = tenant_of_.find(job);
  if (it == tenant_of_.end()) return {};
  const Tenant& t = *it->second;
  const size_t k = Index(kind);
  return {ClockIn(tenants_, t.key, k), ClockIn(t.jobs, job, k), t.jobs.members.size()};
}

double JobShares::Clock(JobId job, CoreKind kind) const { return StandingOf(job, kind).job_clock; }

double JobShares::TenantClock(JobId job, CoreKind kind) const {
  return StandingOf(job, kind).tenant_clock;
}

size_t JobShares::Siblings(JobId job) const { return StandingOf(job, CoreKind::kCube).siblings; }

}  // namespace hmpmd
