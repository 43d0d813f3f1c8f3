// JobShares: weighted fair sharing of a pool's cores, first between
// tenants by their shares, then between each tenant's jobs by their
// weights (HmpmdPolicy, rule 5). One virtual clock per member and core
// kind at each level.
//
// A member's clock of kind k advances by the core time of kind k it holds
// x the sum of its level's active weights / (its weight x the pool's alive
// cores of kind k): by one microsecond per microsecond while it holds
// exactly its fair share (weight / sum of weights) of those cores. A
// tenant's clock counts the core time of all its jobs against the other
// tenants; a job's clock counts its own against its tenant's other jobs.
// The tenant furthest behind is owed the most, and inside it the job
// furthest behind, so ordering ready work by those clocks gives each
// tenant its share of every core kind while all have ready work, and each
// job its part of its tenant's; a member without ready work leaves its
// cores to the others: first to its tenant's other jobs, else to the
// other tenants (the order never idles a core). Jobs submitted without
// tokens all belong to the tenant "", so without tenants this is weighted
// fair sharing between jobs.
//
// Charging: at placement with the estimate, so one scheduling pass already
// alternates between jobs; again when the run ends, with its measured run
// time minus that estimate (estimates are per kernel and size bucket and
// blend the jobs' tasks: charging estimates alone gave one job of a
// multimodal + moe mix 62% of the cube cores at equal weights).
//
// Lag bound: at each level a clock never trails the most advanced clock of
// its kind by more than max_lag_us (or twice the largest single charge
// seen, for tasks long enough that one placement moves a clock further),
// so a member that had no ready work of a kind for a while (or got less
// because it had too little) banks at most that much credit and does not
// then take the cores alone for as long as it was short. A member joins at
// the least clock of its level's active members; when a level's last
// member leaves, its clocks start again from 0 (keeping them small keeps
// the policy's priorities exact).
//
// Thread-safety: not thread-safe; owned by the policy (scheduler thread).
#pragma once

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
#include <unordered_map>

#include "hmpmd/scheduler/job_graph.h"
#include "hmpmd/scheduler/job_run.h"
#include "hmpmd/scheduler/resource_pool.h"

namespace hmpmd {

class JobShares {
 public:
  struct Options {
    // Credit (microseconds of fair-share time) a job or tenant may bank
    // while it cannot use its share; see the lag bound above.
    double max_lag_us = 20'000;
  };

  JobShares() = default;
  explicit JobShares(Options options) : options_(options) {}

  // Counts the pool's alive cores of each kind (on admission and when
  // devices join or die).
  void SetCores(const ResourcePool& pool);
  // A job of weight `weight` (0 counts as 1) of `tenant` joins at the least
  // clock of its tenant's active jobs, and a tenant new to the pool at the
  // least clock of the active tenants. The tenant's share (0 counts as 1)
  // becomes tenant.share: a changed share holds from its next job on.
  // Adding a known job changes nothing.
  void AddJob(JobId job, uint32_t weight, const JobTenant& tenant = {});
  void RemoveJob(JobId job);
  // Adds `core_us` of `kind` held by `job` (negative: a correction down)
  // to the job's clock and its tenant's. Unknown jobs are ignored.
  void Charge(JobId job, CoreKind kind, double core_us);
  // The job's clock of `kind` among its tenant's jobs, with the lag bound
  // applied (0: unknown job). Never falls but for a negative Charge().
  double Clock(JobId job, CoreKind kind) const;
  // The clock of `kind` of the job's tenant among the tenants (0: unknown).
  double TenantClock(JobId job, CoreKind kind) const;

  // Where a job stands, in one lookup (the policy asks it per priority).
  struct Standing {
    double tenant_clock = 0;  // TenantClock()
    double job_clock = 0;     // Clock()
    size_t siblings = 0;      // Siblings()
  };
  Standing StandingOf(JobId job, CoreKind kind) const;

  size_t size() const { return tenant_of_.size(); }           // active jobs
  size_t tenants() const { return tenants_.members.size(); }  // with active jobs
  // Active jobs of the job's tenant, the job included (0: unknown job).
  size_t Siblings(JobId job) const;
  double cores(CoreKind kind) const { return cores_[Index(kind)]; }

 private:
  using Kinds = std::array<double, kNumCoreKinds>;
  // The members of one level (the tenants, or one tenant's jobs) and
  // their clocks.
  struct Level {
    struct Account {
      double weight = 1;
      Kinds clock{};
    };
    std::unordered_map<uint64_t, Account> members;
    Kinds lead{};      // most advanced clock by kind
    Kinds max_step{};  // largest clock advance
    double total_weight = 0;
  };
  struct Tenant {
    uint64_t key = 0;  // in tenants_
    Level jobs;
  };
  static size_t Index(CoreKind kind) { return static_cast<size_t>(kind); }
  double Floor(const Level& level, size_t k) const {
    return level.lead[k] - std::max(options_.max_lag_us, 2 * level.max_step[k]);
  }
  void Join(Level& level, uint64_t key, double weight) const;
  static void Leave(Level& level, uint64_t key);
  void Advance(Level& level, uint64_t key, size_t k, double core_us) const;
  double ClockIn(const Level& level, uint64_t key, size_t k) const;

  Options options_;
  Kinds cores_{};  // alive cores by kind
  Level tenants_;
  std::unordered_map<std::string, Tenant> by_name_;  // tenants with active jobs
  std::unordered_map<JobId, Tenant*> tenant_of_;     // nodes: stable pointers
  uint64_t next_tenant_key_ = 0;
};

}  // namespace hmpmd
