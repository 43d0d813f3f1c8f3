// Controller: driver sessions (hmpmd::client). A session is an open job
// that the driver grows task by task; see controller.h.
#include <spdlog/spdlog.h>

#include <algorithm>
#include <nlohmann/json.hpp>

#include "hmpmd/controller/controller.h"
#include "hmpmd/protocol/builtin_args.h"
#include "hmpmd/protocol/job_spec.h"
#include "hmpmd/protocol/json_text.h"
#include "hmpmd/protocol/same_secret.h"

namespace hmpmd {
namespace {

// Marks a stored spec as a driver session's (RestoreSession).
constexpr char kSessionKey[] = "hmpmd_session";

// A task naming as its input a task refused earlier in the session: the
// graph does not know that label, and "unknown task" would mislead.
Status RefusedInput(const std::unordered_set<std::string>& refused,
                    const std::vector<TaskSpec>& tasks, uint32_t first) {
  if (refused.empty()) return Status::Ok();
  for (size_t i = 0; i < tasks.size(); ++i) {
    for (size_t k = 0; k < tasks[i].inputs.size(); ++k) {
      if (refused.count(tasks[i].inputs[k]) > 0) {
        return Status::InvalidArgument("tasks[" + std::to_string(first + i) + "] '" + tasks[i].id +
                                       "': inputs[" + std::to_string(k) + "]: task '" +
                                       tasks[i].inputs[k] + "' was refused at submission");
      }
    }
  }
  return Status::Ok();
}

// A task on an actor refused earlier in the session: the graph does not
// know that sub-model, and "unknown submodel" would hide why.
Status RefusedActor(const std::unordered_map<std::string, std::string>& refused,
                    const std::vector<TaskSpec>& tasks, uint32_t first) {
  if (refused.empty()) return Status::Ok();
  for (size_t i = 0; i < tasks.size(); ++i) {
    auto it = refused.find(tasks[i].submodel);
    if (it == refused.end()) continue;
    return Status::InvalidArgument("tasks[" + std::to_string(first + i) + "] '" + tasks[i].id +
                                   "': actor '" + it->first +
                                   "' was refused by the controller: " + it->second);
  }
  return Status::Ok();
}

TaskSpec ToSpec(WireTask&& w) {
  TaskSpec t;
  t.id = std::move(w.id);
  t.submodel = w.submodel.empty() ? "default" : std::move(w.submodel);
  t.kernel = std::move(w.kernel);
  t.core = w.core;
  t.inputs = std::move(w.inputs);
  t.args = std::move(w.args);
  t.cost.flops = w.flops;
  t.cost.bytes = w.bytes;
  if (!w.group.empty())
    t.collective = CollectiveSpec{std::move(w.group), std::move(w.op), w.group_bytes};
  return t;
}

// A refusal, with the code the driver's Session::Open() returns.
SessionAck Refused(const Status& why) {
  return SessionAck{0, why.message(), static_cast<uint8_t>(why.code())};
}

}  // namespace

void Controller::HandleSession(Incoming& in, TimeUs now) {
  const MsgType type = TypeOf(in.message);
  if (type == MsgType::kSessionOpen) {
    OnSessionOpen(in.identity, std::get<SessionOpen>(in.message), now);
    return;
  }
  auto id = session_of_.find(in.identity);
  auto s = id == session_of_.end() ? sessions_.end() : sessions_.find(id->second);
  if (s == sessions_.end()) {
    ++counters_.unknown_peers;
    // A session of before a restart (restored as failed) hears why.
    const JobId claimed = type == MsgType::kSessionSubmit
                              ? std::get<SessionSubmit>(in.message).job
                              : std::get<SessionControl>(in.message).job;
    const JobRun* old = claimed != 0 ? scheduler_->job(claimed) : nullptr;
    std::string why = "no such driver session";
    if (old != nullptr && old->graph->open() && IsTerminal(old->state) && !old->error.empty()) {
      why += ": " + old->error;
    }
    transport_.Send(in.identity, SessionUpdate{0, {}, {}, true, "failed", std::move(why)});
    return;
  }
  s->second.last_seen = now;
  if (type == MsgType::kSessionSubmit) {
    OnSessionSubmit(s->second, s->first, std::get<SessionSubmit>(in.message), now);
  } else {
    OnSessionControl(s->second, s->first, std::get<SessionControl>(in.message), now);
  }
}

void Controller::OnSessionOpen(const std::string& identity, const SessionOpen& m, TimeUs now) {
  if (!options_.token.empty() && !SameSecret(options_.token, m.token)) {
    LogRefusedToken("driver session", m.name);
    transport_.Send(identity, Refused(Status::PermissionDenied("wrong or missing token")));
    return;
  }
  if (session_of_.count(identity)) {
    transport_.Send(identity,
                    Refused(Status::AlreadyExists("this connection already has a session")));
    return;
  }
  // A name is printed in logs, listings and `hmpmd status`, as a job spec's,
  // and bounded as one (a 100 KB name made a 100 KB status line).
  if (m.name.size() > SpecLimits{}.max_string) {
    transport_.Send(
        identity, Refused(Status::InvalidArgument("session name: " + std::to_string(m.name.size()) +
                                                  " bytes, longer than the limit of " +
                                                  std::to_string(SpecLimits{}.max_string))));
    return;
  }
  if (std::string ch = FirstControlChar(m.name); !ch.empty()) {
    transport_.Send(
        identity,
        Refused(Status::InvalidArgument("session name: contains the control character " + ch)));
    return;
  }
  JobSpec spec;
  spec.name = m.name.empty() ? "driver" : m.name;
  spec.weight = std::max(1u, m.weight);
  auto graph = JobGraph::BuildOpen(spec);
  if (!graph.ok()) {
    transport_.Send(identity, Refused(graph.status()));
    return;
  }
  nlohmann::json stored = {{"name", spec.name}, {kSessionKey, true}};
  // Acknowledged once final, as a REST submit's 201: a controller killed
  // before the write would give the id a driver holds to the next session.
  auto job =
      Submit({JsonText(stored), std::move(graph).value()}, [this, identity](Result<JobId> id) {
        if (id.ok()) {
          transport_.Send(identity, SessionAck{*id, "", 0, data_token_});
          return;
        }
        // Refused, or withdrawn when its write failed; the
        // driver may try again later.
        transport_.Send(identity, Refused(id.status()));
        auto open = session_of_.find(identity);
        if (open != session_of_.end()) {
          sessions_.erase(open->second);
          session_of_.erase(open);
        }
      });
  if (!job.ok()) return;
  DriverSession& s = sessions_[*job];
  s.identity = identity;
  s.last_seen = now;
  // Bounded as the client library bounds it: a driver that died with a
  // huge period would hold its session open for days.
  s.timeout_us = TimeUs{std::clamp(m.heartbeat_ms, 100u, 60'000u)} * 10'000;
  s.update.job = *job;
  session_of_[identity] = *job;
  spdlog::info("driver session '{}' opened as job {}", spec.name, *job);
}

void Controller::OnSessionSubmit(DriverSession& s, JobId job, SessionSubmit& m, TimeUs now) {
  const JobRun* run = scheduler_->job(job);
  for (SubmitGroup& group : m.groups) {
    GroupAck ack;
    ack.seq = group.seq;
    ack.first_task = run ? run->graph->size() : 0;
    std::vector<SubmodelSpec> submodels;
    std::vector<std::string> actors;
    for (WireSubmodel& w : group.submodels) {
      actors.push_back(w.name);
      SubmodelSpec sm;
      sm.name = std::move(w.name);
      sm.kind = w.kind <= static_cast<uint8_t>(SubmodelKind::kLearner)
                    ? static_cast<SubmodelKind>(w.kind)
                    : SubmodelKind::kGeneric;
      sm.devices = w.devices;
      sm.elastic = w.elastic;
      submodels.push_back(std::move(sm));
    }
    std::vector<TaskSpec> tasks;
    tasks.reserve(group.tasks.size());
    for (WireTask& w : group.tasks) tasks.push_back(ToSpec(std::move(w)));
    // As for submitted jobs (Submit): workers run built-ins from their
    // arguments alone, so a gemm without its sizes is refused here.
    std::vector<std::string> labels;
    for (const TaskSpec& t : tasks) labels.push_back(t.id);
    Status st = RefusedInput(s.refused, tasks, ack.first_task);
    if (st.ok()) st = RefusedActor(s.refused_actors, tasks, ack.first_task);
    if (st.ok()) st = CheckWorkerTaskArgs(tasks, ack.first_task);
    if (st.ok()) st = RoomForRuns(tasks.size(), "group " + std::to_string(group.seq));
    if (st.ok()) st = scheduler_->AppendTasks(job, std::move(submodels), std::move(tasks), now);
    if (!st.ok()) {
      ack.error = st.message();
      // A refused task did not succeed: the session ends failed (Close()
      // is not OK), as it does for a task that failed on a worker.
      scheduler_->CountRejected(job, labels.size(), ack.error);
      for (std::string& label : labels) s.refused.insert(std::move(label));
      for (std::string& actor : actors) s.refused_actors[std::move(actor)] = ack.error;
    } else {
      for (const std::string& actor : actors) s.refused_actors.erase(actor);
    }
    s.update.acks.push_back(std::move(ack));
  }
}

void Controller::OnSessionControl(DriverSession& s, JobId job, const SessionControl& m,
                                  TimeUs now) {
  // Answered, so that the driver notices a controller that is gone.
  if (m.close == SessionControl::kKeepOpen) transport_.Send(s.identity, SessionUpdate{job});
  for (uint32_t run : m.release) scheduler_->ReleaseOutput(job, run);
  for (uint32_t run : m.cancel) {
    Status st = scheduler_->CancelRun(job, run, now);
    if (!st.ok()) spdlog::debug("session {}: cancel: {}", job, st.message());
  }
  if (m.close == SessionControl::kKeepOpen) return;
  const bool abort = m.close == SessionControl::kAbort;
  Status st = scheduler_->CloseJob(job, abort, "the driver aborted the session", now);
  if (!st.ok()) spdlog::debug("session {}: close: {}", job, st.message());
  const JobRun* run = scheduler_->job(job);
  if (abort && run && run->state == JobState::kCancelled) {
    SendToLiveWorkers(CancelJob{job});
  }
}

void Controller::FlushSessions(TimeUs now) {
  // Runs that failed or were cancelled, and what workers must stop or free.
  std::map<WorkerId, CancelRuns> cancels;
  for (RunEnded& e : scheduler_->TakeEnded()) {
    if (const WorkerInfo* w = workers_.OfDevice(e.device)) {
      CancelRuns& c = cancels[w->id];
      c.job = e.job;
      c.runs.push_back(e.run);
    }
    auto s = sessions_.find(e.job);
    if (s == sessions_.end()) continue;
    const uint8_t state =
        e.state == TaskState::kCancelled ? TaskEnded::kCancelled : TaskEnded::kFailed;
    s->second.update.ended.push_back({e.run, state, std::move(e.error), "", 0});
  }
  for (auto& [worker, c] : cancels) {
    if (workers_[worker].alive) transport_.Send(workers_[worker].identity, c);
  }
  std::map<std::pair<WorkerId, JobId>, FreeRuns> frees;
  for (const OutputFreed& f : scheduler_->TakeFreed()) {
    const WorkerInfo* w = workers_.OfDevice(f.device);
    if (w == nullptr) continue;
    FreeRuns& fr = frees[{w->id, f.job}];
    fr.job = f.job;
    fr.runs.push_back(f.run);
    outputs_.erase({f.job, f.run});
  }
  for (auto& [key, fr] : frees) {
    if (workers_[key.first].alive) transport_.Send(workers_[key.first].identity, fr);
  }
  std::vector<JobId> lost;
  for (auto& [job, s] : sessions_) {
    if (!s.update.acks.empty() || !s.update.ended.empty()) {
      transport_.Send(s.identity, s.update);
      s.update.acks.clear();
      s.update.ended.clear();
    }
    if (now - s.last_seen > s.timeout_us) lost.push_back(job);
  }
  for (JobId job : lost) {
    spdlog::warn("driver session {} lost: no message for {} ms", job,
                 sessions_[job].timeout_us / 1000);
    // Failed, as a session the controller lost in a restart: a driver that
    // died with nothing pending did not succeed either.
    if (scheduler_->FailOpenJob(job, "driver session lost: no message from the driver", now).ok()) {
      SendToLiveWorkers(CancelJob{job});
    }
    sessions_[job].last_seen = now;  // EndSession removes it once the job has ended
  }
}

void Controller::EndSession(JobId job, const JobRun& run) {
  auto s = sessions_.find(job);
  if (s == sessions_.end()) return;
  SessionUpdate& u = s->second.update;
  u.closed = true;
  u.job_state = std::string(JobStateName(run.state));
  u.job_error = run.error;
  transport_.Send(s->second.identity, u);
  // A session's outputs live as long as the session.
  SendToLiveWorkers(FreeJob{job});
  auto [first, last] = JobOutputs(job);
  outputs_.erase(first, last);
  session_of_.erase(s->second.identity);
  sessions_.erase(s);
}

bool Controller::RestoreSession(const StoredJob& j, TimeUs now) {
  auto spec = nlohmann::json::parse(j.spec_json, nullptr, false);
  if (!spec.is_object() || !spec.value(kSessionKey, false)) return false;
  JobSpec s;
  s.name = j.name;
  auto graph = JobGraph::BuildOpen(s);
  if (!graph.ok()) return false;
  // A session cannot resume: its driver's futures died with the connection.
  const bool ended = IsTerminal(j.state);
  const JobState state = ended ? j.state : JobState::kFailed;
  const std::string error =
      ended ? j.error : "driver session lost: the controller restarted while it was open";
  const TimeUs finished = ended ? j.finished : now;
  // Its calls are not stored (no graph to rebuild), but an ended session
  // keeps its start, its figures and its end's wall clock (--keep-hours).
  Status st = scheduler_->RestoreJob(j.id, std::move(graph).value(), {}, state, error, j.submitted,
                                     finished, now, ended ? j.started : -1);
  if (!st.ok()) {
    spdlog::error("job {} from the store: {}", j.id, st.message());
    return true;
  }
  ++counters_.restored_jobs;
  finished_order_.push_back(j.id);
  const bool known = ended && j.finished_unix_ms > 0;
  finished_unix_ms_[j.id] = known ? j.finished_unix_ms : UnixMs();
  if (ended && !j.metrics.empty()) stored_metrics_[j.id] = j.metrics;
  if (!ended) {
    store_pending_.push_back(
        JobEndedRecord{j.id, state, error, finished, finished_unix_ms_[j.id], -1, {}});
    spdlog::warn("job {} '{}': {}", j.id, j.name, error);
  }
  return true;
}

}  // namespace hmpmd
