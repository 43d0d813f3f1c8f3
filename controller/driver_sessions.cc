#include "hmpmd/controller/driver_sessions.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <nlohmann/json.hpp>

#include "hmpmd/controller/job_spec_parser.h"
#include "hmpmd/protocol/builtin_args.h"
#include "hmpmd/protocol/job_spec.h"
#include "hmpmd/protocol/json_text.h"
#include "hmpmd/protocol/one_line.h"
#include "hmpmd/protocol/stall_clock.h"

namespace hmpmd {
namespace {

// Marks a stored spec as a driver session's (IsStoredSession).
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

// The driver's labels are checked as a job spec's "requires" is.
Result<TaskSpec> ToSpec(WireTask&& w, uint32_t index) {
  TaskSpec t;
  ASSIGN_OR_RETURN(t.required,
                   CheckedLabels("tasks[" + std::to_string(index) + "] '" + w.id + "': requires",
                                 std::move(w.required)));
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
  t.max_retries = w.max_retries;
  t.retry_on = std::move(w.retry_on);
  return t;
}

Result<SubmodelSpec> ToSpec(WireSubmodel&& w) {
  SubmodelSpec sm;
  ASSIGN_OR_RETURN(sm.required,
                   CheckedLabels("actor '" + w.name + "': requires", std::move(w.required)));
  sm.name = std::move(w.name);
  sm.kind = w.kind <= static_cast<uint8_t>(SubmodelKind::kLearner)
                ? static_cast<SubmodelKind>(w.kind)
                : SubmodelKind::kGeneric;
  sm.devices = w.devices;
  sm.elastic = w.elastic;
  return sm;
}

// A refusal, with the code the driver's Session::Open() returns.
SessionAck Refused(const Status& why) {
  return SessionAck{0, why.message(), static_cast<uint8_t>(why.code())};
}

}  // namespace

DriverSessions::DriverSessions(Host* host, OpenJobs* jobs, const TokenBook* tokens)
    : host_(host), jobs_(jobs), tokens_(tokens) {}

std::string DriverSessions::StoredSpec(const std::string& name) {
  return JsonText(nlohmann::json{{"name", name}, {kSessionKey, true}});
}

bool DriverSessions::IsStoredSession(std::string_view spec_json) {
  auto spec = nlohmann::json::parse(spec_json, nullptr, false);
  return spec.is_object() && spec.value(kSessionKey, false);
}

DriverSessions::Session* DriverSessions::Known(const std::string& identity, JobId claimed,
                                               TimeUs now) {
  auto id = session_of_.find(identity);
  auto s = id == session_of_.end() ? sessions_.end() : sessions_.find(id->second);
  if (s != sessions_.end()) {
    s->second.last_seen = now;
    return &s->second;
  }
  host_->UnknownPeer();
  // A session of before a restart (restored as failed) hears why.
  const JobRun* old = claimed != 0 ? jobs_->job(claimed) : nullptr;
  std::string why = "no such driver session";
  if (old != nullptr && old->graph->open() && IsTerminal(old->state) && !old->error.empty()) {
    why += ": " + old->error;
  }
  host_->SendTo(identity, SessionUpdate{0, {}, {}, true, "failed", std::move(why)});
  return nullptr;
}

void DriverSessions::Open(const std::string& identity, const SessionOpen& m, TimeUs now) {
  const std::string call = "session open '" + OneLine(m.name, 64) + "'";
  std::string who, role;
  JobTenant tenant;
  if (tokens_->enabled()) {
    const std::optional<TokenHolder> holder = tokens_->Find(m.token);
    if (!holder || holder->role == TokenRole::kRead) {
      const std::string why =
          holder ? "the token of '" + holder->name + "' (role read) may not open a session"
                 : "wrong or missing token";
      if (!holder) host_->RefusedToken(m.name);
      host_->Audit(identity, holder ? holder->name : "", holder ? "read" : "", call,
                   "refused: " + why);
      host_->SendTo(identity, Refused(Status::PermissionDenied(why)));
      return;
    }
    who = holder->name;
    role = std::string(TokenRoleName(holder->role));
    tenant = {holder->tenant, holder->share};
  }
  if (session_of_.count(identity)) {
    host_->SendTo(identity,
                  Refused(Status::AlreadyExists("this connection already has a session")));
    return;
  }
  // A name is printed in logs, listings and `hmpmd status`, as a job spec's,
  // and bounded as one (a 100 KB name would make a 100 KB status line).
  if (m.name.size() > SpecLimits{}.max_string) {
    host_->SendTo(identity,
                  Refused(Status::InvalidArgument("session name: " + std::to_string(m.name.size()) +
                                                  " bytes, longer than the limit of " +
                                                  std::to_string(SpecLimits{}.max_string))));
    return;
  }
  if (std::string ch = FirstControlChar(m.name); !ch.empty()) {
    host_->SendTo(
        identity,
        Refused(Status::InvalidArgument("session name: contains the control character " + ch)));
    return;
  }
  JobSpec spec;
  spec.name = m.name.empty() ? "driver" : m.name;
  spec.weight = std::max(1u, m.weight);
  auto graph = JobGraph::BuildOpen(spec);
  if (!graph.ok()) {
    host_->SendTo(identity, Refused(graph.status()));
    return;
  }
  // Acknowledged once final, as a REST submit's 201: a controller killed
  // before the write would give the id a driver holds to the next session.
  auto job = host_->SubmitOpenJob(
      {StoredSpec(spec.name), std::move(graph).value(), std::move(tenant)},
      [this, identity, who, role, call](Result<JobId> id) {
        host_->Audit(identity, who, role, call,
                     id.ok() ? "job " + std::to_string(*id) : "refused: " + id.status().message());
        if (id.ok()) {
          // The job's own data token: it opens this session's outputs only.
          host_->SendTo(identity, SessionAck{*id, "", 0, JobDataToken(data_token_, *id)});
          return;
        }
        // Refused, or withdrawn when its write failed: the driver may try
        // again later.
        host_->SendTo(identity, Refused(id.status()));
        if (auto open = session_of_.find(identity); open != session_of_.end()) {
          sessions_.erase(open->second);
          session_of_.erase(open);
        }
      });
  if (!job.ok()) return;
  Session& s = sessions_[*job];
  s.identity = identity;
  s.who = std::move(who);
  s.role = std::move(role);
  s.last_seen = now;
  // Bounded as the client library bounds it: a driver that died with a
  // huge period would hold its session open for days.
  s.timeout_us = TimeUs{std::clamp(m.heartbeat_ms, 100u, 60'000u)} * 10'000;
  s.update.job = *job;
  session_of_[identity] = *job;
  spdlog::info("driver session '{}' opened as job {}", spec.name, *job);
}

void DriverSessions::Submit(const std::string& identity, SessionSubmit& m, TimeUs now) {
  Session* s = Known(identity, m.job, now);
  if (s == nullptr) return;
  const JobId job = s->update.job;
  const JobRun* run = jobs_->job(job);
  for (SubmitGroup& group : m.groups) {
    GroupAck ack;
    ack.seq = group.seq;
    ack.first_task = run ? run->graph->size() : 0;
    Status st;
    std::vector<SubmodelSpec> submodels;
    std::vector<std::string> actors;
    for (WireSubmodel& w : group.submodels) {
      actors.push_back(w.name);
      Result<SubmodelSpec> sm = ToSpec(std::move(w));
      if (!sm.ok() && st.ok()) st = sm.status();
      if (sm.ok()) submodels.push_back(std::move(sm).value());
    }
    std::vector<TaskSpec> tasks;
    std::vector<std::string> labels;
    tasks.reserve(group.tasks.size());
    for (WireTask& w : group.tasks) {
      labels.push_back(w.id);
      Result<TaskSpec> t =
          ToSpec(std::move(w), ack.first_task + static_cast<uint32_t>(tasks.size()));
      if (!t.ok() && st.ok()) st = t.status();
      // A refused one keeps its place, so later indices stay right.
      tasks.push_back(t.ok() ? std::move(t).value() : TaskSpec{});
    }
    // As for submitted jobs (Controller::Submit): workers run built-ins from
    // their arguments alone, so a gemm without its sizes is refused here.
    if (st.ok()) st = RefusedInput(s->refused, tasks, ack.first_task);
    if (st.ok()) st = RefusedActor(s->refused_actors, tasks, ack.first_task);
    if (st.ok()) st = CheckWorkerTaskArgs(tasks, ack.first_task);
    if (st.ok()) st = host_->RoomForRuns(tasks.size(), "group " + std::to_string(group.seq));
    if (st.ok()) st = jobs_->Append(job, std::move(submodels), std::move(tasks), now);
    if (!st.ok()) {
      ack.error = st.message();
      // A refused task did not succeed: the session ends failed (Close()
      // is not OK), as it does for a task that failed on a worker.
      jobs_->CountRejected(job, labels.size(), ack.error);
      for (std::string& label : labels) s->refused.insert(std::move(label));
      for (std::string& actor : actors) s->refused_actors[std::move(actor)] = ack.error;
    } else {
      for (const std::string& actor : actors) s->refused_actors.erase(actor);
    }
    s->update.acks.push_back(std::move(ack));
  }
}

void DriverSessions::Control(const std::string& identity, const SessionControl& m, TimeUs now) {
  Session* s = Known(identity, m.job, now);
  if (s == nullptr) return;
  const JobId job = s->update.job;
  // Answered, so that the driver notices a controller that is gone.
  if (m.close == SessionControl::kKeepOpen) host_->SendTo(s->identity, SessionUpdate{job});
  for (uint32_t run : m.release) jobs_->ReleaseOutput(job, run);
  for (uint32_t run : m.cancel) {
    Status st = jobs_->CancelRun(job, run, now);
    if (!st.ok()) spdlog::debug("session {}: cancel: {}", job, st.message());
  }
  if (m.close == SessionControl::kKeepOpen) return;
  const bool abort = m.close == SessionControl::kAbort;
  Status st = jobs_->Close(job, abort, "the driver aborted the session", now);
  if (!st.ok()) spdlog::debug("session {}: close: {}", job, st.message());
  const JobRun* run = jobs_->job(job);
  if (abort && run && run->state == JobState::kCancelled) host_->SendToLiveWorkers(CancelJob{job});
}

void DriverSessions::OnRunDone(JobId job, uint32_t run, const std::string& endpoint, uint64_t bytes,
                               uint32_t buffers) {
  auto s = sessions_.find(job);
  if (s == sessions_.end()) return;
  s->second.update.ended.push_back({run, TaskEnded::kDone, "", endpoint, bytes, buffers});
}

void DriverSessions::OnRunEnded(RunEnded e) {
  auto s = sessions_.find(e.job);
  if (s == sessions_.end()) return;
  const uint8_t state =
      e.state == TaskState::kCancelled ? TaskEnded::kCancelled : TaskEnded::kFailed;
  s->second.update.ended.push_back({e.run, state, std::move(e.error), "", 0});
}

void DriverSessions::Flush(TimeUs now, TimeUs read_at) {
  std::vector<JobId> lost;
  for (auto& [job, s] : sessions_) {
    if (!s.update.acks.empty() || !s.update.ended.empty()) {
      host_->SendTo(s.identity, s.update);
      s.update.acks.clear();
      s.update.ended.clear();
    }
    if (read_at - s.last_seen > s.timeout_us) lost.push_back(job);
  }
  for (JobId job : lost) {
    Session& s = sessions_[job];
    spdlog::warn("driver session {} lost: no message for {} ms", job, s.timeout_us / 1000);
    // Failed, as a session the controller lost in a restart: a driver that
    // died with nothing pending did not succeed either.
    if (jobs_->Fail(job, "driver session lost: no message from the driver", now).ok()) {
      host_->SendToLiveWorkers(CancelJob{job});
    }
    s.last_seen = now;  // End() removes it once the job has ended
  }
}

void DriverSessions::CreditStall(TimeUs stall, TimeUs now) {
  for (auto& [job, s] : sessions_) s.last_seen = StallClock::Credit(s.last_seen, stall, now);
}

bool DriverSessions::End(JobId job, const JobRun& run) {
  auto s = sessions_.find(job);
  if (s == sessions_.end()) return false;
  SessionUpdate& u = s->second.update;
  u.closed = true;
  u.job_state = std::string(JobStateName(run.state));
  u.job_error = run.error;
  host_->Audit(s->second.identity, s->second.who, s->second.role,
               "session end, job " + std::to_string(job),
               u.job_state + (run.error.empty() ? "" : ": " + run.error));
  // Told once the end is stored: a driver told its session succeeded must
  // not find it failed as lost after the controller's restart (or a
  // standby's takeover) right after.
  host_->AfterStored([host = host_, identity = s->second.identity, u = std::move(u)] {
    host->SendTo(identity, u);
  });
  // A session's outputs live as long as the session.
  host_->SendToLiveWorkers(FreeJob{job});
  session_of_.erase(s->second.identity);
  sessions_.erase(s);
  return true;
}

}  // namespace hmpmd
