// Scheduler: recovery after a controller restart. RestoreJob rebuilds a
// job from the store (its done runs stay done), AdoptRun takes back a run a
// re-registering worker still runs. The rest of the class is in scheduler.cc.
#include <algorithm>

#include "hmpmd/scheduler/scheduler.h"

namespace hmpmd {

Status Scheduler::RestoreJob(JobId id, std::shared_ptr<const JobGraph> graph,
                             const std::vector<RestoredRun>& done, JobState state,
                             std::string error, TimeUs submitted, TimeUs finished, TimeUs now,
                             TimeUs started, JobTenant tenant) {
  if (id == 0 || jobs_.count(id)) {
    return Status::AlreadyExists("job " + std::to_string(id) + ": restored twice");
  }
  JobRun job;
  job.id = id;
  job.tenant = std::move(tenant);
  job.submitted = submitted;
  job.open = graph->open();
  Prepare(*graph, &job);
  for (const RestoredRun& r : done) {
    if (r.run >= job.runs.size()) {
      return Status::Corruption("job " + std::to_string(id) + ": stored run " +
                                std::to_string(r.run) + " is outside the job");
    }
    TaskRecord& rec = job.runs[r.run];
    if (rec.state == TaskState::kDone) continue;
    rec.state = TaskState::kDone;
    rec.attempt = r.attempt;
    rec.start = r.start;
    rec.end = std::max(r.start, r.end);
    rec.output_bytes = r.bytes;  // held nowhere until a worker reports it
    rec.output_buffers = r.buffers;
    ++job.done;
    if (job.started < 0 || r.start < job.started) job.started = r.start;
  }
  if (started >= 0 && (job.started < 0 || started < job.started)) job.started = started;
  job.graph = std::move(graph);
  JobRun& stored = jobs_.emplace(id, std::move(job)).first->second;
  held_runs_ += stored.runs.size();
  next_job_ = std::max(next_job_, id + 1);
  if (IsTerminal(state)) {
    stored.state = state;
    stored.error = std::move(error);
    stored.finished = finished;
    return Status::Ok();
  }
  ++active_jobs_;
  stored.state = stored.done > 0 ? JobState::kRunning : JobState::kQueued;
  policy_->OnJobAdded(stored, pool_);
  // As AddJob: a restart with no worker back yet says why the job waits.
  stored.short_sets = policy_->ShortSets(id);
  if (pool_.alive_device_count() == 0) stored.waiting = "no live worker";
  // Steps run in order: resume at the first one with a run not done.
  const JobGraph& g = *stored.graph;
  uint32_t step = 0;
  for (; step < g.steps(); ++step) {
    uint32_t base = step * g.size();
    bool all_done = true;
    for (uint32_t i = 0; i < g.size() && all_done; ++i) {
      all_done = stored.runs[base + i].state == TaskState::kDone;
    }
    if (!all_done) break;
  }
  // An open job (a resumed driver session) ends when its driver closes it.
  if (step == g.steps() && !stored.open) {
    FinishJob(stored, JobState::kSucceeded, "", now);
    return Status::Ok();
  }
  stored.step = std::min(step, g.steps() - 1);
  uint32_t base = stored.step * g.size();
  stored.left_in_step = 0;
  for (uint32_t i = 0; i < g.size(); ++i) {
    TaskRecord& rec = stored.runs[base + i];
    if (rec.state == TaskState::kDone) continue;
    ++stored.left_in_step;
    rec.pending = 0;
    for (uint32_t in : g.task(i).inputs) {
      if (stored.runs[base + in].state != TaskState::kDone) ++rec.pending;
    }
  }
  for (uint32_t i = 0; i < g.size(); ++i) {
    TaskRecord& rec = stored.runs[base + i];
    if (rec.state != TaskState::kDone && rec.pending == 0) MakeReady(stored, base + i, now);
  }
  return Status::Ok();
}

bool Scheduler::AdoptRun(JobId job_id, uint32_t run, uint32_t attempt, DeviceId device,
                         CoreKind kind, uint32_t lane, TimeUs now) {
  auto it = jobs_.find(job_id);
  if (it == jobs_.end() || device >= pool_.device_count()) return false;
  JobRun& job = it->second;
  if (IsTerminal(job.state) || run >= job.runs.size()) return false;
  TaskRecord& rec = job.runs[run];
  // Only the step being run: a worker may report a run of the next step
  // when the store lost the end of this one (its last writes died with the
  // controller). Adopted, its end would count against this step and its
  // consumers' inputs would be counted again when the next step starts,
  // leaving one blocked for ever; refused, it runs again in its step.
  if (!job.open && run / job.graph->size() != job.step) return false;
  // A blocked run counts too: the worker had its inputs, but the store had
  // not yet recorded them done (their results come back from the worker).
  if ((rec.state != TaskState::kReady && rec.state != TaskState::kBlocked) ||
      attempt < rec.attempt || attempt >= options_.max_attempts + rec.recalled + rec.retries) {
    return false;
  }
  CoreId core = kNoCore;
  for (CoreId c : pool_.device(device).cores) {
    if (pool_.core(c).kind == kind && pool_.core(c).lane == lane) core = c;
  }
  if (core == kNoCore || !pool_.device(device).alive) return false;
  // Its heap entry is skipped lazily, as for a cancelled run.
  TaskView v = View(job, run);
  const bool was_ready = rec.state == TaskState::kReady;
  rec.state = TaskState::kRunning;
  rec.early = false;
  rec.attempt = attempt;
  rec.core = core;
  rec.est_us = static_cast<float>(cost_.Estimate(*v.spec, kind, device));
  rec.dispatched = now;
  // Unknown: the worker lists what it holds in (job, task) order, not in
  // its lanes' order, so which of them runs cannot be told (RemoveDevice).
  rec.lane_seq = 0;
  lanes_.Add(core, 0, job_id);
  pool_.Assign(core, rec.est_us, now);
  // The policy counts it as placed, as if it had dispatched it: its job's
  // fair share is charged the estimate here and the rest when it ends
  // (OnRunDone), and a device set sees the run on its device.
  v.est_us = rec.est_us;
  if (!was_ready) policy_->OnReady(v);
  policy_->OnPlaced(v, core);
  ++job.running;
  if (job.started < 0) job.started = now;
  job.state = JobState::kRunning;
  return true;
}

}  // namespace hmpmd

namespace hmpmd {

Status Scheduler::RestoreRunEnded(JobId id, uint32_t run, bool cancelled, std::string error,
                                  TimeUs now) {
  auto it = jobs_.find(id);
  if (it == jobs_.end()) return Status::NotFound("job " + std::to_string(id) + ": no such job");
  JobRun& job = it->second;
  if (!job.open || run >= job.runs.size()) {
    return Status::Corruption("job " + std::to_string(id) + ": stored end of run " +
                              std::to_string(run) + " is outside the session");
  }
  if (IsTerminal(job.state)) return Status::Ok();
  EndOpenRun(job, run, cancelled ? TaskState::kCancelled : TaskState::kFailed, std::move(error),
             now);
  return Status::Ok();
}

}  // namespace hmpmd
