#include "hmpmd/controller/driver_sessions.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <nlohmann/json.hpp>

#include "hmpmd/controller/job_spec_parser.h"
#include "hmpmd/protocol/builtin_args.h"
#include "hmpmd/protocol/codec.h"
#include "hmpmd/protocol/data_frames.h"
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

// A group's sub-models and tasks as specs, with its task labels and
// actors, and the first error: a refused task keeps its place (an empty
// spec), so later indices stay right. `group` is moved from.
struct GroupSpecs {
  std::vector<SubmodelSpec> submodels;
  std::vector<TaskSpec> tasks;
  std::vector<std::string> labels, actors;
  Status st;
};

GroupSpecs ToSpecs(SubmitGroup& group, uint32_t first_task) {
  GroupSpecs g;
  for (WireSubmodel& w : group.submodels) {
    g.actors.push_back(w.name);
    Result<SubmodelSpec> sm = ToSpec(std::move(w));
    if (!sm.ok() && g.st.ok()) g.st = sm.status();
    if (sm.ok()) g.submodels.push_back(std::move(sm).value());
  }
  g.tasks.reserve(group.tasks.size());
  for (WireTask& w : group.tasks) {
    g.labels.push_back(w.id);
    Result<TaskSpec> t = ToSpec(std::move(w), first_task + static_cast<uint32_t>(g.tasks.size()));
    if (!t.ok() && g.st.ok()) g.st = t.status();
    g.tasks.push_back(t.ok() ? std::move(t).value() : TaskSpec{});
  }
  return g;
}

// What the store keeps of `group`: a SessionSubmit's body holding it
// alone (Replay decodes it so). `group` is lent, not copied.
std::string StoredBody(JobId job, SubmitGroup& group) {
  SessionSubmit one;
  one.job = job;
  one.groups.push_back(std::move(group));
  std::string body;
  EncodeBody(one, &body);
  group = std::move(one.groups.front());
  return body;
}

}  // namespace

SessionAck DriverSessions::Refused(const Status& why) {
  return SessionAck{0, why.message(), static_cast<uint8_t>(why.code())};
}

DriverSessions::DriverSessions(Host* host, OpenJobs* jobs, const TokenBook* tokens)
    : host_(host), jobs_(jobs), tokens_(tokens) {}

