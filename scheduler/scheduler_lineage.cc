// Scheduler: rebuilding outputs that are gone (lineage), after a consumer
// could not read them or after a restart that no worker reported them to.
// The rest of the class is in scheduler.cc.
#include <algorithm>

#include "hmpmd/scheduler/scheduler.h"

namespace hmpmd {

bool Scheduler::OnInputsLost(JobId job_id, uint32_t run, uint32_t attempt,
                             const std::vector<uint32_t>& lost, const std::string& error,
                             TimeUs now, bool gone) {
  JobRun* found = RunningAttempt(job_id, run, attempt);
  if (found == nullptr) return false;
  JobRun& job = *found;
  TaskRecord& rec = job.runs[run];
  const JobGraph& g = *job.graph;
  const uint32_t index = run % g.size(), base = run - index;
  const std::vector<uint32_t>& inputs = g.task(index).inputs;
  // Only this run's own inputs count; a worker cannot name others.
  std::vector<uint32_t> producers;
  std::string why = error;
  for (uint32_t p : lost) {
    if (p < base || p - base >= g.size()) continue;
    if (std::find(inputs.begin(), inputs.end(), p - base) == inputs.end()) continue;
    producers.push_back(p);
    why = "input " + g.Describe(p - base) + " lost: " + error;
  }
  // Lost inputs that are not done: it ran ahead of them (early dispatch,
  // or adopted after a restart) and they did not finish there. It waits
  // for them again without losing an attempt.
  const bool ahead =
      !producers.empty() && std::none_of(producers.begin(), producers.end(), [&](uint32_t p) {
        return job.runs[p].state == TaskState::kDone;
      });
  // Inputs a worker answered it holds no outputs of: not the task's
  // doing. A worker's store counts reads per attempt, and a reader that
  // ran again (rebuilt, or an attempt thrown away) took one meant for
  // another; or the reader ran behind an attempt of its input that a
  // controller cancelled there, and a restarted one has the input done
  // elsewhere (held on no device it knows yet, it is rebuilt below). No
  // attempt lost, a bounded number of times.
  const bool slipped = gone && !ahead && !producers.empty() && rec.slips < TaskRecord::kMaxSlips;
  if (producers.empty() || (!ahead && !slipped && AttemptsUsed(rec) + 1 >= options_.max_attempts)) {
    return OnTaskFailed(job_id, run, attempt, why, /*retryable=*/!producers.empty(), now);
  }
  ReleaseRun(job, rec, now);
  ++rec.attempt;
  if ((ahead || slipped) && rec.recalled < UINT16_MAX) ++rec.recalled;
  if (slipped) ++rec.slips;
  rec.core = kNoCore;
  rec.state = TaskState::kBlocked;
  // Consumers dispatched ahead of this run wait for it again.
  RecallEarly(job, run, now);
  // Other readers of these outputs that are running now have read them, or
  // report the loss themselves.
  for (uint32_t p : producers) Revive(job, p, now, /*restart_readers=*/false);
  rec.pending = CountPending(job, run);
  if (g.task(index).group != kNoGroup) {
    RestartGang(job, run, now);  // its peers wait for it in the collective
  } else if (rec.pending == 0) {
    MakeReady(job, run, now);
  }
  RestartSplitGangs(job, now);  // a producer revived may be a gang's member
  return true;
}

size_t Scheduler::RebuildUnheldOutputs(JobId job_id, TimeUs now) {
  auto it = jobs_.find(job_id);
  if (it == jobs_.end() || IsTerminal(it->second.state)) return 0;
  JobRun& job = it->second;
  const JobGraph& g = *job.graph;
  const uint32_t n = g.size(), base = job.step * n;
  // The last step's final outputs too: the job's caller fetches them.
  const bool finals = !job.open && job.step + 1 == g.steps();
  size_t revived = 0;
  for (uint32_t r = base; r < base + n; ++r) {
    const TaskRecord& rec = job.runs[r];
    if (rec.state != TaskState::kDone || !rec.kept() || rec.held) continue;
    const std::vector<uint32_t>& consumers = g.task(r - base).consumers;
    const bool awaited = std::any_of(consumers.begin(), consumers.end(), [&](uint32_t c) {
      const TaskState s = job.runs[base + c].state;
      return s == TaskState::kBlocked || s == TaskState::kReady;
    });
    if (awaited || (finals && consumers.empty())) {
      revived += Revive(job, r, now, /*restart_readers=*/false);
    }
  }
  // A gang whose members did not all come back alike (one rebuilt above,
  // or not adopted, beside a mate done or adopted running) starts over.
  RestartSplitGangs(job, now);
  return revived;
}

void Scheduler::RestartSplitGangs(JobRun& job, TimeUs now) {
  if (IsTerminal(job.state)) return;
  const JobGraph& g = *job.graph;
  const uint32_t base = job.step * g.size();
  for (const CollectiveGroup& group : g.groups()) {
    bool ran = false;
    uint32_t waits = UINT32_MAX;
    for (uint32_t m : group.members) {
      const TaskState s = job.runs[base + m].state;
      if (s == TaskState::kDone || s == TaskState::kRunning) ran = true;
      if (s == TaskState::kBlocked || s == TaskState::kReady) waits = base + m;
    }
    if (ran && waits != UINT32_MAX) RestartGang(job, waits, now);
  }
}

void Scheduler::ReviveReadInputs(JobRun& job, uint32_t run, TimeUs now) {
  const JobGraph& g = *job.graph;
  const uint32_t index = run % g.size(), base = run - index;
  for (uint32_t in : g.task(index).inputs) {
    const TaskRecord& p = job.runs[base + in];
    if (p.state == TaskState::kDone && p.held && p.reads_left == 1) {
      Revive(job, base + in, now, /*restart_readers=*/false);
    }
  }
}

void Scheduler::RestartGang(JobRun& job, uint32_t run, TimeUs now) {
  const JobGraph& g = *job.graph;
  const uint32_t index = run % g.size(), base = run - index;
  const uint32_t group = g.task(index).group;
  const std::vector<uint32_t>& members = g.groups()[group].members;
  job.gang_ready[group] = 0;
  job.runs[run].state = TaskState::kBlocked;  // counted ready again below
  for (uint32_t m : members) {
    const uint32_t r = base + m;
    TaskRecord& mr = job.runs[r];
    if (r == run) continue;
    if (mr.state == TaskState::kRunning) {
      // Waiting in the collective for `run`, which will not come: stop it
      // there (the caller cancels it); it did not fail, so no attempt lost.
      aborted_.push_back(
          {job.id, r, TaskState::kCancelled, "its gang starts over", pool_.core(mr.core).device});
      ReleaseRun(job, mr, now);
      ++mr.attempt;
      if (mr.recalled < UINT16_MAX) ++mr.recalled;
      mr.core = kNoCore;
      mr.state = TaskState::kBlocked;
      RecallEarly(job, r, now);
      ReviveReadInputs(job, r, now);
      mr.pending = CountPending(job, r);
    } else if (mr.state == TaskState::kReady) {
      mr.state = TaskState::kBlocked;  // its heap entry is skipped as stale
      mr.early = false;
    } else if (mr.state == TaskState::kDone) {
      Revive(job, r, now);  // readies it (counted below) once its inputs are back
    }
  }
  for (uint32_t m : members) {
    TaskRecord& mr = job.runs[base + m];
    if (mr.state == TaskState::kBlocked && mr.pending == 0) MakeReady(job, base + m, now);
  }
}

}  // namespace hmpmd
