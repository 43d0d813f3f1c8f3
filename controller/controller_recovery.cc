// Controller: what a restart needs: reloading the store's jobs (driver
// sessions' as ended or failed), adopting what re-registering workers
// report (runs of a later step deferred until it starts), and ending the
// recovery window. Retention is in controller_retention.cc.
#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>
#include <map>
#include <nlohmann/json.hpp>
#include <set>

#include "hmpmd/controller/controller.h"

// See controller.cc: GCC 12's false -Wmaybe-uninitialized when a vector of
// StoreRecord grows.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif

namespace hmpmd {

Status Controller::RestoreFromStore(TimeUs now) {
  ASSIGN_OR_RETURN(std::vector<StoredJob> jobs, options_.store->Load());
  // --max-tasks and --max-spec-mb admit new jobs; they do not unmake jobs
  // accepted under larger ones before a restart. Left out, such a job would
  // read as forgotten (404) to the client that was told it was accepted,
  // and come back with the old flags.
  SpecLimits stored_limits = options_.spec_limits;
  stored_limits.max_tasks = SIZE_MAX;
  stored_limits.max_bytes = SIZE_MAX;
  stored_limits.max_runs = std::max(stored_limits.max_runs, SpecLimits{}.max_runs);
  size_t unfinished = 0;
  for (StoredJob& j : jobs) {
    if (RestoreSession(j, now)) {
      unfinished += live_jobs_.count(j.id);  // a session waiting for its driver
      continue;
    }
    // A job that cannot be rebuilt is reported and left out; the rest go on.
    auto spec = ParseJobSpec(j.spec_json, stored_limits);
    if (!spec.ok()) {
      spdlog::error("job {} from the store: spec: {}", j.id, spec.status().message());
      continue;
    }
    auto graph = JobGraph::Build(std::move(spec).value());
    if (!graph.ok()) {
      spdlog::error("job {} from the store: {}", j.id, graph.status().message());
      continue;
    }
    std::vector<Scheduler::RestoredRun> done;
    done.reserve(j.done.size());
    for (const TaskDoneRecord& r : j.done) {
      done.push_back({r.run, r.attempt, r.start, r.end, r.bytes, r.buffers});
    }
    Status st;
    try {
      st = scheduler_->RestoreJob(j.id, std::move(graph).value(), done, j.state, j.error,
                                  j.submitted, j.finished, now, j.started,
                                  JobTenant{j.tenant, j.tenant_share});
    } catch (const std::bad_alloc&) {
      // Left out rather than aborting every start (a restart loop): its
      // runs' records no longer fit in this controller's memory.
      st = Status::ResourceExhausted("its task runs do not fit in the controller's memory");
    }
    if (!st.ok()) {
      spdlog::error("job {} from the store: {}", j.id, st.message());
      continue;
    }
    ++counters_.restored_jobs;
    KeepHistory(j);
    if (IsTerminal(j.state)) {
      finished_order_.push_back(j.id);
      // Not known (an older file): its age counts from now.
      finished_unix_ms_[j.id] = j.finished_unix_ms > 0 ? j.finished_unix_ms : WallMsNow();
      if (!j.metrics.empty()) stored_metrics_[j.id] = std::move(j.metrics);
    } else {
      live_jobs_.insert(j.id);
      ++unfinished;
      spdlog::info("job {} '{}' resumes: {} of {} task runs were done", j.id, j.name, j.done.size(),
                   scheduler_->job(j.id)->runs.size());
    }
  }
  // Ids of forgotten jobs are not given out again.
  ASSIGN_OR_RETURN(JobId max_id, options_.store->LoadMaxJobId());
  scheduler_->ReserveJobIds(max_id);
  ASSIGN_OR_RETURN(auto live, options_.store->LoadLiveWorkers());
  if (unfinished > 0) {
    recovery_.Open(live, now + TimeUs{options_.recovery_grace_ms} * 1000);
    spdlog::info("recovery: waiting for {} workers to register again (at most {} ms)",
                 live ? std::to_string(live->size()) : "the", options_.recovery_grace_ms);
  } else if (live) {
    // Nothing to resume: forget them; those alive register again.
    for (std::string& key : *live) store_pending_.push_back(WorkerRecord{std::move(key), false});
  }
  spdlog::info("job store: {} jobs reloaded, {} unfinished", counters_.restored_jobs, unfinished);
  return Status::Ok();
}

bool Controller::RestoreSession(const StoredJob& j, TimeUs now) {
  if (!DriverSessions::IsStoredSession(j.spec_json)) return false;
  if (IsTerminal(j.state)) {
    FailRestoredSession(j, "", now);
    return true;
  }
  const auto spec_json = nlohmann::json::parse(j.spec_json, nullptr, false);
  // Written by this controller; a file edited by hand reads as the defaults.
  const auto number = [&](const char* key, uint32_t fallback) {
    auto it = spec_json.find(key);
    return it != spec_json.end() && it->is_number_unsigned() && *it <= UINT32_MAX
               ? it->get<uint32_t>()
               : fallback;
  };
  JobSpec s;
  s.name = j.name;
  s.weight = std::clamp<uint32_t>(number("weight", 1), 1, 1'000'000);
  auto built = JobGraph::BuildOpen(s);
  if (!built.ok()) {
    FailRestoredSession(j, "driver session lost: " + built.status().message(), now);
    return true;
  }
  // Its groups rebuild its tasks, in the order the controller took them;
  // then its done runs stay done, and those that failed or were cancelled
  // end so again (a session goes on past them).
  std::shared_ptr<JobGraph> graph = std::move(built).value();
  auto replayed = DriverSessions::Replay(j.groups, graph.get());
  if (!replayed.ok()) {
    FailRestoredSession(j, "driver session lost: " + replayed.status().message(), now);
    return true;
  }
  std::vector<Scheduler::RestoredRun> done;
  done.reserve(j.done.size());
  for (const TaskDoneRecord& r : j.done) {
    done.push_back({r.run, r.attempt, r.start, r.end, r.bytes, r.buffers});
  }
  if (Status st = scheduler_->RestoreJob(j.id, graph, done, j.state, "", j.submitted, -1, now,
                                         j.started, {j.tenant, j.tenant_share});
      !st.ok()) {
    spdlog::error("job {} from the store: {}", j.id, st.message());
    return true;
  }
  for (const RunEndedRecord& e : j.ended) {
    Status st = scheduler_->RestoreRunEnded(j.id, e.run, e.cancelled, e.error, now);
    if (!st.ok()) spdlog::error("job {} from the store: {}", j.id, st.message());
  }
  ++counters_.restored_jobs;
  KeepHistory(j);
  live_jobs_.insert(j.id);
  sessions_.Restore(j.id, std::move(replayed).value(), number("heartbeat_ms", 1000), now);
  spdlog::info("driver session {} '{}' waits for its driver: {} groups, {} of {} runs done", j.id,
               j.name, j.groups.size(), j.done.size(), graph->size());
  return true;
}

void Controller::FailRestoredSession(const StoredJob& j, const std::string& why, TimeUs now) {
  JobSpec s;
  s.name = j.name;
  auto graph = JobGraph::BuildOpen(s);
  if (!graph.ok()) return;
  const bool ended = IsTerminal(j.state);
  const JobState state = ended ? j.state : JobState::kFailed;
  const std::string& error = ended ? j.error : why;
  const TimeUs finished = ended ? j.finished : now;
  // Its calls are not rebuilt (an ended session runs nothing), but it
  // keeps its start, its figures and its end's wall clock (--keep-hours).
  Status st =
      scheduler_->RestoreJob(j.id, std::move(graph).value(), {}, state, error, j.submitted,
                             finished, now, ended ? j.started : -1, {j.tenant, j.tenant_share});
  if (!st.ok()) {
    spdlog::error("job {} from the store: {}", j.id, st.message());
    return;
  }
  ++counters_.restored_jobs;
  // Its times are what is kept, its end this controller's when it ends now.
  StoredJob kept;
  kept.id = j.id;
  kept.state = state;
  kept.submitted_unix_us = j.submitted_unix_us;
  kept.started_unix_us = ended ? j.started_unix_us : 0;
  kept.finished_unix_us = ended ? j.finished_unix_us : wall_.ToUnixUs(now);
  KeepHistory(kept);
  finished_order_.push_back(j.id);
  const bool known = ended && j.finished_unix_ms > 0;
  finished_unix_ms_[j.id] = known ? j.finished_unix_ms : WallMsNow();
  if (ended && !j.metrics.empty()) stored_metrics_[j.id] = j.metrics;
  if (!ended) {
    JobEndedRecord rec{j.id, state, error, finished, finished_unix_ms_[j.id], -1, {}};
    rec.finished_unix_us = kept.finished_unix_us;
    store_pending_.push_back(std::move(rec));
    spdlog::warn("job {} '{}': {}", j.id, j.name, error);
  }
}

void Controller::KeepHistory(const StoredJob& j) {
  auto h = std::make_shared<JobHistory>();
  h->submitted_unix_us = j.submitted_unix_us;
  h->finished_unix_us = IsTerminal(j.state) ? j.finished_unix_us : 0;
  h->started_unix_us = j.started_unix_us;
  h->runs.reserve(j.done.size());
  std::map<std::string, uint16_t> names;
  for (const TaskDoneRecord& r : j.done) {
    PastRun p;
    p.run = r.run;
    p.device = r.device;
    p.start_unix_us = r.start_unix_us;
    p.end_unix_us = r.end_unix_us;
    p.lane = r.place.lane;
    // Workers a job ran on number far fewer than 65535; past that, a run
    // counts as one whose place is not known.
    auto it = names.find(r.place.worker);
    if (it == names.end() && names.size() < UINT16_MAX) {
      it = names.emplace(r.place.worker, static_cast<uint16_t>(names.size())).first;
      h->workers.push_back(r.place.worker);
    }
    p.placed = r.place.known() && it != names.end();
    if (it != names.end()) p.worker = it->second;
    p.kind = static_cast<CoreKind>(p.placed ? r.place.kind : 0);
    if (!p.placed) ++h->unplaced;
    // An unfinished job's first dispatch is its earliest done run's (as
    // Scheduler::RestoreJob takes it) when the store has no end for it.
    if (j.started_unix_us == 0 && r.start_unix_us > 0 && j.started < 0 &&
        (h->started_unix_us == 0 || r.start_unix_us < h->started_unix_us)) {
      h->started_unix_us = r.start_unix_us;
    }
    h->runs.push_back(p);
  }
  std::sort(h->runs.begin(), h->runs.end(),
            [](const PastRun& a, const PastRun& b) { return a.run < b.run; });
  history_[j.id] = std::move(h);
}

int64_t Controller::WallMsNow() const { return wall_.ToUnixUs(NowUs()) / 1000; }

namespace {

bool IsGangMember(const Scheduler& s, JobId job_id, uint32_t run) {
  const JobRun* job = s.job(job_id);
  return job != nullptr && run < job->runs.size() &&
         job->graph->task(run % job->graph->size()).group != kNoGroup;
}

}  // namespace

void Controller::AdoptReported(const WorkerInfo& w, const RegisterMsg& m, TimeUs now) {
  // A held attempt that is not adopted is stale (the run went elsewhere,
  // e.g. while this worker was stopped, or its job ended): stopped there,
  // so it does not hold a lane (a collective would wait a minute for
  // peers that moved on). A run recorded done is not there to stop.
  std::map<JobId, CancelRuns> stale;
  std::set<JobId> gangs_adopted;
  for (const HeldTask& h : m.held) {
    if (RunsOn(h, w.device)) continue;  // it came back on a new connection
    if (scheduler_->AdoptRun(h.job, h.task, h.attempt, w.device, h.core, h.lane, now)) {
      ++counters_.adopted_runs;
      if (IsGangMember(*scheduler_, h.job, h.task)) gangs_adopted.insert(h.job);
    } else if (RunIsAhead(h.job, h.task)) {
      deferred_[{h.job, h.task}] = DeferredRun{w.id, h, std::nullopt};
    } else if (PlacedOn(h.job, h.task, w.device)) {
      // Another attempt of it runs here (this one ended here and its
      // result is kept for a re-registration, or it is another
      // controller's): nothing to stop, and a cancel would stop that one.
    } else {
      stale[h.job].job = h.job;
      stale[h.job].runs.push_back(h.task);
    }
  }
  for (auto& [job, c] : stale) transport_.Send(w.identity, c);
  // Outputs of done runs: consumers fetch them from this worker. Outputs no
  // one can read any more are freed: of jobs nobody knows, and of jobs
  // whose end frees them live (a cancel, a session's end), which ended
  // while this worker was away (a cancel in the recovery wait, a session
  // the restart failed). A succeeded or failed job's outputs stay until it
  // is forgotten, as they do live.
  std::set<JobId> to_free;
  for (const HeldOutput& o : m.outputs) {
    const JobRun* job = scheduler_->job(o.job);
    if (job == nullptr ||
        (IsTerminal(job->state) && (job->open || job->state == JobState::kCancelled))) {
      to_free.insert(o.job);
      continue;
    }
    if (o.run >= job->runs.size() || job->runs[o.run].state != TaskState::kDone) continue;
    if (auto at = outputs_.find({o.job, o.run});
        at != outputs_.end() && at->second.worker == w.id) {
      continue;  // known here already: it came back on a new connection
    }
    outputs_[{o.job, o.run}] = OutputLocation{w.id, o.bytes, o.buffers};
    scheduler_->RecordOutput(o.job, o.run, w.device, o.bytes, o.buffers);
    // A resumed driver heard of it done before this worker came back.
    sessions_.OnRunDone(o.job, o.run, w.data_endpoint, o.bytes, o.buffers);
    ++counters_.adopted_outputs;
  }
  for (JobId job : to_free) transport_.Send(w.identity, FreeJob{job});
  AdoptStates(w, m.states);
  if (!m.held.empty() || !m.outputs.empty()) {
    spdlog::info("worker '{}' holds {} task(s) and {} output(s)", m.name, m.held.size(),
                 m.outputs.size());
  }
  // A worker back after the recovery window closed: a gang member it
  // brought back may split its gang (adopted running beside mates queued
  // again), which the window's close would have started over; so it is
  // started over here, once its outputs are known (RebuildUnheldOutputs),
  // or the mates would be sent without it. Only then: a worker back on a
  // new connection re-reports what it holds, and a rebuild meanwhile
  // would run again what its outputs still hold.
  if (!recovery_.open()) {
    for (JobId job : gangs_adopted) scheduler_->RebuildUnheldOutputs(job, now);
  }
}

bool Controller::RunsOn(const HeldTask& h, DeviceId device) const {
  return PlacedOn(h.job, h.task, device) &&
         scheduler_->job(h.job)->runs[h.task].attempt == h.attempt;
}

bool Controller::PlacedOn(JobId job_id, uint32_t run, DeviceId device) const {
  const JobRun* job = scheduler_->job(job_id);
  if (job == nullptr || run >= job->runs.size()) return false;
  const TaskRecord& rec = job->runs[run];
  return rec.state == TaskState::kRunning && rec.core != kNoCore &&
         scheduler_->pool().core(rec.core).device == device;
}

bool Controller::RunIsAhead(JobId job_id, uint32_t run) const {
  const JobRun* job = scheduler_->job(job_id);
  return job != nullptr && !job->open && !IsTerminal(job->state) && run < job->runs.size() &&
         run / job->graph->size() > job->step;
}

void Controller::AdoptDeferred(TimeUs now) {
  for (auto it = deferred_.begin(); it != deferred_.end();) {
    const auto [job, run] = it->first;
    if (RunIsAhead(job, run)) {
      ++it;
      continue;
    }
    DeferredRun d = std::move(it->second);
    it = deferred_.erase(it);
    WorkerInfo& w = workers_[d.worker];
    if (!w.alive) continue;  // gone: the run is dispatched as any other
    const HeldTask& h = d.held;
    if (!scheduler_->AdoptRun(job, run, h.attempt, w.device, h.core, h.lane, now)) {
      // The job ended, or the run went elsewhere meanwhile: stop it there.
      if (!d.result && !PlacedOn(job, run, w.device)) {
        transport_.Send(w.identity, CancelRuns{job, {run}});
      }
      continue;
    }
    ++counters_.adopted_runs;
    if (!recovery_.open() && IsGangMember(*scheduler_, job, run)) {
      scheduler_->RebuildUnheldOutputs(job, now);  // as AdoptReported
    }
    if (d.result) OnDone(w, DoneBatch{w.id, {std::move(*d.result)}, 0}, now);
  }
}

bool Controller::HoldResume(const std::string& identity, SessionOpen& open) {
  // A resume waits for the recovery window: its driver then hears where
  // the outputs of its done runs are. Bounded, as a flood would be.
  constexpr size_t kMostHeld = 65536;
  if (open.resume == 0 || !recovery_.open() || held_resumes_.size() >= kMostHeld) return false;
  held_resumes_.emplace_back(identity, std::move(open));
  return true;
}

bool Controller::RecoveryHoldsDispatch(TimeUs now) {
  if (!recovery_.open()) return false;
  // Judged at the loop's last read of its socket, as liveness is: a loop
  // held up since (stopped after that read, starved) has not read the
  // registrations that came meanwhile, and its next turn credits the
  // stall to the grace (CreditStall).
  if (!recovery_.Close(std::min(now, read_at_))) return true;
  // Outputs that waiting runs need and no worker reported are rebuilt now,
  // before anything reads them.
  size_t rebuilt = 0;
  for (JobId id : live_jobs_) rebuilt += scheduler_->RebuildUnheldOutputs(id, now);
  counters_.rebuilt_runs += rebuilt;
  // Drivers get their sessions back now that outputs are known; those that
  // have not come yet have their whole wait from here.
  sessions_.RestartWaits(now);
  for (auto& [identity, open] : held_resumes_) sessions_.Open(identity, open, now);
  held_resumes_.clear();
  if (writer_) {
    for (const std::string& key : recovery_.missing()) {
      store_pending_.push_back(WorkerRecord{key, false});
    }
  }
  const bool back = recovery_.how() == RecoveryWindow::End::kWorkersBack;
  // Who did not come back, as "name (pid N)": what the rebuilt runs were
  // held by, for whoever reads why they ran again.
  std::string not_back;
  for (const std::string& key : recovery_.missing()) {
    const size_t bar = key.find('|'), bar2 = key.find('|', bar + 1);
    not_back +=
        (not_back.empty() ? "; not back: " : ", ") + key.substr(0, bar) +
        (bar2 == std::string::npos ? "" : " (pid " + key.substr(bar + 1, bar2 - bar - 1) + ")");
  }
  spdlog::info(
      "recovery: dispatch resumes after {} ms: {} ({} of {} expected workers back{}); {} task "
      "run(s) rebuilt for outputs no worker holds",
      (now - started_at_) / 1000, back ? "all workers back" : "grace expired",
      recovery_.returned_count(), recovery_.expected_count(), not_back, rebuilt);
  return false;
}

// Sub-model states a worker kept across the restart: it is a holder again,
// so a worker without a copy loads the state from it rather than starting
// an empty one. States of jobs that ended go with the job's FreeJob.
void Controller::AdoptStates(const WorkerInfo& w, const std::vector<HeldState>& states) {
  for (const HeldState& st : states) {
    const JobRun* job = scheduler_->job(st.job);
    if (job == nullptr || IsTerminal(job->state) || job->open) continue;
    const std::vector<SubmodelSpec>& submodels = job->graph->spec().submodels;
    for (uint32_t s = 0; s < submodels.size(); ++s) {
      if (submodels[s].name == st.submodel) state_holders_.Held(st.job, s, w.id);
    }
  }
}

}  // namespace hmpmd
