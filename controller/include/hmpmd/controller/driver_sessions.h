// DriverSessions: the sessions of drivers (hmpmd::client) that speak to the
// controller's ROUTER socket beside the workers. A session is an open job
// (JobGraph::BuildOpen) that its driver grows group by group
// (SessionSubmit), whose runs it releases or cancels (SessionControl), and
// that ends when the driver closes or aborts it, or falls silent.
//
// It keeps the session records (by job, and by the driver's ZeroMQ
// identity) and what each driver must hear next, and answers the drivers.
// The open jobs live in the scheduler, reached through OpenJobs; admission,
// sending and counting are the controller's, reached through Host. So the
// sessions need neither the Scheduler's whole surface nor the transport.
//
// Thread-safety: not thread-safe; the controller loop owns it, and calls
// Host and OpenJobs on the loop.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <string_view>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "hmpmd/controller/job_submission.h"
#include "hmpmd/controller/token_book.h"
#include "hmpmd/protocol/data_token.h"
#include "hmpmd/protocol/messages.h"
#include "hmpmd/scheduler/scheduler.h"

namespace hmpmd {

class DriverSessions {
 public:
  // The scheduler's open jobs, as sessions grow and end them (the
  // Scheduler methods of the same meaning; see SchedulerOpenJobs).
  class OpenJobs {
   public:
    virtual ~OpenJobs() = default;
    virtual const JobRun* job(JobId id) const = 0;
    virtual Status Append(JobId id, std::vector<SubmodelSpec> submodels,
                          std::vector<TaskSpec> tasks, TimeUs now) = 0;
    virtual void CountRejected(JobId id, uint64_t tasks, const std::string& error) = 0;
    virtual void ReleaseOutput(JobId id, uint32_t run) = 0;
    virtual Status CancelRun(JobId id, uint32_t run, TimeUs now) = 0;
    virtual Status Close(JobId id, bool cancel_rest, std::string reason, TimeUs now) = 0;
    virtual Status Fail(JobId id, std::string reason, TimeUs now) = 0;
  };

  // The controller around the sessions.
  class Host {
   public:
    virtual ~Host() = default;
    // Sends `m` to the driver at ZeroMQ `identity`.
    virtual void SendTo(const std::string& identity, const Message& m) = 0;
    // Sends `m` to every live worker (CancelJob, FreeJob).
    virtual void SendToLiveWorkers(const Message& m) = 0;
    // Admits a session's open job (Controller::Submit).
    virtual Result<JobId> SubmitOpenJob(JobSubmission job, SubmitDone done) = 0;
    // Ok when `runs` more task runs fit under the controller's bound;
    // `what` names the refused group in the error.
    virtual Status RoomForRuns(uint64_t runs, const std::string& what) = 0;
    // A session was refused for its token (`name`: the one it gave).
    virtual void RefusedToken(const std::string& name) = 0;
    // A driver without a session sent a message.
    virtual void UnknownPeer() = 0;
    // Records a session's opening or end (AuditLog): `who` and `role` hold
    // the token it gave ("" for none), `call` and `outcome` what happened.
    virtual void Audit(const std::string& /*identity*/, std::string_view /*who*/,
                       std::string_view /*role*/, const std::string& /*call*/,
                       const std::string& /*outcome*/) {}
    // Runs `fn` once what was stored so far is in the store (a job's end;
    // Controller::WhenDurable), whether or not that write succeeded.
    virtual void AfterStored(std::function<void()> fn) { fn(); }
  };

  // `host`, `jobs` and `tokens` outlive this object. A SessionOpen must
  // carry a token of role submit or admin, when `tokens` has any.
  DriverSessions(Host* host, OpenJobs* jobs, const TokenBook* tokens);

  // The data token each SessionAck carries (Controller::data_token()).
  void set_data_token(const DataToken& token) { data_token_ = token; }
  bool empty() const { return sessions_.empty(); }

