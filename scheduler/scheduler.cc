#include "hmpmd/scheduler/scheduler.h"

#include <algorithm>

namespace hmpmd {

std::string_view TaskStateName(TaskState s) {
  switch (s) {
    case TaskState::kBlocked: return "blocked";
    case TaskState::kReady: return "ready";
    case TaskState::kRunning: return "running";
    case TaskState::kDone: return "done";
    case TaskState::kFailed: return "failed";
    case TaskState::kCancelled: return "cancelled";
  }
  return "unknown";
}

std::string_view JobStateName(JobState s) {
  switch (s) {
    case JobState::kQueued: return "queued";
    case JobState::kRunning: return "running";
    case JobState::kSucceeded: return "succeeded";
    case JobState::kFailed: return "failed";
    case JobState::kCancelled: return "cancelled";
  }
  return "unknown";
}

Scheduler::Scheduler(SchedulerOptions options, std::unique_ptr<Policy> policy)
    : options_(options), policy_(std::move(policy)), pool_(options.pool), cost_(options.cost) {}

DeviceId Scheduler::AddDevice(DeviceDesc desc) { return pool_.AddDevice(std::move(desc)); }

void Scheduler::RemoveDevice(DeviceId id, TimeUs now) {
  if (!pool_.device(id).alive) return;
  const std::vector<CoreId>& cores = pool_.device(id).cores;
  pool_.RemoveDevice(id);
  for (auto& [job_id, job] : jobs_) {
    if (IsTerminal(job.state) || job.running == 0) continue;
    for (uint32_t r = 0; r < job.runs.size() && job.running > 0; ++r) {
      TaskRecord& rec = job.runs[r];
      if (rec.state != TaskState::kRunning) continue;
      if (std::find(cores.begin(), cores.end(), rec.core) == cores.end()) continue;
      OnTaskFailed(job_id, r, rec.attempt, "its worker (" + pool_.device(id).desc.name + ") died",
                   /*retryable=*/true, now);
      if (IsTerminal(job.state)) break;
    }
  }
}

Status Scheduler::CheckFeasible(const JobGraph& graph, const JobRun& job) const {
  if (pool_.alive_device_count() == 0) return Status::Ok();  // waits for workers
  for (uint32_t i = 0; i < graph.size(); ++i) {
    const TaskSpec& t = graph.spec_task(i);
    if (pool_.alive_cores(t.core) == 0) {
      return Status::InvalidArgument(graph.Describe(i) + ": core: no worker has a '" +
                                     std::string(CoreKindName(t.core)) + "' core");
    }
    if (!pool_.AnySupports(job.kernel_ids[i], t.core)) {
      return Status::InvalidArgument(graph.Describe(i) + ": kernel: no worker runs '" + t.kernel +
                                     "' on a " + std::string(CoreKindName(t.core)) + " core");
    }
  }
  for (size_t s = 0; s < graph.spec().submodels.size(); ++s) {
    const SubmodelSpec& sm = graph.spec().submodels[s];
    if (sm.devices > pool_.alive_device_count()) {
      return Status::InvalidArgument(
          "submodels[" + std::to_string(s) + "] '" + sm.name + "': devices: asks for " +
          std::to_string(sm.devices) + ", the pool has " +
          std::to_string(pool_.alive_device_count()));
    }
  }
  return Status::Ok();
}

Result<JobId> Scheduler::AddJob(std::shared_ptr<const JobGraph> graph, TimeUs now) {
  JobRun job;
  job.kernel_ids.resize(graph->size());
  for (uint32_t i = 0; i < graph->size(); ++i) {
    job.kernel_ids[i] = pool_.InternKernel(graph->spec_task(i).kernel);
  }
  RETURN_IF_ERROR(CheckFeasible(*graph, job));

  job.id = next_job_++;
  job.submitted = now;
  job.runs.resize(graph->total_runs());
  // Upward rank, sinks first: the estimated time from a task's start to the
  // end of its step.
  job.rank_us.assign(graph->size(), 0);
  const auto& topo = graph->topo_order();
  for (auto it = topo.rbegin(); it != topo.rend(); ++it) {
    double tail = 0;
    for (uint32_t c : graph->task(*it).consumers) tail = std::max(tail, job.rank_us[c]);
    const TaskSpec& t = graph->spec_task(*it);
    job.rank_us[*it] = cost_.Estimate(t, t.core) + tail;
  }
  job.graph = std::move(graph);
  JobId id = job.id;
  JobRun& stored = jobs_.emplace(id, std::move(job)).first->second;
  ++active_jobs_;
  policy_->OnJobAdded(id, *stored.graph, pool_);
  StartStep(stored, 0, now);
  return id;
}

void Scheduler::StartStep(JobRun& job, uint32_t step, TimeUs /*now*/) {
  const JobGraph& g = *job.graph;
  job.step = step;
  job.left_in_step = g.size();
  uint32_t base = step * g.size();
  for (uint32_t i = 0; i < g.size(); ++i) {
    job.runs[base + i].pending = static_cast<uint32_t>(g.task(i).inputs.size());
  }
  for (uint32_t i : g.roots()) {
    if (job.runs[base + i].state == TaskState::kBlocked) MakeReady(job, base + i);
  }
}

TaskView Scheduler::View(const JobRun& job, uint32_t run) const {
  const JobGraph& g = *job.graph;
  TaskView v;
  v.job = job.id;
  v.run = run;
  v.index = run % g.size();
  v.step = run / g.size();
  v.graph = &g;
  v.spec = &g.spec_task(v.index);
  v.task = &g.task(v.index);
  v.rank_us = job.rank_us[v.index];
  v.kernel_id = job.kernel_ids[v.index];
  v.weight = g.spec().weight;
  return v;
}

void Scheduler::MakeReady(JobRun& job, uint32_t run) {
  TaskRecord& rec = job.runs[run];
  rec.state = TaskState::kReady;
  TaskView v = View(job, run);
  v.ready_seq = ready_seq_++;
  ready_[static_cast<size_t>(v.spec->core)].push(
      {policy_->Priority(v), v.ready_seq, job.id, run});
}

void Scheduler::ReleaseRun(JobRun& job, TaskRecord& rec, TimeUs now) {
  pool_.Release(rec.core, rec.est_us, now);
  --job.running;
}

bool Scheduler::OnTaskDone(JobId job_id, uint32_t run, uint32_t attempt, TimeUs start, TimeUs end,
                           TimeUs now) {
  auto it = jobs_.find(job_id);
  if (it == jobs_.end()) return false;
  JobRun& job = it->second;
  if (IsTerminal(job.state) || run >= job.runs.size()) return false;
  TaskRecord& rec = job.runs[run];
  if (rec.state != TaskState::kRunning || rec.attempt != attempt) return false;
  ReleaseRun(job, rec, now);
  rec.state = TaskState::kDone;
  rec.start = start;
  rec.end = std::max(start, end);
  ++job.done;
  const JobGraph& g = *job.graph;
  uint32_t index = run % g.size();
  cost_.Observe(g.spec_task(index), static_cast<double>(rec.end - rec.start));
  uint32_t base = run - index;
  for (uint32_t c : g.task(index).consumers) {
    TaskRecord& consumer = job.runs[base + c];
    // An adopted run (AdoptRun) may already be running.
    if (--consumer.pending == 0 && consumer.state == TaskState::kBlocked) MakeReady(job, base + c);
  }
  if (--job.left_in_step == 0) {
    if (job.step + 1 < g.steps()) {
      StartStep(job, job.step + 1, now);
    } else {
      FinishJob(job, JobState::kSucceeded, "", now);
    }
  }
  return true;
}

bool Scheduler::OnTaskFailed(JobId job_id, uint32_t run, uint32_t attempt,
                             const std::string& error, bool retryable, TimeUs now) {
  auto it = jobs_.find(job_id);
  if (it == jobs_.end()) return false;
  JobRun& job = it->second;
  if (IsTerminal(job.state) || run >= job.runs.size()) return false;
  TaskRecord& rec = job.runs[run];
  if (rec.state != TaskState::kRunning || rec.attempt != attempt) return false;
  ReleaseRun(job, rec, now);
  const JobGraph& g = *job.graph;
  uint32_t index = run % g.size();
  std::string where = "task '" + g.spec_task(index).id + "'";
  if (g.steps() > 1) where += " (step " + std::to_string(run / g.size()) + ")";
  if (retryable && rec.attempt + 1 < options_.max_attempts) {
    ++rec.attempt;
    rec.core = kNoCore;
    MakeReady(job, run);
    return true;
  }
  rec.state = TaskState::kFailed;
  rec.end = now;
  std::string why = where + " failed";
  if (retryable) why += " after " + std::to_string(rec.attempt + 1) + " attempts";
  FinishJob(job, JobState::kFailed, why + ": " + error, now);
  return true;
}

Status Scheduler::CancelJob(JobId id, std::string reason, TimeUs now) {
  auto it = jobs_.find(id);
  if (it == jobs_.end()) return Status::NotFound("job " + std::to_string(id) + ": no such job");
  if (IsTerminal(it->second.state)) {
    return Status::InvalidArgument("job " + std::to_string(id) + ": already " +
                                   std::string(JobStateName(it->second.state)));
  }
  FinishJob(it->second, JobState::kCancelled, std::move(reason), now);
  return Status::Ok();
}

void Scheduler::FinishJob(JobRun& job, JobState state, std::string error, TimeUs now) {
  for (TaskRecord& rec : job.runs) {
    if (rec.state == TaskState::kRunning) {
      ReleaseRun(job, rec, now);
      rec.state = TaskState::kCancelled;
      rec.end = now;
    } else if (rec.state == TaskState::kReady) {
      rec.state = TaskState::kCancelled;  // its heap entry is skipped lazily
    }
  }
  job.state = state;
  job.error = std::move(error);
  job.finished = now;
  --active_jobs_;
  policy_->OnJobRemoved(job.id);
}

Status Scheduler::RestoreJob(JobId id, std::shared_ptr<const JobGraph> graph,
                             const std::vector<RestoredRun>& done, JobState state,
                             std::string error, TimeUs submitted, TimeUs finished, TimeUs now) {
  if (id == 0 || jobs_.count(id)) {
    return Status::AlreadyExists("job " + std::to_string(id) + ": restored twice");
  }
  JobRun job;
  job.id = id;
  job.submitted = submitted;
  job.kernel_ids.resize(graph->size());
  for (uint32_t i = 0; i < graph->size(); ++i) {
    job.kernel_ids[i] = pool_.InternKernel(graph->spec_task(i).kernel);
  }
  job.runs.resize(graph->total_runs());
  job.rank_us.assign(graph->size(), 0);
  const auto& topo = graph->topo_order();
  for (auto it = topo.rbegin(); it != topo.rend(); ++it) {
    double tail = 0;
    for (uint32_t c : graph->task(*it).consumers) tail = std::max(tail, job.rank_us[c]);
    const TaskSpec& t = graph->spec_task(*it);
    job.rank_us[*it] = cost_.Estimate(t, t.core) + tail;
  }
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
    ++job.done;
    if (job.started < 0 || r.start < job.started) job.started = r.start;
  }
  job.graph = std::move(graph);
  JobRun& stored = jobs_.emplace(id, std::move(job)).first->second;
  next_job_ = std::max(next_job_, id + 1);
  if (IsTerminal(state)) {
    stored.state = state;
    stored.error = std::move(error);
    stored.finished = finished;
    return Status::Ok();
  }
  ++active_jobs_;
  stored.state = stored.done > 0 ? JobState::kRunning : JobState::kQueued;
  policy_->OnJobAdded(id, *stored.graph, pool_);
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
  if (step == g.steps()) {
    FinishJob(stored, JobState::kSucceeded, "", now);
    return Status::Ok();
  }
  stored.step = step;
  uint32_t base = step * g.size();
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
    if (rec.state != TaskState::kDone && rec.pending == 0) MakeReady(stored, base + i);
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
  // A blocked run counts too: the worker had its inputs, but the store had
  // not yet recorded them done (their results come back from the worker).
  if ((rec.state != TaskState::kReady && rec.state != TaskState::kBlocked) ||
      attempt < rec.attempt ||
      attempt >= options_.max_attempts) {
    return false;
  }
  CoreId core = kNoCore;
  for (CoreId c : pool_.device(device).cores) {
    if (pool_.core(c).kind == kind && pool_.core(c).lane == lane) core = c;
  }
  if (core == kNoCore || !pool_.device(device).alive) return false;
  // Its heap entry is skipped lazily, as for a cancelled run.
  TaskView v = View(job, run);
  rec.state = TaskState::kRunning;
  rec.attempt = attempt;
  rec.core = core;
  rec.est_us = static_cast<float>(cost_.Estimate(*v.spec, kind));
  rec.dispatched = now;
  pool_.Assign(core, rec.est_us, now);
  ++job.running;
  if (job.started < 0) job.started = now;
  job.state = JobState::kRunning;
  return true;
}

