// Controller: the service core. One event loop owns every piece of state:
// the workers (WorkerRegistry), the drivers' sessions (DriverSessions), the
// jobs and the scheduler. Workers and drivers speak to it over the ROUTER
// socket; every other thread (the HTTP server, an embedding program)
// reaches it only through Post(), which runs a closure on the loop.
//
// The loop: wait on the socket and the mailbox (and the next timer); drain
// every waiting message; run posted closures; run the scheduler once; send
// one AssignBatch per worker that got tasks. Batching falls out of this:
// under load many results arrive per wake-up and many tasks leave per send.
// Thread-safety: Post(), Stop() and the accessors marked so are thread-safe;
// every other method must run on the loop thread (from a posted closure).
#pragma once

#include <atomic>
#include <functional>
#include <limits>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <tuple>
#include <unordered_map>
#include <unordered_set>
#include <vector>
#include <zmq.hpp>

#include "hmpmd/controller/audit_log.h"
#include "hmpmd/controller/driver_sessions.h"
#include "hmpmd/controller/job_history.h"
#include "hmpmd/controller/job_spec_parser.h"
#include "hmpmd/controller/job_submission.h"
#include "hmpmd/controller/mailbox.h"
#include "hmpmd/controller/recovery.h"
#include "hmpmd/controller/run_batches.h"
#include "hmpmd/controller/state_holders.h"
#include "hmpmd/controller/task_logs.h"
#include "hmpmd/controller/token_book.h"
#include "hmpmd/controller/transport.h"
#include "hmpmd/controller/worker_registry.h"
#include "hmpmd/protocol/data_token.h"
#include "hmpmd/protocol/zap_handler.h"
#include "hmpmd/scheduler/scheduler.h"
#include "hmpmd/store/job_store.h"
#include "hmpmd/store/store_writer.h"