  // --- the drivers' messages ---
  // Opens a session for the driver at `identity`: refused (a SessionAck
  // with an error and a Status code) for a wrong token, a second session
  // on one connection, a bad name, or a job the controller does not admit;
  // else acknowledged once the job's record is stored.
  void Open(const std::string& identity, const SessionOpen& m, TimeUs now);
  // Appends each group, all or nothing, and queues its GroupAck. A refused
  // group's tasks count as not succeeded (the session ends failed), and
  // later tasks naming them or their actors hear why.
  void Submit(const std::string& identity, SessionSubmit& m, TimeUs now);
  // Releases outputs, cancels runs, and closes or aborts the session; an
  // empty one is a heartbeat, answered so that the driver notices a
  // controller that is gone.
  void Control(const std::string& identity, const SessionControl& m, TimeUs now);

  // --- what the loop reports ---
  // Run `run` of `job` is done; its outputs are at `endpoint`. Cheap for a
  // job that is no session (the dispatch path calls it per result).
  void OnRunDone(JobId job, uint32_t run, const std::string& endpoint, uint64_t bytes,
                 uint32_t buffers);
  // A run of a session's job failed or was cancelled (Scheduler::TakeEnded).
  void OnRunEnded(RunEnded ended);
  // Sends each driver what it must hear (acks, ended tasks) and fails the
  // sessions whose driver was silent for longer than its timeout up to
  // `read_at`, when the controller last read its socket (the workers cancel
  // their runs). Once per loop iteration.
  void Flush(TimeUs now, TimeUs read_at);
  // The controller did not run for `stall` (StallClock): every driver's
  // silence restarts from the resume.
  void CreditStall(TimeUs stall, TimeUs now);
  // `job` ended (`run` as it ended): tells its driver, has the workers free
  // its outputs (they live as long as the session), and forgets the
  // session. False when `job` is no session.
  bool End(JobId job, const JobRun& run);

  // What a session's job keeps in the store as its spec: enough to know it
  // for one after a restart (IsStoredSession), never enough to rebuild it.
  static std::string StoredSpec(const std::string& name);
  static bool IsStoredSession(std::string_view spec_json);

 private:
  struct Session {
    std::string identity;
    std::string who, role;  // the token's holder (TokenBook), for the audit log
    TimeUs last_seen = 0;
    TimeUs timeout_us = 0;  // silent this long: "driver session lost"
    SessionUpdate update;   // to send at the end of this iteration
    // Labels of tasks refused at submission, so that a later task naming
    // one as its input hears why (not "unknown task").
    std::unordered_set<std::string> refused;
    // Actors (sub-models) refused at submission, with why: a later task on
    // one hears that, not "unknown submodel".
    std::unordered_map<std::string, std::string> refused_actors;
  };
  // The session of the driver at `identity`, its last_seen set to `now`;
  // null (and the driver told why) when it has none. `claimed`: the job id
  // the message named.
  Session* Known(const std::string& identity, JobId claimed, TimeUs now);

  Host* const host_;
  OpenJobs* const jobs_;
  const TokenBook* const tokens_;
  DataToken data_token_;
  std::map<JobId, Session> sessions_;
  std::unordered_map<std::string, JobId> session_of_;  // by driver identity
};

// OpenJobs on a Scheduler: what the controller passes, and what tests use
// to drive DriverSessions against the real scheduler.
class SchedulerOpenJobs final : public DriverSessions::OpenJobs {
 public:
  explicit SchedulerOpenJobs(Scheduler* scheduler) : s_(scheduler) {}
  const JobRun* job(JobId id) const override { return s_->job(id); }
  Status Append(JobId id, std::vector<SubmodelSpec> submodels, std::vector<TaskSpec> tasks,
                TimeUs now) override {
    return s_->AppendTasks(id, std::move(submodels), std::move(tasks), now);
  }
  void CountRejected(JobId id, uint64_t tasks, const std::string& error) override {
    s_->CountRejected(id, tasks, error);
  }
  void ReleaseOutput(JobId id, uint32_t run) override { s_->ReleaseOutput(id, run); }
  Status CancelRun(JobId id, uint32_t run, TimeUs now) override {
    return s_->CancelRun(id, run, now);
  }
  Status Close(JobId id, bool cancel_rest, std::string reason, TimeUs now) override {
    return s_->CloseJob(id, cancel_rest, std::move(reason), now);
  }
  Status Fail(JobId id, std::string reason, TimeUs now) override {
    return s_->FailOpenJob(id, std::move(reason), now);
  }

 private:
  Scheduler* const s_;
};

}  // namespace hmpmd
