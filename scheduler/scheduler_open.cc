// Scheduler: open jobs (driver sessions), which grow while they run.
#include <algorithm>

#include "hmpmd/scheduler/admission_check.h"
#include "hmpmd/scheduler/scheduler.h"
#include "hmpmd/scheduler/state_shards.h"

namespace hmpmd {

Status Scheduler::AppendTasks(JobId id, std::vector<SubmodelSpec> submodels,
                              std::vector<TaskSpec> tasks, TimeUs now) {
  auto it = jobs_.find(id);
  if (it == jobs_.end()) return Status::NotFound("job " + std::to_string(id) + ": no such job");
  JobRun& job = it->second;
  if (!job.open) return Status::InvalidArgument("job " + std::to_string(id) + ": not open");
  if (IsTerminal(job.state) || job.closing) {
    return Status::InvalidArgument("job " + std::to_string(id) + ": closed");
  }
  // The pool must be able to run them (as AddJob checks a whole job), with
  // the labels their sub-models require.
  RETURN_IF_ERROR(job.graph->MergeRequired(submodels, tasks, job.graph->size()));
  std::vector<uint32_t> kernel_ids;
  kernel_ids.reserve(tasks.size());
  for (const TaskSpec& t : tasks) kernel_ids.push_back(pool_.InternKernel(t.kernel, t.required));
  const AdmissionCheck check(pool_);
  RETURN_IF_ERROR(check.Tasks(tasks, job.graph->size(), kernel_ids));
  RETURN_IF_ERROR(check.SetSizes(submodels, job.graph->spec().submodels.size()));
  RETURN_IF_ERROR(
      check.States(submodels, StateBytesPerDevice(submodels), job.graph->spec().submodels.size()));
  // The graph was made mutable by BuildOpen(); only this thread touches it.
  JobGraph& g = const_cast<JobGraph&>(*job.graph);
  const uint32_t first = g.size();
  RETURN_IF_ERROR(g.Append(std::move(submodels), std::move(tasks)));
  const uint32_t n = g.size();
  job.kernel_ids.resize(n);
  job.rank_us.resize(n);
  job.est_us.resize(n);
  job.runs.resize(n);
  held_runs_ += n - first;
  job.gang_ready.resize(g.groups().size(), 0);
  job.gang_retries.resize(g.groups().size(), 0);
  job.left_in_step += n - first;
  for (uint32_t i = first; i < n; ++i) {
    const TaskSpec& t = g.spec_task(i);
    job.kernel_ids[i] = pool_.InternKernel(t.kernel, t.required);
    job.est_us[i] = cost_.Estimate(t, t.core);
    job.rank_us[i] = job.est_us[i];  // a new task is a sink when it arrives
  }
  EstimateStateLoads(g, &job);
  policy_->OnJobGrown(job, pool_);
  for (uint32_t i = first; i < n; ++i) {
    TaskRecord& rec = job.runs[i];
    if (rec.state != TaskState::kBlocked) continue;  // ended with an input below
    std::string bad_input;
    TaskState bad_state = TaskState::kFailed;
    rec.pending = 0;
    for (uint32_t in : g.task(i).inputs) {
      TaskRecord& p = job.runs[in];
      if (p.state == TaskState::kFailed || p.state == TaskState::kCancelled) {
        bad_input = g.spec_task(in).id;
        bad_state = p.state;
      } else if (p.state == TaskState::kDone) {
        if (p.held) ++p.reads_left;  // one more reader of what it holds
      } else {
        ++rec.pending;
      }
    }
    if (!bad_input.empty()) {
      EndOpenRun(job, i, bad_state,
                 "input '" + bad_input + "' " +
                     (bad_state == TaskState::kCancelled ? "was cancelled" : "failed"),
                 now);
    } else if (rec.pending == 0 || (options_.early_dispatch && EarlyCore(job, i) != kNoCore)) {
      MakeReady(job, i, now);  // early when its inputs run on one core
    }
  }
  return Status::Ok();
}

void Scheduler::EndOpenRun(JobRun& job, uint32_t run, TaskState state, std::string error,
                           TimeUs now) {
  const JobGraph& g = *job.graph;
  struct Item {
    uint32_t run;
    TaskState state;
    std::string error;
  };
  std::vector<Item> worklist;
  worklist.push_back({run, state, std::move(error)});
  while (!worklist.empty()) {
    Item item = std::move(worklist.back());
    worklist.pop_back();
    TaskRecord& rec = job.runs[item.run];
    if (rec.state == TaskState::kDone || rec.state == TaskState::kFailed ||
        rec.state == TaskState::kCancelled) {
      continue;
    }
    DeviceId device = UINT32_MAX;
    if (rec.state == TaskState::kRunning) {
      device = pool_.core(rec.core).device;
      ReleaseRun(job, rec, now);
    }
    // A ready one's heap entry is skipped as stale.
    rec.state = item.state;
    rec.end = now;
    --job.left_in_step;
    if (job.not_ok++ == 0)
      job.first_error = "task '" + g.spec_task(item.run).id + "': " + item.error;
    // It will never read its inputs.
    for (uint32_t in : g.task(item.run).inputs) {
      if (job.runs[in].state == TaskState::kDone) OpenOutputRead(job, in);
    }
    const std::string id = g.spec_task(item.run).id;
    const bool cancelled = item.state == TaskState::kCancelled;
    for (uint32_t c : g.task(item.run).consumers) {
      worklist.push_back(
          {c, item.state, "input '" + id + "' " + (cancelled ? "was cancelled" : "failed")});
    }
    const uint32_t group = g.task(item.run).group;
    if (group != kNoGroup) {
      for (uint32_t m : g.groups()[group].members) {
        if (m == item.run) continue;
        worklist.push_back({m, item.state,
                            "member '" + id + "' of its collective group " +
                                (cancelled ? "was cancelled" : "failed")});
      }
    }
    ended_.push_back({job.id, item.run, item.state, std::move(item.error), device});
  }
  MaybeFinishOpen(job, now);
}

void Scheduler::OpenOutputRead(JobRun& job, uint32_t run) {
  TaskRecord& p = job.runs[run];
  if (!p.held || p.reads_left == 0) return;
  if (--p.reads_left == 0 && p.released) {
    freed_.push_back({job.id, run, p.output_device});
    ReleaseHeld(p);
  }
}

void Scheduler::ReleaseOutput(JobId id, uint32_t run) {
  auto it = jobs_.find(id);
  if (it == jobs_.end() || !it->second.open || run >= it->second.runs.size()) return;
  TaskRecord& rec = it->second.runs[run];
  if (rec.released) return;
  rec.released = true;
  if (rec.state == TaskState::kDone && rec.held && rec.reads_left == 0) {
    freed_.push_back({id, run, rec.output_device});
    ReleaseHeld(rec);
  }
}

Status Scheduler::CancelRun(JobId id, uint32_t run, TimeUs now) {
  auto it = jobs_.find(id);
  if (it == jobs_.end()) return Status::NotFound("job " + std::to_string(id) + ": no such job");
  JobRun& job = it->second;
  if (!job.open) return Status::InvalidArgument("job " + std::to_string(id) + ": not open");
  if (run >= job.runs.size()) {
    return Status::InvalidArgument("job " + std::to_string(id) + ": no task " +
                                   std::to_string(run));
  }
  if (IsTerminal(job.state)) return Status::Ok();
  EndOpenRun(job, run, TaskState::kCancelled, "cancelled by the driver", now);
  return Status::Ok();
}

Result<JobRun*> Scheduler::CloseOpenJob(JobId id) {
  auto it = jobs_.find(id);
  if (it == jobs_.end()) return Status::NotFound("job " + std::to_string(id) + ": no such job");
  JobRun& job = it->second;
  if (!job.open) return Status::InvalidArgument("job " + std::to_string(id) + ": not open");
  if (IsTerminal(job.state)) return nullptr;
  job.closing = true;
  return &job;
}

Status Scheduler::CloseJob(JobId id, bool cancel_rest, std::string reason, TimeUs now) {
  ASSIGN_OR_RETURN(JobRun * closing, CloseOpenJob(id));
  if (closing == nullptr) return Status::Ok();
  JobRun& job = *closing;
  // An abort cancels the job even when no task is left (none may have
  // reached us yet): the driver gave up on it, so it did not succeed. A
  // task that already failed still makes it failed (MaybeFinishOpen).
  if (cancel_rest && (job.left_in_step > 0 || job.not_ok == 0)) {
    FinishJob(job, JobState::kCancelled, std::move(reason), now);
    return Status::Ok();
  }
  MaybeFinishOpen(job, now);
  return Status::Ok();
}

Status Scheduler::FailOpenJob(JobId id, std::string reason, TimeUs now) {
  ASSIGN_OR_RETURN(JobRun * closing, CloseOpenJob(id));
  if (closing == nullptr) return Status::Ok();
  FinishJob(*closing, JobState::kFailed, std::move(reason), now);
  for (TaskRecord& rec : closing->runs) ReleaseHeld(rec);  // its workers free them (FreeJob)
  return Status::Ok();
}

void Scheduler::CountRejected(JobId id, uint64_t tasks, const std::string& error) {
  auto it = jobs_.find(id);
  if (it == jobs_.end() || !it->second.open || tasks == 0) return;
  JobRun& job = it->second;
  if (job.not_ok == 0) job.first_error = error + " (refused at submission)";
  job.not_ok += tasks;
}

void Scheduler::MaybeFinishOpen(JobRun& job, TimeUs now) {
  if (!job.closing || job.left_in_step > 0 || IsTerminal(job.state)) return;
  if (job.not_ok == 0) {
    FinishJob(job, JobState::kSucceeded, "", now);
  } else {
    FinishJob(job, JobState::kFailed,
              std::to_string(job.not_ok) + " task(s) did not succeed; first " + job.first_error,
              now);
  }
  // The session's workers free all its outputs when it ends (FreeJob).
  for (TaskRecord& rec : job.runs) ReleaseHeld(rec);
}

}  // namespace hmpmd
