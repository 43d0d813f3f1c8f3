// Scheduler: early (asynchronous) dispatch, SchedulerOptions::early_dispatch.
//
// A run waits for its inputs' results to reach the controller before it is
// placed, so each dependency costs a worker->controller->worker round trip.
// When every input not yet done runs on one core C, the run may instead be
// placed on C at once, queued behind its producers: the worker's lane runs
// its queue in order, so the inputs are in its local store when the run
// starts (the worker checks that its producers ran there and succeeded).
//
// The states: a blocked run becomes ready early (TaskRecord::early) when
// its last unplaced producer is placed; Schedule() places it on C within
// C's lookahead or parks it until C releases a run; once its producers are
// done it is an ordinary ready run again. A run placed early is running
// with pending > 0. When a producer stops running without finishing
// (requeued after its worker died, restarted, or waiting for a rebuilt
// input), RecallEarly() takes its early consumers back, recursively.
// The rest of the class is in scheduler.cc.
#include <vector>

#include "hmpmd/scheduler/scheduler.h"

namespace hmpmd {

uint32_t Scheduler::CountPending(const JobRun& job, uint32_t run) const {
  const JobGraph& g = *job.graph;
  const uint32_t index = run % g.size(), base = run - index;
  uint32_t pending = 0;
  for (uint32_t in : g.task(index).inputs) {
    pending += job.runs[base + in].state != TaskState::kDone;
  }
  return pending;
}

CoreId Scheduler::EarlyCore(const JobRun& job, uint32_t run) const {
  const JobGraph& g = *job.graph;
  const uint32_t index = run % g.size(), base = run - index;
  const GraphTask& t = g.task(index);
  // Gang members start together on distinct devices; a collective's
  // outputs come from its whole gang.
  if (t.group != kNoGroup) return kNoCore;
  CoreId core = kNoCore;
  for (uint32_t in : t.inputs) {
    const TaskRecord& p = job.runs[base + in];
    if (p.state == TaskState::kDone) continue;
    if (p.state != TaskState::kRunning || g.task(in).group != kNoGroup) return kNoCore;
    if (core != kNoCore && p.core != core) return kNoCore;
    core = p.core;
  }
  if (core == kNoCore) return kNoCore;
  const ResourcePool::Core& c = pool_.core(core);
  // Only where the policy would put it: its own core kind, a device that
  // runs its kernel and that the policy allows (a sub-model's device set).
  if (c.kind != g.spec_task(index).core || !pool_.device(c.device).alive ||
      !pool_.Supports(c.device, job.kernel_ids[index]) ||
      !policy_->Allows(View(job, run), c.device)) {
    return kNoCore;
  }
  return core;
}

void Scheduler::ReadyEarlyConsumers(JobRun& job, uint32_t run, TimeUs now) {
  const JobGraph& g = *job.graph;
  const uint32_t index = run % g.size(), base = run - index;
  for (uint32_t c : g.task(index).consumers) {
    const TaskRecord& cr = job.runs[base + c];
    if (cr.state != TaskState::kBlocked || cr.pending == 0) continue;
    if (EarlyCore(job, base + c) != kNoCore) MakeReady(job, base + c, now);
  }
}

bool Scheduler::PlaceEarly(JobRun& job, const ReadyItem& item, TimeUs now,
                           std::vector<Dispatch>* out) {
  TaskRecord& rec = job.runs[item.run];
  const CoreId core = EarlyCore(job, item.run);
  if (core == kNoCore) {
    // Not expected (RecallEarly un-readies it first); it waits for its
    // inputs as a blocked run does.
    rec.state = TaskState::kBlocked;
    rec.early = false;
    return false;
  }
  if (!pool_.HasCapacity(core)) {
    ready_.Park(core, item);
    return false;
  }
  TaskView v = View(job, item.run);
  // Release() later gets the same estimate back.
  const double est =
      static_cast<float>(cost_.Estimate(*v.spec, pool_.core(core).kind, pool_.core(core).device));
  GuessOutput(job, &v);
  const StoreUse use = StoreUseOf(v);
  pool_.Assign(core, est, now, use);
  Commit(job, item.run, core, est, use, now, out);
  v.ready_seq = item.seq;
  v.est_us = est;
  policy_->OnPlaced(v, core);
  ReadyEarlyConsumers(job, item.run, now);
  return true;
}

void Scheduler::RecallEarly(JobRun& job, uint32_t run, TimeUs now) {
  const JobGraph& g = *job.graph;
  const uint32_t base = run - run % g.size();
  std::vector<uint32_t> worklist{run};
  while (!worklist.empty()) {
    const uint32_t r = worklist.back();
    worklist.pop_back();
    for (uint32_t c : g.task(r - base).consumers) {
      TaskRecord& cr = job.runs[base + c];
      if (cr.state == TaskState::kReady && cr.early) {
        Unready(job, base + c);  // its heap or parked entry is stale
      } else if (cr.state == TaskState::kRunning && cr.pending > 0) {
        // Queued behind `r` on the worker: that attempt is stale now (the
        // worker finds its input missing and runs no kernel), and it does
        // not count against max_attempts.
        ReleaseRun(job, cr, now);
        ++cr.attempt;
        if (cr.recalled < UINT16_MAX) ++cr.recalled;
        cr.core = kNoCore;
        cr.state = TaskState::kBlocked;
        worklist.push_back(base + c);
      }
    }
  }
}

}  // namespace hmpmd
