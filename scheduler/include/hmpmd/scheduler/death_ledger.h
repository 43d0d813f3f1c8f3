// DeathLedger: which runs a worker's death is blamed on
// (SchedulerOptions::max_worker_deaths). It keeps what each device's
// worker last said its lanes have started and not finished, and, when the
// device dies, names the runs that died with it and charges them.
//
// Blame, for a worker that died, lane by lane:
//  1. Its worker tells which run each busy lane has started and not
//     finished, in every heartbeat, with every batch of results and when it
//     registers (Report keeps the last word). A run it named that is still
//     running as the same attempt (no result came since) died with it and
//     is charged. Every busy lane's is (any of them may have killed it; a
//     bystander is failed only if it dies beside such a run on
//     max_worker_deaths workers). Runs queued behind it are not; nor are
//     runs dispatched to the lane before it, whose results died with the
//     worker: they had finished, or it would not have started.
//  2. A lane whose last word names no run still running (idle then, or its
//     run's result came since, and with it the results of the runs before
//     it) may have started one after that word, which then killed the
//     worker before the next word could leave (a kernel that aborts at
//     once). A lane runs its queue in dispatch order (lane_seq), so that is
//     the first dispatched of the runs still on it; it is charged. Runs
//     sent ahead of an unfinished input (pending > 0) cannot have started.
//     A lane holding a run adopted after a restart (lane_seq 0, order
//     unknown) that its worker did not name charges none.
// Thread-safety: not thread-safe; owned by the scheduler's thread.
#pragma once

#include <cstdint>
#include <map>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "hmpmd/scheduler/job_run.h"
#include "hmpmd/scheduler/resource_pool.h"

namespace hmpmd {

class DeathLedger {
 public:
  // Device `id`'s worker says its lanes run `runs` now, replacing what it
  // said before. At most one run per lane is kept: a longer list (from the
  // network) is cut to `lanes`, so what is kept stays bounded by the cores.
  void Report(DeviceId id, std::span<const StartedRun> runs, size_t lanes);
  // Forgets what device `id`'s worker said (it is gone).
  void Forget(DeviceId id);
  // The runs of `jobs` charged with the death of device `id` of `pool`, as
  // (job, run), by the rules above. REQUIRES: `id` is still in the pool
  // with its runs on its cores.
  std::vector<std::pair<JobId, uint32_t>> Blamed(DeviceId id, const ResourcePool& pool,
                                                 const std::map<JobId, JobRun>& jobs) const;
  // Charges the death of device `id` to run `run` of `job`, which has used
  // `attempts_used` attempts of `max_attempts`; returns the error to fail
  // it with, and sets `*retryable` false once it has seen
  // `max_worker_deaths` workers die (0: no limit) and would run again.
  static std::string Charge(JobRun& job, uint32_t run, DeviceId id, const ResourcePool& pool,
                            uint32_t attempts_used, uint32_t max_attempts,
                            uint32_t max_worker_deaths, bool* retryable);

 private:
  std::vector<std::vector<StartedRun>> started_;  // by device
};

}  // namespace hmpmd
