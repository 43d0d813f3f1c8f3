// JobHistory: what the job store kept of a job that a restarted controller
// reloaded and the scheduler does not hold: wall-clock times, and where
// each run done before the restart ran (its worker and core). The devices
// of a restarted controller are new (workers register again), so the
// scheduler restores done runs without a core; reports take their place
// from here. JobClock joins it to the live clock for the reports.
// Thread-safety: immutable once built; shared between the loop and the
// threads that render reports.
#pragma once

#include <algorithm>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "hmpmd/controller/wall_clock.h"
#include "hmpmd/protocol/types.h"
#include "hmpmd/scheduler/resource_pool.h"
#include "hmpmd/sim/schedule_metrics.h"

namespace hmpmd {

// 32 bytes a run: a reloaded job of millions of runs keeps this for each.
struct PastRun {
  uint32_t run = 0;
  DeviceId device = 0;                         // its device number then
  int64_t start_unix_us = 0, end_unix_us = 0;  // 0: not known
  uint32_t lane = 0;
  uint16_t worker = 0;  // index in JobHistory::workers: its device's name then
  CoreKind kind = CoreKind::kCube;
  bool placed = false;  // worker, device, kind and lane are known
};

struct JobHistory {
  // Wall clock of the job's submit, first dispatch and end as stored; 0:
  // not known (an older store, or not reached before the restart).
  int64_t submitted_unix_us = 0, started_unix_us = 0, finished_unix_us = 0;
  std::vector<PastRun> runs;         // by ascending run
  std::vector<std::string> workers;  // names PastRun::worker indexes
  // Runs the store kept as done without their place (an older version
  // wrote them): reports say their history is missing.
  uint64_t unplaced = 0;

  const PastRun* Find(uint32_t run) const {
    auto it = std::lower_bound(runs.begin(), runs.end(), run,
                               [](const PastRun& p, uint32_t r) { return p.run < r; });
    return it != runs.end() && it->run == run ? &*it : nullptr;
  }
  const std::string& WorkerOf(const PastRun& p) const {
    static const std::string kNone;
    return p.worker < workers.size() ? workers[p.worker] : kNone;
  }
};

// What a live report of one job needs beyond its JobRun: the live wall
// clock, the job's history when it was reloaded from the store (null:
// none), and the state loads its workers made (StateHolders; null: none).
struct JobClock {
  WallClock wall;
  std::shared_ptr<const JobHistory> history;
  std::shared_ptr<const StateLoadTimes> loads;
};

}  // namespace hmpmd
