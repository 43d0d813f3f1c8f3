// Scheduler: placement. Schedule() walks the ready queue (ready_queue.h) in
// priority order and places each item through the policy (PlaceItem, a
// gang at a time) or, for a run ready ahead of its inputs, on its
// producers' core (PlaceEarly, scheduler_early.cc). The rest of the class
// is in scheduler.cc.
#include <algorithm>
#include <span>
#include <tuple>

#include "hmpmd/scheduler/scheduler.h"

namespace hmpmd {

void Scheduler::Wake() {
  woken_.clear();
  policy_->TakeWoken(&woken_);
  ready_.Wake(woken_);
}

void Scheduler::Schedule(TimeUs now, std::vector<Dispatch>* out) {
  const uint64_t refusals = pool_.store_refusals();
  SchedulePass(now, out);
  if (pool_.store_refusals() != refusals && pool_.store_movers() == 0) {
    // Outputs were refused for room that no queued work will make: place
    // them on a lenient pool (ResourcePool::StoreTakes; their workers fail
    // them naming the cap if they still do not fit) rather than wait
    // forever.
    pool_.set_store_lenient(true);
    SchedulePass(now, out);
    pool_.set_store_lenient(false);
  }
}

void Scheduler::SchedulePass(TimeUs now, std::vector<Dispatch>* out) {
  for (int k = 0; k < kNumCoreKinds; ++k) {
    CoreKind kind = static_cast<CoreKind>(k);
    Wake();
    ready_.BeginPass(kind);
    while (ready_.HasNext() && pool_.HasCapacity(kind)) {
      const ReadyItem item = ready_.Next();
      auto it = jobs_.find(item.job);
      if (it == jobs_.end()) {
        ready_.Drop();
        continue;
      }
      JobRun& job = it->second;
      TaskRecord& rec = job.runs[item.run];
      if (IsTerminal(job.state) || rec.state != TaskState::kReady ||
          !GangComplete(job, item.run)) {  // stale entry
        ready_.Drop();
        continue;
      }
      // Priorities may fall while a task waits (a policy's fair share):
      // re-key lazily when the fresh value drops below the next in line.
      TaskView fresh = View(job, item.run);
      fresh.ready_seq = item.seq;
      fresh.ready_at = item.ready_at;
      if (ready_.Rekey(policy_->Priority(fresh))) continue;
      if (rec.early) {  // its core or nothing: never deferred
        ready_.Drop();
        PlaceEarly(job, item, now, out);
        continue;
      }
      // A class found blocked in this pass: set aside unasked.
      const uint64_t cls = policy_->WaitClass(fresh);
      if (ready_.WaitInClass(cls)) continue;
      const uint64_t refusals = pool_.store_refusals();
      Placement p = PlaceItem(job, item, now, out);
      if (p.kind == Placement::Kind::kRetryLater) {
        rec.store_wait = pool_.store_refusals() != refusals;
      }
      if (p.kind == Placement::Kind::kPlaced && ready_.AnySleeping()) Wake();
      if (p.kind == Placement::Kind::kRetryLater && p.wake != 0 && cls == 0) {
        ready_.Sleep(p.wake);
        continue;
      }
      if (p.kind == Placement::Kind::kRetryLater && cls != 0) {
        if (ready_.Block() >= options_.max_deferred) break;
        continue;
      }
      if (p.kind == Placement::Kind::kRetryLater) {
        if (ready_.Defer() >= options_.max_deferred) break;
        continue;
      }
      ready_.Drop();
      if (p.kind == Placement::Kind::kInfeasible && job.open) {
        EndOpenRun(job, item.run, TaskState::kFailed, p.reason, now);
      } else if (p.kind == Placement::Kind::kInfeasible) {
        FinishJob(job, JobState::kFailed, p.reason, now);
      }
    }
    ready_.EndPass();
  }
}

void Scheduler::Commit(JobRun& job, uint32_t run, CoreId core, double est_us, StoreUse use,
                       TimeUs now, std::vector<Dispatch>* out) {
  TaskRecord& rec = job.runs[run];
  rec.state = TaskState::kRunning;
  rec.early = false;  // placed ahead of its inputs when pending > 0
  rec.core = core;
  rec.est_us = static_cast<float>(est_us);
  rec.reserved_kib = static_cast<uint32_t>(use.reserve >> 10);
  rec.reads_stored = use.reads_stored;
  rec.dispatched = now;
  rec.lane_seq = ++lane_seq_;
  lanes_.Add(core, rec.lane_seq, job.id);
  rec.store_wait = false;
  ++job.running;
  if (job.started < 0) {
    job.started = now;
    job.state = JobState::kRunning;
  }
  out->push_back({job.id, run, rec.attempt, core, pool_.core(core).device});
}

Placement Scheduler::PlaceItem(JobRun& job, const ReadyItem& item, TimeUs now,
                               std::vector<Dispatch>* out) {
  const JobGraph& g = *job.graph;
  uint32_t index = item.run % g.size(), base = item.run - index;
  uint32_t solo[1] = {index};
  std::span<const uint32_t> members(solo);
  uint32_t group = g.task(index).group;
  if (group != kNoGroup && g.groups()[group].members.front() == index) {
    const std::vector<uint32_t>& all = g.groups()[group].members;
    bool gang = std::all_of(all.begin(), all.end(), [&](uint32_t m) {
      return job.runs[base + m].state == TaskState::kReady;
    });
    if (gang) members = all;
  }
  // Tentatively assign member by member (so each sees the cores taken by
  // the ones before it); undo all if one cannot be placed. When a member
  // finds no core after others took theirs (one bound to its sub-model's
  // device set, behind members that may go anywhere), its sub-model's
  // members go first and the gang is tried again; not when only members of
  // its own sub-model went before it (a gang short of cores, the usual
  // reason it waits, fails whichever member goes first, and each try costs
  // O(members^2)).
  std::span<const uint32_t> order = members;
  std::vector<uint32_t> reordered;  // allocated only for a retry
  for (size_t tries = 0;; ++tries) {
    placed_.clear();
    size_t failed = order.size();
    Placement fail;
    for (size_t k = 0; k < order.size() && failed == order.size(); ++k) {
      const uint32_t m = order[k];
      TaskView v = View(job, base + m);
      v.ready_seq = item.seq;
      v.est_us = cost_.Estimate(*v.spec, v.spec->core);
      GuessOutput(job, &v);
      Placement p = policy_->Place(v, pool_, now);
      if (p.kind == Placement::Kind::kPlaced && order.size() > 1) {
        // Members of a gang need distinct devices: two on one device could
        // queue on one lane and wait for each other forever.
        auto taken = [&](DeviceId d) {
          return std::any_of(placed_.begin(), placed_.end(),
                             [&](const auto& e) { return pool_.core(std::get<1>(e)).device == d; });
        };
        if (taken(pool_.core(p.core).device)) {
          p = EarliestCore(v, pool_.core(p.core).kind, pool_,
                           [&](DeviceId d) { return !taken(d) && policy_->Allows(v, d); });
        }
        // Members start together: none waits in a queue that drains later
        // than the lookahead, holding the others' lanes in the collective.
        if (p.kind == Placement::Kind::kPlaced && pool_.core(p.core).queued > 0 &&
            pool_.core(p.core).busy_until >
                now + static_cast<TimeUs>(pool_.options().lookahead_us)) {
          p = Placement::RetryLater();
        }
      }
      if (p.kind != Placement::Kind::kPlaced) {
        for (const auto& [run, core, est, use] : placed_) {
          pool_.Release(core, est, now, use);
          policy_->OnReleased(job.id, kNoRun, core, pool_);
        }
        if (p.kind == Placement::Kind::kInfeasible && !p.job_wide) {
          p.reason = g.Describe(m) + ": cannot be placed: " + p.reason;
        }
        fail = std::move(p);
        failed = k;
        break;
      }
      // Release() later gets the same estimate back.
      double est = static_cast<float>(
          cost_.Estimate(*v.spec, pool_.core(p.core).kind, pool_.core(p.core).device));
      const StoreUse use = StoreUseOf(v);
      pool_.Assign(p.core, est, now, use);
      placed_.push_back({base + m, p.core, est, use});
    }
    if (failed == order.size()) break;
    const uint32_t sm = g.task(order[failed]).submodel;
    const bool own_first =
        std::all_of(order.begin(), order.begin() + static_cast<std::ptrdiff_t>(failed),
                    [&](uint32_t m) { return g.task(m).submodel == sm; });
    if (fail.kind != Placement::Kind::kRetryLater || own_first || tries + 1 >= order.size()) {
      return fail;
    }
    if (reordered.empty()) reordered.assign(members.begin(), members.end());
    std::stable_partition(reordered.begin(), reordered.end(),
                          [&](uint32_t m) { return g.task(m).submodel == sm; });
    order = reordered;
  }
  for (const auto& [run, core, est, use] : placed_) {
    Commit(job, run, core, est, use, now, out);
    TaskView v = View(job, run);
    v.est_us = est;
    policy_->OnPlaced(v, core);
  }
  if (options_.early_dispatch) {
    for (const auto& [run, core, est, use] : placed_) ReadyEarlyConsumers(job, run, now);
  }
  return Placement::Placed(placed_.empty() ? 0 : std::get<1>(placed_.front()));
}

}  // namespace hmpmd