namespace hmpmd {

// Why a change was refused, or withdrawn, while the job store cannot be
// written (`write`: the store's error), as "WHAT: the job store cannot be
// written (...); try again once it can". Unavailable: try again later.
Status Unstored(const std::string& what, const Status& write);
// Unstored() of a submit.
inline Status UnstoredSubmit(const Status& write) { return Unstored("job not submitted", write); }

struct ControllerOptions {
  // ROUTER endpoint workers connect to. Port 0 picks a free one.
  // Default: tcp://*:5555.
  std::string listen = "tcp://*:5555";
  // Shared secret workers must present to register; empty: none. Held by
  // "admin", role admin (TokenBook).
  std::string token;
  // A --tokens file of more tokens, each with a holder and a role, read
  // again when it changes (TokenBook::Watch); empty: none.
  std::string tokens_file;
  // A file every mutating call is appended to, one JSON line each
  // (AuditLog); empty: none.
  std::string audit_log;
  // Heartbeat period asked of workers, in ms. Default: 500.
  uint32_t heartbeat_ms = 500;
  // A worker silent for this long is declared dead and its running tasks go
  // back to the queue. Lower finds deaths sooner; too low kills workers
  // that are merely slow. Default: 5000 ms.
  uint32_t worker_timeout_ms = 5000;
  // Scheduling policy (PolicyNames()). Default: hmpmd.
  std::string policy = "hmpmd";
  // Live defaults: up to 64 tasks queued per core while the estimated work
  // waiting behind the running task stays under 200 us, which hides the
  // dispatch round trip: for tiny tasks, and for a long task's successor,
  // which starts as soon as the long one ends. Early dispatch on: a task
  // whose producers all run on one core queues behind them there, so a
  // dependency on that core costs no round trip either. Outputs a task
  // will store count against its worker's --memory-mb from placement on.
  SchedulerOptions scheduler = [] {
    SchedulerOptions o;
    o.pool.max_queue_per_core = 64;
    o.pool.lookahead_us = 200;
    o.pool.lookahead_waiting_only = true;
    o.pool.count_store = true;
    o.early_dispatch = true;
    return o;
  }();
  SpecLimits spec_limits;
  // Task runs held over all jobs, running and ended (each about 80 bytes of
  // memory). A job or session group that would go over it forgets the
  // oldest ended jobs first; if that is not enough it is refused
  // (Unavailable, or ResourceExhausted if it alone is larger). Default:
  // kDefaultMaxHeldRuns.
  uint64_t max_held_runs = kDefaultMaxHeldRuns;
  // Finished jobs kept for queries; the oldest are forgotten beyond this.
  // Default: 1000.
  size_t keep_finished_jobs = 1000;
  // A job that ended less than this long ago (in this process) is not yet
  // forgotten by keep_finished_jobs, so a waiter polling it (`submit
  // --wait`) reads its end however many jobs end meanwhile; the count
  // applies once it passes. Longer keeps more jobs after a burst of short
  // ones (max_held_runs still bounds them); 0: forgotten as soon as the
  // count says. Default: 60000 ms.
  int64_t keep_ended_grace_ms = 60000;
  // Finished jobs are also forgotten this many hours after they ended (wall
  // clock, kept in the store across restarts); checked every heartbeat
  // period. 0: no age limit. Default: 0.
  double keep_finished_hours = 0;
  // Durable job store (e.g. SqliteJobStore); null keeps jobs in memory only.
  // Start() reloads it: unfinished jobs resume, finished ones (within
  // keep_finished_jobs) stay queryable. Default: null.
  std::shared_ptr<JobStore> store;
  StoreWriterOptions store_writer;
  // After reloading unfinished jobs, nothing is dispatched until the workers
  // that were alive when the last controller died (the store knows them)
  // have re-registered and reported the tasks and outputs they hold, or for
  // at most this long (RecoveryWindow). Default: 2000 ms (workers
  // re-register within a heartbeat period of the restart).
  uint32_t recovery_grace_ms = 2000;
  // CurveZMQ (see curve_keys.h): with a secret key, the ROUTER socket is a
  // CURVE server and only workers whose public key is in `curve_allowed`
  // connect at all. Default: empty, plain TCP.
  std::string curve_secret_key;
  std::set<std::string> curve_allowed;
};

// Receives the loop's task events, for the live event feed and metrics.
// Every call runs on the loop thread and must be cheap (it is on the
// dispatch path): record and return, format later.
class ControllerObserver {
 public:
  virtual ~ControllerObserver() = default;
  // `n` runs were just sent to workers at `now`.
  virtual void OnDispatched(const Dispatch* d, size_t n, TimeUs now) = 0;
  // A run ended (ok or failed); `start`/`end` on the controller's clock.
  virtual void OnTaskEnded(JobId job, uint32_t run, bool ok, TimeUs start, TimeUs end,
                           TimeUs now) = 0;
};

// Where a done task run's outputs live (the data plane): in the object
// store of `worker`, fetched from its data endpoint.
struct OutputLocation {
  WorkerId worker = 0;
  uint64_t bytes = 0;
  uint32_t buffers = 0;  // empty ones count; 0 (with 0 bytes): nothing kept
  bool kept() const { return bytes > 0 || buffers > 0; }
};

// Counters exported by /metrics and the run summary.
struct ControllerCounters {
  uint64_t tasks_dispatched = 0;
  uint64_t tasks_finished = 0;
  uint64_t tasks_failed = 0;
  uint64_t batches_sent = 0;
  uint64_t stale_results = 0;    // results of old attempts or ended jobs
  uint64_t unknown_peers = 0;    // messages from workers we do not know
  uint64_t restored_jobs = 0;    // reloaded from the store at start
  uint64_t adopted_runs = 0;     // runs re-registered workers still held
  uint64_t adopted_outputs = 0;  // stored outputs re-registered workers reported
  uint64_t rebuilt_runs = 0;     // done runs run again for outputs held nowhere
  uint64_t lost_inputs = 0;      // task runs that could not read an input
  uint64_t early_runs = 0;       // runs dispatched behind a producer not yet done
  uint64_t worker_restarts = 0;  // new processes under a known worker name
  uint64_t refused_tokens = 0;   // registrations and sessions with a wrong token
};

class Controller : private DriverSessions::Host {
 public:
  using JobCallback = std::function<void(const JobRun&)>;

  explicit Controller(ControllerOptions options);
  ~Controller() override;
  Controller(const Controller&) = delete;
  Controller& operator=(const Controller&) = delete;

  // Reloads the store (if any) and binds the ROUTER socket. Call before Run().
  Status Start();
  // Runs the loop on the calling thread until Stop().
  void Run();
  // Thread-safe. Ends Run() after the current iteration.
  void Stop();
  // Thread-safe. Runs `fn` on the loop thread.
  void Post(std::function<void()> fn) { mailbox_.Post(std::move(fn)); }
  // The bound endpoint, e.g. tcp://0.0.0.0:5555. Valid after Start().
  const std::string& endpoint() const { return transport_.endpoint(); }

