// LaneOrder: which of the runs placed on a core its worker's lane runs now
// and which wait behind it. A lane runs its queue in dispatch order
// (TaskRecord::lane_seq), so of the runs placed on one core and not yet
// ended, the first dispatched runs and the others are queued. Users see
// the difference (`queued` versus `running` in REST and the dashboard);
// the engine places by the pool's estimates and does not need it.
//
// A run adopted after a controller restart (lane_seq 0) came in an order
// no one knows: it counts as running, and the runs this controller
// dispatched to its core after it are queued behind it.
//
// Cost: a core holds at most a few runs (ResourcePool's queue per core),
// so each call is O(that); QueuedOf is O(cores).
// Thread-safety: not thread-safe; owned by the Scheduler's thread.
#pragma once

#include <cstdint>
#include <vector>

#include "hmpmd/protocol/types.h"
#include "hmpmd/scheduler/resource_pool.h"

namespace hmpmd {

class LaneOrder {
 public:
  // Run `seq` (TaskRecord::lane_seq; 0 if adopted) of job `job` was placed
  // on `core`.
  void Add(CoreId core, uint64_t seq, JobId job);
  // It ended (or was taken back).
  void Remove(CoreId core, uint64_t seq, JobId job);
  // Whether run `seq` on `core` waits behind another run there.
  bool Behind(CoreId core, uint64_t seq) const;
  // How many of job `job`'s runs wait behind another run on their core.
  uint32_t QueuedOf(JobId job) const;

 private:
  struct Entry {
    uint64_t seq = 0;
    JobId job = 0;
  };
  std::vector<std::vector<Entry>> cores_;  // by CoreId, in no order
};

}  // namespace hmpmd