std::string DriverSessions::StoredSpec(const std::string& name, uint32_t weight,
                                       uint32_t heartbeat_ms) {
  return JsonText(nlohmann::json{
      {"name", name}, {kSessionKey, true}, {"weight", weight}, {"heartbeat_ms", heartbeat_ms}});
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
  const std::string call = m.resume != 0 ? "session resume, job " + std::to_string(m.resume)
                                         : "session open '" + OneLine(m.name, 64) + "'";
  std::string who, role;
  JobTenant tenant;
  std::optional<TokenHolder> holder;
  if (tokens_->enabled()) {
    holder = tokens_->Find(m.token);
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
  if (m.resume != 0) {
    Resume(identity, m, who, role, holder, now);
    return;
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
  const uint32_t heartbeat_ms = std::clamp(m.heartbeat_ms, 100u, 60'000u);
  auto job = host_->SubmitOpenJob(
      {StoredSpec(spec.name, spec.weight, heartbeat_ms), std::move(graph).value(),
       std::move(tenant)},
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
  s.timeout_us = TimeUs{heartbeat_ms} * 10'000;
  s.update.job = *job;
  session_of_[identity] = *job;
  spdlog::info("driver session '{}' opened as job {}", spec.name, *job);
}

void DriverSessions::Submit(const std::string& identity, SessionSubmit& m, TimeUs now) {
  Session* s = Known(identity, m.job, now);
  if (s == nullptr) return;
  const JobId job = s->update.job;
  const JobRun* run = jobs_->job(job);
  const bool storing = host_->Storing();
  // Workers connect there: only a TCP endpoint of bounded length, one line.
  if (!m.notify.empty() && m.notify.starts_with("tcp://") &&
      m.notify.size() <= kMaxNoticeEndpoint && FirstControlChar(m.notify).empty()) {
    s->notify = std::move(m.notify);
  }
  for (SubmitGroup& group : m.groups) {
    GroupAck ack;
    ack.seq = group.seq;
    ack.first_task = run ? run->graph->size() : 0;
    // Encoded before the specs take the group apart.
    std::string body = storing ? StoredBody(job, group) : std::string();
    GroupSpecs g = ToSpecs(group, ack.first_task);
    Status st = std::move(g.st);
    // As for submitted jobs (Controller::Submit): workers run built-ins from
    // their arguments alone, so a gemm without its sizes is refused here.
    if (st.ok()) st = RefusedInput(s->refused, g.tasks, ack.first_task);
    if (st.ok()) st = RefusedActor(s->refused_actors, g.tasks, ack.first_task);
    if (st.ok()) st = CheckWorkerTaskArgs(g.tasks, ack.first_task);
    if (st.ok()) st = host_->RoomForRuns(g.tasks.size(), "group " + std::to_string(group.seq));
    if (st.ok()) st = jobs_->Append(job, std::move(g.submodels), std::move(g.tasks), now);
    if (!st.ok()) {
      ack.error = st.message();
      // A refused task did not succeed: the session ends failed (Close()
      // is not OK), as it does for a task that failed on a worker.
      jobs_->CountRejected(job, g.labels.size(), ack.error);
      for (std::string& label : g.labels) s->refused.insert(std::move(label));
      for (std::string& actor : g.actors) s->refused_actors[std::move(actor)] = ack.error;
    } else {
      for (const std::string& actor : g.actors) s->refused_actors.erase(actor);
    }
    // Stored before any of its runs' results (the store keeps their order),
    // so a restart finds every stored run's task.
    if (storing) {
      host_->Store(SessionGroupRecord{job, s->groups, ack.seq, ack.error, std::move(body)});
    }
    ++s->groups;
    s->acks.push_back(ack);
    s->update.acks.push_back(std::move(ack));
  }
  if (m.groups.empty()) return;
  host_->WhenStored([this, job, seq = m.groups.back().seq](bool ok) {
    auto it = sessions_.find(job);
    if (ok && it != sessions_.end()) it->second.stored_seq = std::max(it->second.stored_seq, seq);
  });
}

const std::string& DriverSessions::NotifyOf(JobId job) const {
  static const std::string kNone;
  if (sessions_.empty()) return kNone;
  auto it = sessions_.find(job);
  return it == sessions_.end() ? kNone : it->second.notify;
}

Result<DriverSessions::Replayed> DriverSessions::Replay(
    const std::vector<SessionGroupRecord>& groups, JobGraph* graph) {
  Replayed r;
  for (const SessionGroupRecord& stored : groups) {
    const std::string where = "stored group " + std::to_string(stored.index);
    auto msg = Decode(EncodeHeader(MsgType::kSessionSubmit), stored.body);
    auto* submit = msg.ok() ? std::get_if<SessionSubmit>(&*msg) : nullptr;
    if (submit == nullptr || submit->groups.size() != 1) {
      return Status::Corruption(where + ": cannot be read" +
                                (msg.ok() ? "" : ": " + msg.status().message()));
    }
    GroupAck ack{stored.seq, graph->size(), stored.error};
    GroupSpecs g = ToSpecs(submit->groups.front(), ack.first_task);
    if (!stored.error.empty()) {
      r.rejected += g.labels.size();
      if (r.first_rejection.empty()) r.first_rejection = stored.error;
      for (std::string& label : g.labels) r.refused.insert(std::move(label));
      for (std::string& actor : g.actors) r.refused_actors[std::move(actor)] = stored.error;
    } else {
      Status st = g.st;
      if (st.ok()) st = graph->MergeRequired(g.submodels, g.tasks, graph->size());
      if (st.ok()) st = graph->Append(std::move(g.submodels), std::move(g.tasks));
      if (!st.ok()) return Status::Corruption(where + ": " + st.message());
      for (const std::string& actor : g.actors) r.refused_actors.erase(actor);
    }
    r.acks.push_back(std::move(ack));
  }
  return r;
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
  const bool cancelled = e.state == TaskState::kCancelled;
  // Stored: a session goes on past a failed run, and a restart must not
  // run it again.
  if (host_->Storing()) host_->Store(RunEndedRecord{e.job, e.run, cancelled, e.error});
  s->second.ends[e.run] = e.error;
  s->second.update.ended.push_back(
      {e.run, cancelled ? TaskEnded::kCancelled : TaskEnded::kFailed, std::move(e.error), "", 0});
}

void DriverSessions::Flush(TimeUs now, TimeUs read_at) {
  std::vector<JobId> lost;
  for (auto& [job, s] : sessions_) {
    if (s.identity.empty()) {
      // Waiting for its driver: a resume tells it everything anew.
      s.update.acks.clear();
      s.update.ended.clear();
    } else if (!s.update.acks.empty() || !s.update.ended.empty() || s.stored_seq > s.told_stored) {
      s.update.stored_seq = s.told_stored = s.stored_seq;
      Send(s.identity, s.update);
    }
    const TimeUs limit = s.identity.empty() ? s.resume_window_us : s.timeout_us;
    if (read_at - s.last_seen > limit) lost.push_back(job);
  }
  for (JobId job : lost) {
    Session& s = sessions_[job];
    const bool waiting = s.identity.empty();
    spdlog::warn("driver session {} lost: {} for {} ms", job,
                 waiting ? "its driver did not resume it" : "no message",
                 (waiting ? s.resume_window_us : s.timeout_us) / 1000);
    // Failed, as a session the controller lost in a restart: a driver that
    // died with nothing pending did not succeed either.
    const std::string why = waiting ? "driver session lost: its driver did not resume it within " +
                                          std::to_string(s.resume_window_us / 1000) +
                                          " ms of the controller's restart"
                                    : "driver session lost: no message from the driver";
    if (jobs_->Fail(job, why, now).ok()) host_->SendToLiveWorkers(CancelJob{job});
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
  u.stored_seq = s->second.stored_seq;
  if (!s->second.identity.empty()) {
    host_->AfterStored(
        [this, identity = s->second.identity, u = std::move(u)]() mutable { Send(identity, u); });
  }
  // A session's outputs live as long as the session.
  host_->SendToLiveWorkers(FreeJob{job});
  if (!s->second.identity.empty()) session_of_.erase(s->second.identity);
  sessions_.erase(s);
  return true;
}

}  // namespace hmpmd