  // --- loop thread only ---
  // Admits a job: returns its id, or why it was refused (nothing changed
  // then). A stored job (spec text, and a store) runs once its record is
  // written; if that write fails it ends cancelled without running
  // (UnstoredSubmit). `done`, if set, hears the outcome once it is final,
  // on the loop: a refusal, or the id of a job not stored, at once (before
  // Submit returns); a stored job's id once its record is written, or
  // UnstoredSubmit(the store's error) when that write failed.
  Result<JobId> Submit(JobSubmission job, SubmitDone done = nullptr);
  // Cancels job `id`; `reason` becomes its error (e.g. why a local run
  // gave up on it).
  Status Cancel(JobId id, const std::string& reason = "cancelled by the user");
  // Forgets ended job `id` now, as --keep-jobs would in time: the workers
  // free its outputs and state, and its records leave the store. Returns
  // the bytes of its outputs the workers held. Refused for a job that has
  // not ended (cancel it first) and while the store cannot be written.
  Result<uint64_t> Forget(JobId id);
  // Task runs of every job the controller holds (see max_held_runs).
  uint64_t HeldRuns() const;
  // A worker process this host started (LocalCluster) has exited: the live
  // worker that registered with `pid` is declared dead now, not after its
  // missed heartbeats, so its tasks are re-queued at once.
  void WorkerProcessExited(uint32_t pid, const std::string& why);
  // Calls `cb` once when the job ends (at once if it has).
  void WatchJob(JobId id, JobCallback cb);
  // Calls `fn` on the loop once every record of this iteration so far is in
  // the store (OK; at once without a store): e.g. a job just submitted
  // survives a crash from then on. Called with the store's error instead
  // when the write of those records fails (a full disk); they are retried.
  void WhenDurable(std::function<void(const Status&)> fn);
  // Whether job `id`'s end is in the store (true without a store, and for
  // a job that has not ended). Until it is, GET /api/v1/jobs/{id} waits:
  // a client told a job ended must not see it run again after a crash.
  bool EndDurable(JobId id) const {
    return !writer_ || (!live_jobs_.contains(id) && !ends_unstored_.contains(id));
  }
  // Calls `cb` once when at least `n` workers are alive.
  void WhenWorkers(size_t n, std::function<void()> cb) { workers_.WhenAlive(n, std::move(cb)); }
  // Sets (or clears, with nullptr) the one observer; it outlives its use.
  void SetObserver(ControllerObserver* o) { observer_ = o; }
  // Sets (or clears) the function the loop calls once per iteration, after
  // the scheduler ran and before ended jobs are reported (e.g. to publish
  // snapshots for other threads). It must be cheap.
  void SetIterationHook(std::function<void(TimeUs now)> hook) { iteration_hook_ = std::move(hook); }
  // Sends Shutdown to every live worker.
  void ShutdownWorkers(const std::string& reason);

  const Scheduler& scheduler() const { return *scheduler_; }
  // Every worker since the start, live and dead, and how to find one.
  const WorkerRegistry& workers() const { return workers_; }
  // Where the outputs of (job, run) live; nullptr when not known (not done
  // yet, or the job is forgotten).
  const OutputLocation* OutputOf(JobId job, uint32_t run) const;
  // The figures an ended job reloaded from the store kept with its end
  // (JobSummaryJson's `stored`); nullptr when none.
  const std::string* StoredMetrics(JobId job) const;
  // The wait for workers after a restart (open() while it lasts).
  const RecoveryWindow& recovery() const { return recovery_; }
  const ControllerCounters& counters() const { return counters_; }
  // What each task run's attempts logged and the errors they ended with.
  const TaskLogs& task_logs() const { return task_logs_; }
  uint64_t dropped_frames() const { return transport_.dropped(); }
  TimeUs started_at() const { return started_at_; }
  // The store's writer thread; null without a store. Valid after Start().
  const StoreWriter* store_writer() const { return writer_.get(); }
  // The job store's identity (RegisterAck::epoch): the same across restarts
  // on one --db, another for a fresh store or none. 0 before Start().
  // Thread-safe: REST answers carry it (Hmpmd-Store) so that a client can
  // tell a restart that kept its jobs from one that did not.
  uint64_t epoch() const { return epoch_.load(std::memory_order_acquire); }
  const ControllerOptions& options() const { return options_; }
  // The tokens every door checks. Thread-safe.
  const TokenBook& tokens() const { return tokens_; }
  // Where mutating calls are recorded; null without --audit-log. Set in
  // Start(); thread-safe after.
  AuditLog* audit() const { return audit_.get(); }
  // What workers' data sockets accept (RegisterAck, SessionAck; REST
  // outputs for authorised callers): the store's, else drawn in Start().
  // Set in Start() and fixed after, so any thread may read it then.
  const DataToken& data_token() const { return data_token_; }
  // Monotonic microseconds; the time base of every record.
  static TimeUs NowUs();
  // The pair of clock readings taken in Start() that puts NowUs() times
  // on the wall clock. Fixed after Start(), so any thread may read it then.
  const WallClock& wall_clock() const { return wall_; }
  // The clocks of job `id`'s reports: wall_clock(), and what the store
  // kept of it when it was reloaded after a restart (its runs' places).
  JobClock ClockOf(JobId id) const;

