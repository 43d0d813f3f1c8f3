// JobShares: weighted fair sharing of a pool's cores between jobs, one
// virtual clock per job and core kind (HmpmdPolicy, rule 5).
//
// A job's clock of kind k advances by the core time of kind k it holds x
// the sum of the active jobs' weights / (its weight x the pool's alive cores
// of kind k): by one microsecond per microsecond while it holds exactly its
// fair share (weight / sum of weights) of those cores. The job whose clock
// is furthest behind is owed the most, so ordering ready work by clock
// gives each job its share of every core kind while all have ready work;
// a job without ready work leaves its cores to the others (the order never
// idles a core).
//
// Charging: at placement with the estimate, so one scheduling pass already
// alternates between jobs; again when the run ends, with its measured run
// time minus that estimate (estimates are per kernel and size bucket and
// blend the jobs' tasks: charging estimates alone gave one job of a
// multimodal + moe mix 62% of the cube cores at equal weights).
//
// Lag bound: a clock never trails the most advanced clock of its kind by
// more than max_lag_us (or twice the largest single charge seen, for tasks
// long enough that one placement moves a clock further), so a job that had
// no ready work of a kind for a while (or got less because it had too
// little) banks at most that much credit and does not then take the cores
// alone for as long as it was short. A job joins at the least clock of the
// active jobs; when the last job leaves, the clocks start again from 0
// (keeping them small keeps the policy's priorities exact).
//
// Thread-safety: not thread-safe; owned by the policy (scheduler thread).
#pragma once

#include <algorithm>
#include <array>
#include <cstddef>
#include <unordered_map>

#include "hmpmd/scheduler/job_graph.h"
#include "hmpmd/scheduler/resource_pool.h"

namespace hmpmd {

class JobShares {
 public:
  struct Options {
    // Credit (microseconds of fair-share time) a job may bank while it
    // cannot use its share; see the lag bound above.
    double max_lag_us = 20'000;
  };

  JobShares() = default;
  explicit JobShares(Options options) : options_(options) {}

  // Counts the pool's alive cores of each kind (on admission and when
  // devices join or die).
  void SetCores(const ResourcePool& pool);
  // A job of weight `weight` (0 counts as 1) joins at the least clock of
  // the active jobs; adding a known job changes nothing.
  void AddJob(JobId job, uint32_t weight);
  void RemoveJob(JobId job);
  // Adds `core_us` of `kind` held by `job` (negative: a correction down).
  // Unknown jobs are ignored.
  void Charge(JobId job, CoreKind kind, double core_us);
  // The job's clock of `kind` with the lag bound applied (0: unknown job).
  // Never falls but for a negative Charge().
  double Clock(JobId job, CoreKind kind) const;

  size_t size() const { return jobs_.size(); }
  double cores(CoreKind kind) const { return cores_[Index(kind)]; }

 private:
  struct Account {
    double weight = 1;
    std::array<double, kNumCoreKinds> clock{};
  };
  static size_t Index(CoreKind kind) { return static_cast<size_t>(kind); }
  double Floor(size_t k) const {
    return lead_[k] - std::max(options_.max_lag_us, 2 * max_step_[k]);
  }

  Options options_;
  std::unordered_map<JobId, Account> jobs_;
  std::array<double, kNumCoreKinds> lead_{};      // most advanced clock by kind
  std::array<double, kNumCoreKinds> cores_{};     // alive cores by kind
  std::array<double, kNumCoreKinds> max_step_{};  // largest clock advance
  double total_weight_ = 0;
};

}  // namespace hmpmd
