// DriverSessions: the sessions of drivers (hmpmd::client) that speak to the
// controller's ROUTER socket beside the workers. A session is an open job
// (JobGraph::BuildOpen) that its driver grows group by group
// (SessionSubmit), whose runs it releases or cancels (SessionControl), and
// that ends when the driver closes or aborts it, or falls silent.
//
// A session survives a restart of the controller (or a standby's takeover)
// when there is a job store: each group is stored as it is taken, and runs
// that failed or were cancelled as they end (done runs are, as for any
// job). The restarted controller rebuilds the job (Replay, Restore) and
// waits for the driver to take it up again on a new connection (a
// SessionOpen naming it, Resume): the driver then hears every group it
// has no ack for and every run that ended, and sends again the groups the
// store did not keep (SessionUpdate.stored_seq says which it did).
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
#include <optional>
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
#include "hmpmd/store/job_store.h"

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
    // Whether records given to Store() are kept (the controller has a job
    // store).
    virtual bool Storing() const { return false; }
    virtual void Store(StoreRecord /*record*/) {}
    // Runs `fn(ok)` once what was stored so far is written; ok: it was.
    virtual void WhenStored(std::function<void(bool)> fn) { fn(true); }
    // The data endpoint of the worker holding run `run`'s outputs; empty
    // when none is known.
    virtual std::string EndpointOf(JobId /*job*/, uint32_t /*run*/) const { return {}; }
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
  // else acknowledged once the job's record is stored. With m.resume, takes
  // up that session on this connection instead (Resume).
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
  // Where the workers tell `job`'s driver of its runs done directly
  // (TaskAssign::notify): the last SessionSubmit::notify it gave; empty
  // for a job that is no session, or before it gave one.
  const std::string& NotifyOf(JobId job) const;

  // What a session's job keeps in the store as its spec: enough to know it
  // for one after a restart (IsStoredSession) and to take it up again; its
  // tasks are in its stored groups.
  static std::string StoredSpec(const std::string& name, uint32_t weight, uint32_t heartbeat_ms);
  static bool IsStoredSession(std::string_view spec_json);

  // --- after a restart ---
  // What a session's stored groups rebuild besides its graph.
  struct Replayed {
    std::vector<GroupAck> acks;  // every group's, in order
    uint64_t rejected = 0;       // tasks of the refused groups
    std::string first_rejection;
    std::unordered_set<std::string> refused;
    std::unordered_map<std::string, std::string> refused_actors;
  };
  // Appends the tasks of `groups`' appended groups to the open `graph`, in
  // the order they were taken, as Submit did. Corruption when one cannot
  // be read or appended again.
  static Result<Replayed> Replay(const std::vector<SessionGroupRecord>& groups, JobGraph* graph);
  // Keeps restored open job `job` as a session that waits for its driver
  // to resume it; failed as lost when none does within ResumeWindowUs.
  // `replayed`: Replay's result; `heartbeat_ms`: the driver's, as stored.
  void Restore(JobId job, Replayed replayed, uint32_t heartbeat_ms, TimeUs now);
  // Every session waiting for its driver counts its wait from `now` (the
  // restarted controller dispatches again; until then none is failed).
  void RestartWaits(TimeUs now);
  // How long a session waits for its driver after a restart.
  static TimeUs ResumeWindowUs(TimeUs timeout_us);

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
    // Every group's ack, in order: a resumed driver hears those it missed.
    std::vector<GroupAck> acks;
    // Runs that failed or were cancelled, with why, for a resumed driver.
    std::unordered_map<uint32_t, std::string> ends;
    uint64_t stored_seq = 0;   // every group up to it is in the store
    uint64_t told_stored = 0;  // the stored_seq last sent to the driver
    uint32_t groups = 0;       // groups taken: the next one's store index
    std::string notify;        // SessionSubmit::notify, checked
    // Restored after a restart and not yet resumed: identity is empty and
    // the driver has this long from last_seen.
    TimeUs resume_window_us = 0;
  };
  // The session of the driver at `identity`, its last_seen set to `now`;
  // null (and the driver told why) when it has none. `claimed`: the job id
  // the message named.
  Session* Known(const std::string& identity, JobId claimed, TimeUs now);
  // Open() with m.resume: binds the session to `identity` and tells the
  // driver what it missed, or refuses (no such session, the wrong job
  // token or tenant, or it ended: why).
  void Resume(const std::string& identity, const SessionOpen& m, const std::string& who,
              const std::string& role, const std::optional<TokenHolder>& holder, TimeUs now);
  // Sends `u` in parts of at most the decoder's batch each, and clears it.
  void Send(const std::string& identity, SessionUpdate& u);
  // A refusal, with the code the driver's Session::Open() returns.
  static SessionAck Refused(const Status& why);

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