 private:
  // --- the loop (controller.cc) ---
  // Submit() but for what it does once the job's record is written.
  Result<JobId> Admit(JobSubmission job, bool stored);
  // Routes one message from the ROUTER socket by its type.
  void Handle(Incoming& in, TimeUs now);
  void OnDone(WorkerInfo& w, const DoneBatch& b, TimeUs now);
  // Whether run `run` of `job` is placed on w's device (or on none).
  bool HoldsRun(const WorkerInfo& w, JobId job, uint32_t run) const;
  // What a result says of its sub-model's state: w holds it, w loaded it
  // (`offset` turns w's clock into the controller's).
  void NoteState(const WorkerInfo& w, const TaskResult& r, TimeUs offset);
  // A re-registering worker's kept states (controller_recovery.cc).
  void AdoptStates(const WorkerInfo& w, const std::vector<HeldState>& states);
  void ScheduleAndSend(TimeUs now);
  void FillDataPlane(const Dispatch& d, TaskAssign& a);
  void FillState(const Dispatch& d, const JobRun& job, uint32_t submodel, TaskAssign& a);
  void NotifyEndedJobs();
  // Hands ends_queued_ to the writer's next AfterWritten.
  void WatchEndsStored();
  // Sends what workers must do for driver sessions (cancel or free runs),
  // then what the drivers must hear (DriverSessions::Flush).
  void FlushSessions(TimeUs now);

  // --- workers (controller_workers.cc) ---
  // The live worker at `identity`, its last_seen set to `now`; null (and
  // the peer told to register again) when there is none.
  WorkerInfo* KnownWorker(const std::string& identity, TimeUs now);
  void OnRegister(const std::string& identity, const RegisterMsg& m, TimeUs now);
  // Restart detection (WorkerRegistry::CheckInstance): false when `m`
  // comes from an instance a newer process of its name replaced (refused
  // here); when it is a new process under a known name, the old one is
  // declared lost.
  bool CheckInstance(const std::string& identity, const RegisterMsg& m, TimeUs now);
  // `m` comes from live worker `w`'s process on another connection (its
  // register went unanswered, or its link timed out): `w` moves to
  // `identity` and keeps its device, its runs and its outputs; runs it was
  // sent on the closed connection and does not hold run again.
  void Rejoin(WorkerInfo& w, const std::string& identity, const RegisterMsg& m, TimeUs now);
  void OnHeartbeat(WorkerInfo& w, const Heartbeat& m, TimeUs now);
  // Counts a connection, registration or session refused for its
  // credentials and logs it at the 1st, 2nd, 4th, ... refusal: anyone who
  // reaches the port can send them as fast as they like, with names of any
  // length. `name` may be empty.
  void LogRefusedToken(const char* what, const std::string& name,
                       const char* why = "wrong or missing token");
  // Silence is counted up to read_at_, not `now`: a loop held up after it
  // read its socket (stopped, starved, busy in posted work) has not read
  // the heartbeats sent meanwhile, and must not blame their senders.
  void CheckLiveness(TimeUs now);
  // Workers whose connection closed (Transport::TakeDisconnected): each is
  // suspected, and declared dead unless it has a connection again (it
  // re-registered, or the descriptor was another peer's) DisconnectGraceUs()
  // later.
  void OnDisconnected(const std::vector<std::string>& identities, TimeUs now);
  TimeUs DisconnectGraceUs() const;
  // The loop did not run for `stall` (StallClock): workers' and drivers'
  // silence restarts from the resume, so a stopped controller does not
  // blame them for its own.
  void CreditStall(TimeUs stall, TimeUs now);
  // `w` is gone; `died`: its process died (the runs it was running are
  // charged with it, Scheduler::RemoveDevice), not merely reconnected.
  void MarkDead(WorkerInfo& w, std::string why, TimeUs now, bool died = true);
  // What w's lanes have started and not finished, as its last message
  // (Heartbeat, DoneBatch, RegisterMsg) says: Scheduler::ReportStarted.
  void ReportStarted(const WorkerInfo& w, const std::vector<HeldTask>& started);
  // One message per (worker, job) of `batches`, to the workers still alive.
  template <typename Msg>
  void SendToLive(const RunBatches<Msg>& batches) {
    batches.ForEach([this](WorkerId w, const Msg& m) {
      if (workers_[w].alive) transport_.Send(workers_[w].identity, m);
    });
  }