void Scheduler::EraseJob(JobId id) {
  auto it = jobs_.find(id);
  if (it != jobs_.end() && IsTerminal(it->second.state)) jobs_.erase(it);
}

const JobRun* Scheduler::job(JobId id) const {
  auto it = jobs_.find(id);
  return it == jobs_.end() ? nullptr : &it->second;
}

size_t Scheduler::ready_count() const {
  size_t n = 0;
  for (const auto& q : ready_) n += q.size();
  return n;
}

void Scheduler::Schedule(TimeUs now, std::vector<Dispatch>* out) {
  for (int k = 0; k < kNumCoreKinds; ++k) {
    CoreKind kind = static_cast<CoreKind>(k);
    auto& heap = ready_[k];
    deferred_.clear();
    while (!heap.empty() && pool_.HasCapacity(kind)) {
      ReadyItem item = heap.top();
      heap.pop();
      auto it = jobs_.find(item.job);
      if (it == jobs_.end()) continue;
      JobRun& job = it->second;
      TaskRecord& rec = job.runs[item.run];
      if (IsTerminal(job.state) || rec.state != TaskState::kReady) continue;  // stale entry
      TaskView v = View(job, item.run);
      v.ready_seq = item.seq;
      v.est_us = cost_.Estimate(*v.spec, kind);
      Placement p = policy_->Place(v, pool_, now);
      if (p.kind == Placement::Kind::kPlaced) {
        rec.state = TaskState::kRunning;
        rec.core = p.core;
        rec.est_us = static_cast<float>(v.est_us);
        rec.dispatched = now;
        pool_.Assign(p.core, rec.est_us, now);  // Release() gets the same value back
        ++job.running;
        if (job.started < 0) {
          job.started = now;
          job.state = JobState::kRunning;
        }
        out->push_back({job.id, item.run, rec.attempt, p.core, pool_.core(p.core).device});
      } else if (p.kind == Placement::Kind::kRetryLater) {
        deferred_.push_back(item);
        if (deferred_.size() >= options_.max_deferred) break;
      } else {
        FinishJob(job, JobState::kFailed,
                  job.graph->Describe(v.index) + ": cannot be placed: " + p.reason, now);
      }
    }
    for (const ReadyItem& d : deferred_) heap.push(d);
  }
}

}  // namespace hmpmd
