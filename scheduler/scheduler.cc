#include "hmpmd/scheduler/scheduler.h"

#include <algorithm>
#include <span>

#include "hmpmd/scheduler/admission_check.h"
#include "hmpmd/scheduler/retry_rule.h"
#include "hmpmd/scheduler/state_shards.h"

namespace hmpmd {

std::string_view TaskStateName(TaskState s) {
  switch (s) {
    case TaskState::kBlocked:
      return "blocked";
    case TaskState::kReady:
      return "ready";
    case TaskState::kRunning:
      return "running";
    case TaskState::kDone:
      return "done";
    case TaskState::kFailed:
      return "failed";
    case TaskState::kCancelled:
      return "cancelled";
  }
  return "unknown";
}

std::string_view JobStateName(JobState s) {
  switch (s) {
    case JobState::kQueued:
      return "queued";
    case JobState::kRunning:
      return "running";
    case JobState::kSucceeded:
      return "succeeded";
    case JobState::kFailed:
      return "failed";
    case JobState::kCancelled:
      return "cancelled";
  }
  return "unknown";
}

Scheduler::Scheduler(SchedulerOptions options, std::unique_ptr<Policy> policy)
    : options_(options), policy_(std::move(policy)), pool_(options.pool), cost_(options.cost) {}

bool Scheduler::OutputAvailable(const TaskRecord& rec) const {
  if (rec.state != TaskState::kDone) return false;
  if (!rec.kept()) return true;  // nothing to fetch: the edge only orders
  return rec.held && rec.output_device != UINT32_MAX && pool_.device(rec.output_device).alive;
}

size_t Scheduler::Revive(JobRun& job, uint32_t run, TimeUs now, bool restart_readers) {
  TaskRecord& rec = job.runs[run];
  if (rec.state != TaskState::kDone) return 0;
  size_t revived = 1;
  const JobGraph& g = *job.graph;
  const uint32_t index = run % g.size(), base = run - index;
  ReleaseHeld(rec);
  rec.state = TaskState::kBlocked;
  if (g.task(index).group != kNoGroup) {
    // A gang member runs again only with its gang: its done attempt, which
    // a worker that comes back may report, is stale (not charged).
    ++rec.attempt;
    if (rec.recalled < UINT16_MAX) ++rec.recalled;
  }
  rec.output_device = UINT32_MAX;
  rec.output_bytes = 0;
  rec.output_buffers = 0;
  --job.done;
  ++job.left_in_step;
  // Its consumers wait for it again; one that was reading the lost output
  // starts over (its late result is stale by attempt), and so do those
  // dispatched ahead of that one (early dispatch).
  for (uint32_t c : g.task(index).consumers) {
    TaskRecord& cr = job.runs[base + c];
    if (cr.state == TaskState::kRunning && restart_readers) {
      ReleaseRun(job, cr, now);
      ++cr.attempt;
      cr.core = kNoCore;
      cr.state = TaskState::kBlocked;
      RecallEarly(job, base + c, now);
    } else if (cr.state == TaskState::kReady) {
      Unready(job, base + c);
    }
    // Counted afresh (one ready early or adopted may wait for others too);
    // a reader left running is now ahead of this input.
    if (cr.state == TaskState::kBlocked || cr.state == TaskState::kRunning) {
      cr.pending = CountPending(job, base + c);
    }
  }
  // Inputs it needs that are gone too are rebuilt first.
  for (uint32_t in : g.task(index).inputs) {
    TaskRecord& p = job.runs[base + in];
    if (OutputAvailable(p)) {
      if (p.held) ++p.reads_left;  // read once more
      continue;
    }
    if (p.state == TaskState::kDone) revived += Revive(job, base + in, now, restart_readers);
  }
  rec.pending = CountPending(job, run);
  if (rec.pending == 0) MakeReady(job, run, now);
  return revived;
}

void Scheduler::EstimateStateLoads(const JobGraph& graph, JobRun* job) const {
  const auto& submodels = graph.spec().submodels;
  job->state_device_bytes = StateBytesPerDevice(graph.spec().submodels);
  job->state_load_us.assign(submodels.size(), 0);
  for (size_t s = 0; s < submodels.size(); ++s) {
    if (job->state_device_bytes[s] <= 0) continue;
    TaskSpec load;  // the state as bytes over a link
    load.kernel = "send";
    load.cost.bytes = job->state_device_bytes[s];
    job->state_load_us[s] = cost_.Prior(load, CoreKind::kVector);
  }
}

void Scheduler::Prepare(const JobGraph& graph, JobRun* job) {
  EstimateStateLoads(graph, job);
  job->kernel_ids.resize(graph.size());
  for (uint32_t i = 0; i < graph.size(); ++i) {
    const TaskSpec& t = graph.spec_task(i);
    job->kernel_ids[i] = pool_.InternKernel(t.kernel, t.required);
  }
  job->runs.resize(graph.total_runs());
  job->gang_ready.assign(graph.groups().size(), 0);
  job->gang_retries.assign(graph.groups().size(), 0);
  // Upward rank, sinks first: the estimated time from a task's start to the
  // end of its step.
  job->rank_us.assign(graph.size(), 0);
  job->est_us.assign(graph.size(), 0);
  // A gang's members start and end together, so each takes the longest
  // tail among all members' consumers (else the members of one gang get
  // different priorities and the gang waits for its lowest one). A pass
  // sees the tails of members not yet reached from the pass before, so
  // passes repeat until no rank moves (one pass without groups).
  const auto& topo = graph.topo_order();
  std::vector<double> group_tail(graph.groups().size(), 0);
  for (int pass = 0; pass < 16; ++pass) {
    bool moved = false;
    for (auto it = topo.rbegin(); it != topo.rend(); ++it) {
      double tail = 0;
      for (uint32_t c : graph.task(*it).consumers) tail = std::max(tail, job->rank_us[c]);
      const uint32_t group = graph.task(*it).group;
      if (group != kNoGroup) {
        group_tail[group] = std::max(group_tail[group], tail);
        tail = group_tail[group];
      }
      const TaskSpec& t = graph.spec_task(*it);
      job->est_us[*it] = cost_.Estimate(t, t.core);
      double rank = job->est_us[*it] + tail;
      moved = moved || rank != job->rank_us[*it];
      job->rank_us[*it] = rank;
    }
    if (!moved || graph.groups().empty()) break;
  }
}

Result<JobId> Scheduler::AddJob(std::shared_ptr<const JobGraph> graph, TimeUs now, bool held,
                                JobTenant tenant) {
  JobRun job;
  job.tenant = std::move(tenant);
  Prepare(*graph, &job);
  const AdmissionCheck check(pool_);
  RETURN_IF_ERROR(check.Tasks(graph->spec().tasks, 0, job.kernel_ids));
  RETURN_IF_ERROR(check.SetSizes(graph->spec().submodels, 0));
  RETURN_IF_ERROR(check.States(graph->spec().submodels, job.state_device_bytes, 0));
  job.id = next_job_++;
  job.submitted = now;
  job.open = graph->open();
  if (pool_.alive_device_count() == 0) job.waiting = "no live worker";
  job.graph = std::move(graph);
  JobId id = job.id;
  JobRun& stored = jobs_.emplace(id, std::move(job)).first->second;
  held_runs_ += stored.runs.size();
  ++active_jobs_;
  policy_->OnJobAdded(stored, pool_);
  stored.short_sets = policy_->ShortSets(id);
  stored.held = held;
  if (!held) StartStep(stored, 0, now);
  return id;
}

void Scheduler::StartHeldJob(JobId id, TimeUs now) {
  auto it = jobs_.find(id);
  if (it == jobs_.end() || !it->second.held || IsTerminal(it->second.state)) return;
  it->second.held = false;
  StartStep(it->second, 0, now);
}

void Scheduler::StartStep(JobRun& job, uint32_t step, TimeUs now) {
  const JobGraph& g = *job.graph;
  job.step = step;
  job.left_in_step = g.size();
  job.gang_ready.assign(g.groups().size(), 0);
  job.gang_retries.assign(g.groups().size(), 0);
  uint32_t base = step * g.size();
  for (uint32_t i = 0; i < g.size(); ++i) {
    job.runs[base + i].pending = static_cast<uint32_t>(g.task(i).inputs.size());
  }
  for (uint32_t i : g.roots()) {
    if (job.runs[base + i].state == TaskState::kBlocked) MakeReady(job, base + i, now);
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
  v.early = job.runs[run].early;
  // Locality: the producer whose outputs are largest; where none has
  // bytes, the first whose outputs' device is known.
  const uint32_t base = run - v.index;
  for (uint32_t in : v.task->inputs) {
    const TaskRecord& p = job.runs[base + in];
    if (p.output_device != UINT32_MAX &&
        (p.output_bytes > v.input_bytes || v.input_device == UINT32_MAX)) {
      v.input_device = p.output_device;
      v.input_bytes = p.output_bytes;
      v.input_last_read = p.reads_left <= 1;
    }
  }
  return v;
}

void Scheduler::GuessOutput(const JobRun& job, TaskView* v) {
  if (!pool_.options().count_store) return;
  const OutputGuess g = outputs_.Guess(job, v->run);
  v->output_known = g.known;
  v->output_bytes = g.bytes;
}

void Scheduler::RecordOutput(JobId job_id, uint32_t run, DeviceId device, uint64_t bytes,
                             uint32_t buffers) {
  auto it = jobs_.find(job_id);
  if (it == jobs_.end() || run >= it->second.runs.size()) return;
  const JobGraph& g = *it->second.graph;
  TaskRecord& rec = it->second.runs[run];
  if (rec.state != TaskState::kDone) return;
  ReleaseHeld(rec);  // reported again, or by another worker
  rec.output_device = device;
  rec.output_bytes = bytes;
  rec.output_buffers = buffers;
  const bool kept = rec.kept();
  if (pool_.options().count_store) outputs_.Observe(it->second, run, bytes);
  // Consumers already done (before a restart, or before a rebuild) have read.
  const uint32_t base = run - run % g.size();
  rec.reads_left = 0;
  for (uint32_t c : g.task(run % g.size()).consumers) {
    if (it->second.runs[base + c].state != TaskState::kDone) ++rec.reads_left;
  }
  // Kept by the worker: outputs with readers, and the last step's sinks.
  const bool last_step = run / g.size() + 1 == g.steps();
  rec.held = kept && (rec.reads_left > 0 || last_step);
  if (it->second.open) {
    // A consumer that ended without reading them counts as read.
    rec.reads_left = 0;
    for (uint32_t c : g.task(run).consumers) {
      if (it->second.runs[c].state != TaskState::kFailed &&
          it->second.runs[c].state != TaskState::kCancelled) {
        ++rec.reads_left;
      }
    }
    rec.held = kept && (!rec.released || rec.reads_left > 0);
    // The worker keeps them until told.
    if (kept && !rec.held) freed_.push_back({job_id, run, device});
  }
  if (rec.held) pool_.AddHeldBytes(device, static_cast<int64_t>(bytes));
}

void Scheduler::ReleaseHeld(TaskRecord& rec) {
  if (!rec.held) return;
  rec.held = false;
  pool_.AddHeldBytes(rec.output_device, -static_cast<int64_t>(rec.output_bytes));
}

void Scheduler::Unready(JobRun& job, uint32_t run) {
  TaskRecord& rec = job.runs[run];
  rec.state = TaskState::kBlocked;  // its heap entry is skipped as stale
  rec.early = false;
  // A gang member: its gang is not complete any more (a gang queued under
  // its first member is skipped as stale until it is again).
  const uint32_t group = job.graph->task(run % job.graph->size()).group;
  if (group != kNoGroup && job.gang_ready[group] > 0) --job.gang_ready[group];
}

void Scheduler::MakeReady(JobRun& job, uint32_t run, TimeUs now) {
  const uint32_t group = job.graph->task(run % job.graph->size()).group;
  if (group != kNoGroup && job.gang_ready[group] >= job.graph->groups()[group].members.size()) {
    RestartGang(job, run, now);  // its gang was queued before: all run again
    return;
  }
  TaskRecord& rec = job.runs[run];
  rec.state = TaskState::kReady;
  rec.early = rec.pending > 0;  // ReadyEarlyConsumers: placed on its inputs' core only
  TaskView v = View(job, run);
  policy_->OnReady(v);
  if (v.task->group != kNoGroup) {
    // A gang is queued once, under its first member, when all are ready.
    const CollectiveGroup& grp = job.graph->groups()[v.task->group];
    uint32_t ready = ++job.gang_ready[v.task->group];
    if (ready < grp.members.size()) return;
    run = run - v.index + grp.members.front();
    v = View(job, run);
  }
  v.ready_seq = ready_.NextSeq();
  v.ready_at = now;
  ready_.Push(v.spec->core, {policy_->Priority(v), v.ready_seq, job.id, run, now});
}

void Scheduler::ReleaseRun(JobRun& job, TaskRecord& rec, TimeUs now) {
  pool_.Release(rec.core, rec.est_us, now, rec.store_use());
  lanes_.Remove(rec.core, rec.lane_seq, job.id);
  rec.reserved_kib = 0;
  rec.reads_stored = false;
  policy_->OnReleased(job.id, static_cast<uint32_t>(&rec - job.runs.data()), rec.core, pool_);
  --job.running;
  // It released a run, so the core may have room for the items parked on it.
  if (ready_.AnyParked()) ready_.Unpark(rec.core, pool_.core(rec.core).kind);
}

JobRun* Scheduler::RunningAttempt(JobId job_id, uint32_t run, uint32_t attempt) {
  auto it = jobs_.find(job_id);
  if (it == jobs_.end()) return nullptr;
  JobRun& job = it->second;
  if (IsTerminal(job.state) || run >= job.runs.size()) return nullptr;
  const TaskRecord& rec = job.runs[run];
  if (rec.state != TaskState::kRunning || rec.attempt != attempt) return nullptr;
  return &job;
}

bool Scheduler::OnTaskDone(JobId job_id, uint32_t run, uint32_t attempt, TimeUs start, TimeUs end,
                           TimeUs now) {
  JobRun* found = RunningAttempt(job_id, run, attempt);
  if (found == nullptr) return false;
  JobRun& job = *found;
  TaskRecord& rec = job.runs[run];
  ReleaseRun(job, rec, now);
  rec.state = TaskState::kDone;
  rec.start = start;
  rec.end = std::max(start, end);
  ++job.done;
  // A run adopted after a restart began before the controller did: the job
  // started no later than it (the store keeps no start of its own).
  if (start < job.started) job.started = start;
  const JobGraph& g = *job.graph;
  uint32_t index = run % g.size();
  cost_.Observe(g.spec_task(index), static_cast<double>(rec.end - rec.start),
                pool_.core(rec.core).device);
  policy_->OnRunDone(job.id, run, rec.core, rec.est_us, static_cast<double>(rec.end - rec.start));
  uint32_t base = run - index;
  // Each input was read once more; the last read frees it on its worker.
  for (uint32_t in : g.task(index).inputs) {
    TaskRecord& p = job.runs[base + in];
    if (job.open) {
      OpenOutputRead(job, base + in);
    } else if (p.held && p.reads_left > 0 && --p.reads_left == 0) {
      ReleaseHeld(p);
    }
  }
  for (uint32_t c : g.task(index).consumers) {
    TaskRecord& consumer = job.runs[base + c];
    // An adopted or early-dispatched run may already be running; one ready
    // early (parked on this run's core, put back in the heap just above)
    // may now go anywhere.
    if (consumer.pending == 0) continue;
    if (--consumer.pending > 0) {
      // The inputs still to come may now all run on one core.
      if (options_.early_dispatch && consumer.state == TaskState::kBlocked &&
          EarlyCore(job, base + c) != kNoCore) {
        MakeReady(job, base + c, now);
      }
      continue;
    }
    if (consumer.state == TaskState::kBlocked) {
      MakeReady(job, base + c, now);
    } else if (consumer.state == TaskState::kReady) {
      consumer.early = false;
    }
  }
  if (job.open) {
    --job.left_in_step;
    MaybeFinishOpen(job, now);
  } else if (--job.left_in_step == 0) {
    if (job.step + 1 < g.steps()) {
      StartStep(job, job.step + 1, now);
    } else {
      FinishJob(job, JobState::kSucceeded, "", now);
    }
  }
  return true;
}

bool Scheduler::OnTaskFailed(JobId job_id, uint32_t run, uint32_t attempt, const std::string& error,
                             bool retryable, TimeUs now) {
  JobRun* found = RunningAttempt(job_id, run, attempt);
  if (found == nullptr) return false;
  JobRun& job = *found;
  TaskRecord& rec = job.runs[run];
  ReleaseRun(job, rec, now);
  const JobGraph& g = *job.graph;
  uint32_t index = run % g.size();
  std::string where = "task '" + g.spec_task(index).id + "'";
  if (g.steps() > 1) where += " (step " + std::to_string(run / g.size()) + ")";
  if (retryable && rec.pending > 0) {
    // Dispatched ahead of an input that is not done (its worker died with
    // both): it waits for that input again, without losing an attempt.
    ++rec.attempt;
    if (rec.recalled < UINT16_MAX) ++rec.recalled;
    rec.core = kNoCore;
    rec.state = TaskState::kBlocked;
    RecallEarly(job, run, now);
    return true;
  }
  // A gang member's attempts are its gang's: whichever member fails, the
  // whole gang runs again (MakeReady -> RestartGang).
  const uint32_t group = g.task(index).group;
  // Its kernel failed: the spec may ask for it to run again (a gang member
  // may not, CheckRetryRule). A retry is not one of max_attempts.
  if (!retryable && group == kNoGroup && rec.retries < UINT16_MAX &&
      ShouldRetry(g.spec_task(index), rec.retries, error)) {
    ++rec.attempt;
    ++rec.retries;
    rec.core = kNoCore;
    RecallEarly(job, run, now);
    MakeReady(job, run, now);
    return true;
  }
  // Runs it made (recalled ones never ran), said when some were retries.
  const std::string tries =
      rec.retries > 0 ? " after " + std::to_string(rec.attempt - rec.recalled + 1) + " attempts"
                      : "";
  const uint32_t used = AttemptsUsed(job, run);
  if (retryable && used + 1 < options_.max_attempts) {
    ++rec.attempt;
    rec.core = kNoCore;
    RecallEarly(job, run, now);  // before it is ready: its consumers are blocked again
    if (group == kNoGroup) {
      MakeReady(job, run, now);
      return true;
    }
    ++job.gang_retries[group];
    rec.state = TaskState::kBlocked;
    ReviveReadInputs(job, run, now);
    rec.pending = CountPending(job, run);
    RestartGang(job, run, now);
    return true;
  }
  if (job.open) {                     // fails its dependents, not the session
    rec.state = TaskState::kBlocked;  // ended below, its core already released
    std::string why =
        retryable ? "failed after " + std::to_string(rec.attempt + 1) + " attempts: " + error
                  : (tries.empty() ? error : "failed" + tries + ": " + error);
    EndOpenRun(job, run, TaskState::kFailed, std::move(why), now);
    return true;
  }
  rec.state = TaskState::kFailed;
  rec.end = now;
  std::string why = where + " failed";
  if (retryable) {
    why += " after " + std::to_string(used + 1) + " attempts";
    if (group != kNoGroup) why += " of its collective group '" + g.groups()[group].name + "'";
  } else {
    why += tries;
  }
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
      // A failed job's runs still running are stopped on their workers
      // (aborted_): a gang member would otherwise hold its lane until the
      // collective times out. A cancelled job's are (CancelJob), a done
      // job has none.
      if (state == JobState::kFailed) {
        aborted_.push_back({job.id, static_cast<uint32_t>(&rec - job.runs.data()),
                            TaskState::kCancelled, "its job failed", pool_.core(rec.core).device});
      }
      ReleaseRun(job, rec, now);
      rec.state = TaskState::kCancelled;
      rec.end = now;
    } else if (rec.state == TaskState::kReady) {
      rec.state = TaskState::kCancelled;  // its heap entry is skipped lazily
    }
  }
  // A cancelled job's workers free its outputs at once (CancelJob).
  if (state == JobState::kCancelled) {
    for (TaskRecord& rec : job.runs) ReleaseHeld(rec);
  }
  job.state = state;
  job.error = std::move(error);
  job.finished = now;
  --active_jobs_;
  policy_->OnJobRemoved(job.id);
}

void Scheduler::EraseJob(JobId id) {
  auto it = jobs_.find(id);
  if (it == jobs_.end() || !IsTerminal(it->second.state)) return;
  for (TaskRecord& rec : it->second.runs) ReleaseHeld(rec);  // workers free the job
  held_runs_ -= it->second.runs.size();
  jobs_.erase(it);
}

const JobRun* Scheduler::job(JobId id) const {
  auto it = jobs_.find(id);
  return it == jobs_.end() ? nullptr : &it->second;
}

size_t Scheduler::ready_count() const {
  size_t n = 0;
  for (int k = 0; k < kNumCoreKinds; ++k) n += ready_count(static_cast<CoreKind>(k));
  return n;
}

}  // namespace hmpmd