  // --- DriverSessions::Host (controller_workers.cc) ---
  void SendTo(const std::string& identity, const Message& m) override;
  void SendToLiveWorkers(const Message& m) override;
  Result<JobId> SubmitOpenJob(JobSubmission job, SubmitDone done) override;
  void Audit(const std::string& identity, std::string_view who, std::string_view role,
             const std::string& call, const std::string& outcome) override;
  void RefusedToken(const std::string& name) override;
  void UnknownPeer() override;
  void AfterStored(std::function<void()> fn) override;
  bool Storing() const override { return writer_ != nullptr; }
  void Store(StoreRecord record) override { store_pending_.push_back(std::move(record)); }
  void WhenStored(std::function<void(bool)> fn) override;
  std::string EndpointOf(JobId job, uint32_t run) const override;

  // --- restarts (controller_recovery.cc) ---
  // Reloads the store's jobs in Start().
  Status RestoreFromStore(TimeUs now);
  // Restores a driver session's job read back from the store: ended, or
  // rebuilt from its groups to wait for its driver (DriverSessions::
  // Restore); false when `j` is no session.
  bool RestoreSession(const StoredJob& j, TimeUs now);
  // Ends session `j` restored as failed with `error` (it cannot go on).
  void FailRestoredSession(const StoredJob& j, const std::string& error, TimeUs now);
  // Records what a (re-)registering worker holds: tasks it runs, outputs
  // it stores.
  void AdoptReported(const WorkerInfo& w, const RegisterMsg& m, TimeUs now);
  // Keeps a driver's resume (`open`, moved from) until the recovery window
  // ends (RecoveryHoldsDispatch answers it); false for any other open.
  bool HoldResume(const std::string& identity, SessionOpen& open);
  // True while the recovery window holds dispatch back; when it ends,
  // rebuilds outputs no worker reported (lineage).
  bool RecoveryHoldsDispatch(TimeUs now);
  // Whether attempt h.attempt of h.task runs on `device` already.
  bool RunsOn(const HeldTask& h, DeviceId device) const;
  // Whether some attempt of `run` of `job` runs on `device`: a CancelRuns
  // there (it names runs, not attempts) would stop it.
  bool PlacedOn(JobId job, uint32_t run, DeviceId device) const;
  // Whether `run` of `job` belongs to a step after the one it runs now.
  bool RunIsAhead(JobId job, uint32_t run) const;
  // Adopts the deferred runs whose step has started (before dispatch).
  void AdoptDeferred(TimeUs now);
  // Keeps what `j`'s records hold that the scheduler does not (history_).
  void KeepHistory(const StoredJob& j);
  // The wall clock now, in Unix milliseconds, as wall_ maps the monotonic
  // clock: a step of the system clock after the start is not followed
  // (retention's ages are durations; a step forward must not expire jobs).
  int64_t WallMsNow() const;

  // --- retention (controller_retention.cc) ---
  // Forgets the oldest finished jobs beyond keep_finished_jobs, except
  // those that ended within keep_ended_grace_ms.
  void ForgetOldJobs();
  // Forgets the first `n` finished jobs of finished_order_.
  void ForgetOldest(size_t n);
  // Forgets finished jobs older than keep_finished_hours.
  void ForgetExpiredJobs();
  // Makes room for `runs` more task runs under max_held_runs by forgetting
  // the oldest ended jobs; refuses when that cannot. `what` names the
  // refused thing in the error. (Also DriverSessions::Host's.)
  Status RoomForRuns(uint64_t runs, const std::string& what) override;
  // Frees ended job `id` everywhere but finished_order_; returns the bytes
  // of its outputs the workers held.
  uint64_t DropEndedJob(JobId id);

