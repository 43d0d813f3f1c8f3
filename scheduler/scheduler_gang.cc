// Gang start: the members of a collective group run together or not at all.
//
// Kept apart from scheduler.cc so the engine's main loop stays small: when
// the loop pops a member of a group, PlaceGang places the whole group (the
// members of the same step) in one go, each member on a distinct device
// (two members on one device could queue behind each other on one lane and
// wait forever), or defers it. Members placed in one call reach every lane
// in the same relative order, so gangs cannot deadlock each other.
#include <algorithm>

#include "hmpmd/scheduler/scheduler.h"

namespace hmpmd {

Placement::Kind Scheduler::PlaceGang(JobRun& job, const ReadyItem& item, TimeUs now,
                                     std::vector<Dispatch>* out) {
  const JobGraph& g = *job.graph;
  const uint32_t index = item.run % g.size();
  const uint32_t base = item.run - index;
  const CollectiveGroup& group = g.groups()[g.task(index).group];
  // Every member must be ready; a later one re-triggers the attempt.
  for (uint32_t m : group.members) {
    if (job.runs[base + m].state != TaskState::kReady) return Placement::Kind::kRetryLater;
  }
  if (pool_.alive_device_count() < group.members.size()) {
    // Devices may still join; the job waits, like any task without a core.
    return Placement::Kind::kRetryLater;
  }
  std::vector<DeviceId> used;
  std::vector<CoreId> picks;
  for (uint32_t m : group.members) {
    TaskView v = View(job, base + m);
    const CoreKind kind = v.spec->core;
    Placement p = EarliestCore(v, kind, pool_, [&](DeviceId d) {
      return std::find(used.begin(), used.end(), d) == used.end();
    });
    if (p.kind != Placement::Kind::kPlaced) return Placement::Kind::kRetryLater;
    used.push_back(pool_.core(p.core).device);
    picks.push_back(p.core);
  }
  for (size_t i = 0; i < picks.size(); ++i) {
    const uint32_t run = base + group.members[i];
    TaskRecord& rec = job.runs[run];
    TaskView v = View(job, run);
    rec.state = TaskState::kRunning;
    rec.core = picks[i];
    rec.est_us = static_cast<float>(cost_.Estimate(*v.spec, v.spec->core));
    rec.dispatched = now;
    pool_.Assign(picks[i], rec.est_us, now);
    ++job.running;
    if (job.started < 0) {
      job.started = now;
      job.state = JobState::kRunning;
    }
    out->push_back({job.id, run, rec.attempt, picks[i], pool_.core(picks[i]).device});
  }
  return Placement::Kind::kPlaced;
}

}  // namespace hmpmd
