// Scheduler: placement. Schedule() walks the ready heaps in priority order
// and places each item through the policy (PlaceItem, a gang at a time) or,
// for a run ready ahead of its inputs, on its producers' core (PlaceEarly,
// scheduler_early.cc). The rest of the class is in scheduler.cc.
#include <algorithm>
#include <span>
#include <tuple>

#include "hmpmd/scheduler/scheduler.h"

namespace hmpmd {

void Scheduler::PushLead(uint64_t cls, WaitingClass& wc) {
  if (wc.lead_out || wc.items.empty()) return;
  ReadyItem lead = wc.items.top();
  wc.items.pop();
  --waiting_count_[wc.heap];
  leads_[lead.seq] = cls;
  wc.lead_out = true;
  ready_[wc.heap].push(lead);
}

void Scheduler::Wake() {
  woken_.clear();
  policy_->TakeWoken(&woken_);
  for (uint64_t key : woken_) {
    auto it = sleeping_.find(key);
    if (it == sleeping_.end()) continue;
    for (const auto& [k, item] : it->second) {
      ready_[k].push(item);
      --sleeping_count_[k];
    }
    sleeping_.erase(it);
  }
}

void Scheduler::Schedule(TimeUs now, std::vector<Dispatch>* out) {
  const uint64_t refusals = pool_.store_refusals();
  SchedulePass(now, out);
  if (pool_.store_refusals() != refusals && pool_.store_movers() == 0) {
    // Outputs were refused for room that no queued work will make: place
    // them by the old rule (their workers fail them naming the cap if they
    // still do not fit) rather than wait forever.
    pool_.set_store_lenient(true);
    SchedulePass(now, out);
    pool_.set_store_lenient(false);
  }
}

void Scheduler::SchedulePass(TimeUs now, std::vector<Dispatch>* out) {
  for (int k = 0; k < kNumCoreKinds; ++k) {
    CoreKind kind = static_cast<CoreKind>(k);
    auto& heap = ready_[k];
    Wake();
    deferred_.clear();
    blocked_.clear();
    ++pass_;
    while (!heap.empty() && pool_.HasCapacity(kind)) {
      ReadyItem item = heap.top();
      heap.pop();
      // A class's lead left the heap: unless it goes back to its class
      // below, the class's next best takes its place (PushLead).
      WaitingClass* led = nullptr;
      uint64_t led_key = 0;
      if (!leads_.empty()) {
        auto l = leads_.find(item.seq);
        if (l != leads_.end()) {
          led_key = l->second;
          leads_.erase(l);
          auto w = waiting_.find(led_key);
          if (w != waiting_.end()) {
            led = &w->second;
            led->lead_out = false;
          }
        }
      }
      auto next_lead = [&] {
        if (led == nullptr || led->blocked_pass == pass_) return;  // re-armed after the pass
        PushLead(led_key, *led);
        if (!led->lead_out) waiting_.erase(led_key);  // drained
        led = nullptr;
      };
      auto it = jobs_.find(item.job);
      if (it == jobs_.end()) {
        next_lead();
        continue;
      }
      JobRun& job = it->second;
      TaskRecord& rec = job.runs[item.run];
      if (IsTerminal(job.state) || rec.state != TaskState::kReady ||
          !GangComplete(job, item.run)) {  // stale entry
        next_lead();
        continue;
      }
      // Priorities may fall while a task waits (a policy's fair share):
      // re-key lazily when the fresh value drops below the next in line.
      TaskView fresh = View(job, item.run);
      fresh.ready_seq = item.seq;
      fresh.ready_at = item.ready_at;
      double now_priority = policy_->Priority(fresh);
      if (now_priority < item.priority && !heap.empty() && now_priority < heap.top().priority) {
        item.priority = now_priority;
        if (led != nullptr) {
          leads_[item.seq] = led_key;  // still its class's lead
          led->lead_out = true;
        }
        heap.push(item);
        continue;
      }
      if (rec.early) {  // its core or nothing: never deferred
        next_lead();
        PlaceEarly(job, item, now, out);
        continue;
      }
      // A class found blocked in this pass: set aside unasked.
      const uint64_t cls = policy_->WaitClass(fresh);
      if (cls != led_key) next_lead();  // its class changed
      WaitingClass* wc = nullptr;
      if (cls != 0) {
        wc = &waiting_[cls];
        wc->heap = static_cast<size_t>(k);
        if (wc->blocked_pass == pass_) {
          wc->items.push(item);
          ++waiting_count_[k];
          continue;
        }
      }
      const uint64_t refusals = pool_.store_refusals();
      Placement p = PlaceItem(job, item, now, out);
      if (p.kind == Placement::Kind::kRetryLater) {
        rec.store_wait = pool_.store_refusals() != refusals;
      }
      if (p.kind == Placement::Kind::kPlaced && !sleeping_.empty()) Wake();
      if (p.kind == Placement::Kind::kRetryLater && p.wake != 0 && wc == nullptr) {
        next_lead();
        sleeping_[p.wake].push_back({static_cast<size_t>(k), item});
        ++sleeping_count_[k];
        continue;
      }
      if (p.kind == Placement::Kind::kRetryLater && wc != nullptr) {
        wc->blocked_pass = pass_;
        wc->items.push(item);
        ++waiting_count_[k];
        blocked_.push_back(cls);
        if (blocked_.size() >= options_.max_deferred) break;
        continue;
      }
      next_lead();
      if (p.kind == Placement::Kind::kRetryLater) {
        deferred_.push_back(item);
        if (deferred_.size() >= options_.max_deferred) break;
      } else if (p.kind == Placement::Kind::kInfeasible && job.open) {
        EndOpenRun(job, item.run, TaskState::kFailed, p.reason, now);
      } else if (p.kind == Placement::Kind::kInfeasible) {
        FinishJob(job, JobState::kFailed, p.reason, now);
      }
    }
    for (const ReadyItem& d : deferred_) heap.push(d);
    // Each class blocked in this pass goes back to the heap as its lead.
    for (uint64_t cls : blocked_) {
      auto w = waiting_.find(cls);
      if (w == waiting_.end()) continue;
      PushLead(cls, w->second);
      if (w->second.items.empty() && !w->second.lead_out) waiting_.erase(w);
    }
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