  ControllerOptions options_;
  zmq::context_t ctx_;
  Transport transport_;
  TokenBook tokens_;  // before zap_ and sessions_, which use it
  std::unique_ptr<AuditLog> audit_;
  std::unique_ptr<ZapHandler> zap_;  // checks every peer; reset first (~Controller)
  Mailbox mailbox_;
  std::unique_ptr<Scheduler> scheduler_;
  std::atomic<bool> stop_{false};

  WorkerRegistry workers_;
  SchedulerOpenJobs open_jobs_;  // the scheduler as sessions_ sees it
  DriverSessions sessions_;
  std::map<JobId, std::vector<JobCallback>> job_watchers_;
  std::set<JobId> live_jobs_;
  // Ended jobs whose end record is not written yet; those queued this
  // iteration (watched with the writer's next AfterWritten), and those
  // whose write failed (watched again at the next liveness check).
  std::unordered_set<JobId> ends_unstored_;
  std::vector<JobId> ends_queued_, ends_failed_;
  std::vector<JobId> finished_order_;
  std::unordered_map<JobId, int64_t> finished_unix_ms_;  // when each ended
  // Ended jobs reloaded from the store: their figures (StoredMetrics).
  std::unordered_map<JobId, std::string> stored_metrics_;
  // Jobs reloaded from the store: their wall-clock times and the places of
  // the runs done before (ClockOf).
  std::unordered_map<JobId, std::shared_ptr<const JobHistory>> history_;
  WallClock wall_;
  // When each job that ended in this process did (NowUs), for
  // keep_ended_grace_ms; jobs reloaded from the store have none.
  std::unordered_map<JobId, TimeUs> ended_at_us_;

  std::map<std::pair<JobId, uint32_t>, OutputLocation> outputs_;
  StateHolders state_holders_;
  TaskLogs task_logs_;
  // The entries of outputs_ of `job` (job + 1 would wrap at the last id).
  auto JobOutputs(JobId job) {
    return std::pair{outputs_.lower_bound({job, 0}), outputs_.upper_bound({job, UINT32_MAX})};
  }
  // A run of a later step that a re-registering worker still holds: the
  // store lost the end of the step before it (its last writes died with
  // the controller). Adopted when its step starts, with its result if it
  // came meanwhile, rather than stopped and run again.
  struct DeferredRun {
    WorkerId worker = 0;
    HeldTask held;
    std::optional<TaskResult> result;
  };
  std::map<std::pair<JobId, uint32_t>, DeferredRun> deferred_;
  // Drivers' resumes that came during the recovery window (identity, open):
  // answered when it ends, once workers have said which outputs they hold.
  std::vector<std::pair<std::string, SessionOpen>> held_resumes_;
  // Gangs of the current dispatch round: (job, first run of step, group)
  // -> tag; and the devices the round's runs went to.
  std::map<std::tuple<JobId, uint32_t, uint32_t>, uint64_t> round_gangs_;
  std::map<std::pair<JobId, uint32_t>, DeviceId> round_devices_;
  uint64_t next_gang_ = 0;
  // RegisterAck::epoch: the store's, else drawn in Start(); never 0 after.
  // Atomic: REST threads read it (epoch()).
  std::atomic<uint64_t> epoch_{0};
  // See data_token(); never empty after Start().
  DataToken data_token_;
  // WhenDurable() callbacks of this iteration.
  std::vector<std::function<void(const Status&)>> durable_waiters_;
  std::vector<Dispatch> dispatch_scratch_;
  std::vector<StartedRun> started_scratch_;        // ReportStarted
  std::vector<std::string> disconnected_scratch_;  // OnDisconnected
  std::vector<AssignBatch> outbox_;                // by WorkerId
  std::string body_scratch_;
  ControllerCounters counters_;
  ControllerObserver* observer_ = nullptr;
  std::function<void(TimeUs)> iteration_hook_;
  TimeUs started_at_ = 0;
  TimeUs read_at_ = 0;  // when the loop last began to drain its socket
  TimeUs next_liveness_check_ = 0;
  // The earliest end of a disconnected worker's grace (CheckLiveness).
  TimeUs next_suspect_check_ = std::numeric_limits<TimeUs>::max();
  std::unique_ptr<StoreWriter> writer_;     // null without a store
  std::vector<StoreRecord> store_pending_;  // this iteration's records
  RecoveryWindow recovery_;                 // after a restart
};

}  // namespace hmpmd
