#include "hmpmd/controller/controller.h"

#include <spdlog/spdlog.h>
#include <zmq.h>

#include <algorithm>
#include <chrono>

#include "hmpmd/controller/curve_keys.h"
#include "hmpmd/controller/job_report.h"
#include "hmpmd/protocol/builtin_args.h"
#include "hmpmd/protocol/control_auth.h"
#include "hmpmd/protocol/one_line.h"
#include "hmpmd/protocol/stall_clock.h"

// GCC 12 reports a false -Wmaybe-uninitialized inside std::variant's move
// constructor when a vector of StoreRecord grows (GCC bug 105593 family).
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif

namespace hmpmd {
namespace {

// A longer message from a kernel is cut (saying how much was left out).
constexpr size_t kMaxTaskErrorBytes = 4096;

}  // namespace

TimeUs Controller::NowUs() {
  return std::chrono::duration_cast<std::chrono::microseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

namespace {

std::unique_ptr<Scheduler> MakeScheduler(const ControllerOptions& options) {
  auto policy = MakePolicy(options.policy);
  if (!policy.ok()) policy = MakePolicy("hmpmd");  // Start() reports the bad name
  return std::make_unique<Scheduler>(options.scheduler, std::move(policy).value());
}

}  // namespace

Controller::Controller(ControllerOptions options)
    : options_(std::move(options)),
      ctx_(1),
      transport_(&ctx_),
      tokens_(options_.token),
      scheduler_(MakeScheduler(options_)),
      open_jobs_(scheduler_.get()),
      sessions_(this, &open_jobs_, &tokens_) {}

Controller::~Controller() {
  // Its thread posts refusals to mailbox_, which goes first otherwise.
  zap_.reset();
}

Status Controller::Start() {
  auto policy = MakePolicy(options_.policy);
  if (!policy.ok()) return policy.status();
  wall_ = WallClock::Now();
  started_at_ = wall_.mono_us;
  if (options_.store) {
    ASSIGN_OR_RETURN(epoch_, options_.store->LoadEpoch());
    // Kept with the epoch: workers that re-register after a restart get
    // the token their peers still hold, so fetches between them go on.
    ASSIGN_OR_RETURN(std::optional<DataToken> kept, options_.store->LoadDataToken());
    if (kept) data_token_ = *kept;
    RETURN_IF_ERROR(RestoreFromStore(started_at_));
    writer_ = std::make_unique<StoreWriter>(options_.store.get(), options_.store_writer);
  }
  if (!options_.tokens_file.empty()) RETURN_IF_ERROR(tokens_.Watch(options_.tokens_file));
  if (!options_.audit_log.empty()) {
    ASSIGN_OR_RETURN(audit_, AuditLog::Open(options_.audit_log));
  }
  // Runs on the handler's thread: it reads the allowed keys, which never
  // change after Start(), and the token book, which is thread-safe. Any
  // token the book holds gets in: what its role may do is judged on the
  // first message, where the refusal can say why. A refusal is counted
  // and logged on the loop, with those of tokens inside messages.
  const bool curve = !options_.curve_secret_key.empty();
  zap_ = std::make_unique<ZapHandler>(&ctx_, [this, curve](const ZapRequest& r) {
    if (curve) {
      if (CurveKeyAllowed(r, options_.curve_allowed)) return true;
    } else if (const std::optional<std::string> password = ControlPassword(r)) {
      if (!tokens_.enabled() || tokens_.Find(*password)) return true;
    }
    mailbox_.Post([this, curve, address = r.address] {
      LogRefusedToken("a connection from", address,
                      curve ? "its CURVE key is not authorized" : "wrong or missing token");
    });
    return false;
  });
  RETURN_IF_ERROR(zap_->Start());
  if (!options_.curve_secret_key.empty()) {
    RETURN_IF_ERROR(transport_.EnableCurveServer(options_.curve_secret_key));
  }
  if (epoch_ == 0) epoch_ = RandomId();
  if (data_token_.empty()) data_token_ = NewDataToken();
  sessions_.set_data_token(data_token_);
  RETURN_IF_ERROR(transport_.Bind(options_.listen));
  if (Status watch = transport_.WatchDisconnects(); !watch.ok()) {
    spdlog::warn("{}; a worker that exits is noticed by its missed heartbeats only",
                 watch.message());
  }
  // Workers can register from now on: the grace starts here, not before
  // the store load (seconds for millions of stored runs).
  if (recovery_.open()) {
    recovery_.set_deadline(NowUs() + TimeUs{options_.recovery_grace_ms} * 1000);
  }
  spdlog::info("controller listening on {} (policy {})", transport_.endpoint(), options_.policy);
  return Status::Ok();
}

void Controller::Stop() {
  stop_ = true;
  mailbox_.Post([] {});  // wake the loop
}

void Controller::Run() {
  zmq::pollitem_t items[] = {
      {transport_.socket().handle(), 0, ZMQ_POLLIN, 0},
      {nullptr, mailbox_.fd(), ZMQ_POLLIN, 0},
      {transport_.monitor().handle(), 0, ZMQ_POLLIN, 0},
  };
  const int polled = transport_.monitor() ? 3 : 2;
  next_liveness_check_ = NowUs() + options_.heartbeat_ms * 1000;
  StallClock stalls;
  (void)stalls.Observe(NowUs(), 0);  // a stop in the first wait counts too
  while (!stop_) {
    TimeUs now = NowUs();
    long timeout_ms = std::max<long>(0, (next_liveness_check_ - now) / 1000 + 1);
    try {
      zmq::poll(items, polled, std::chrono::milliseconds(timeout_ms));
    } catch (const zmq::error_t& e) {
      if (e.num() == EINTR) continue;
      spdlog::error("poll failed: {}", e.what());
      break;
    }
    now = NowUs();
    if (const TimeUs stall = stalls.Observe(now, TimeUs{timeout_ms} * 1000); stall > 0) {
      CreditStall(stall, now);
    }
    // Drain the socket, bounded so posted work and timers are not starved.
    read_at_ = now;
    std::optional<Incoming> in;
    for (int i = 0; i < 4096 && transport_.Receive(&in); ++i) {
      if (in) Handle(*in, now);
    }
    if (items[1].revents & ZMQ_POLLIN) mailbox_.Drain();
    if (polled == 3 && (items[2].revents & ZMQ_POLLIN)) {
      disconnected_scratch_.clear();
      const size_t failed = transport_.TakeDisconnected(&disconnected_scratch_);
      for (size_t i = 0; i < failed; ++i) {
        LogRefusedToken("a connection", "",
                        options_.curve_secret_key.empty()
                            ? "no token: it did not speak PLAIN (ZMQ_PLAIN_USERNAME)"
                            : "it did not speak CURVE");
      }
      OnDisconnected(disconnected_scratch_, now);
    }
    now = NowUs();
    if (now >= next_liveness_check_) {
      CheckLiveness(now);
      ForgetExpiredJobs();
      // Ends whose write failed (a full disk) are watched again, at this
      // pace rather than as fast as the writer fails.
      ends_queued_.insert(ends_queued_.end(), ends_failed_.begin(), ends_failed_.end());
      ends_failed_.clear();
      next_liveness_check_ = std::min(now + options_.heartbeat_ms * 1000, next_suspect_check_);
    }
    ScheduleAndSend(now);
    if (!sessions_.empty()) FlushSessions(now);
    if (iteration_hook_) iteration_hook_(now);
    NotifyEndedJobs();
    if (writer_) {
      writer_->Append(&store_pending_);
      for (auto& fn : durable_waiters_) {
        writer_->AfterWritten([this, fn = std::move(fn)](const Status& st) mutable {
          Post([fn = std::move(fn), st] { fn(st); });
        });
      }
      durable_waiters_.clear();
      WatchEndsStored();
    }
  }
  if (writer_) {
    writer_->Append(&store_pending_);
    (void)writer_->Flush();
  }
}

JobClock Controller::ClockOf(JobId id) const {
  auto it = history_.find(id);
  return JobClock{wall_, it == history_.end() ? nullptr : it->second, state_holders_.LoadsOf(id)};
}

const std::string* Controller::StoredMetrics(JobId job) const {
  auto it = stored_metrics_.find(job);
  return it == stored_metrics_.end() ? nullptr : &it->second;
}

const OutputLocation* Controller::OutputOf(JobId job, uint32_t run) const {
  auto it = outputs_.find({job, run});
  return it == outputs_.end() ? nullptr : &it->second;
}

void Controller::Handle(Incoming& in, TimeUs now) {
  // Every message type is named here, so that a new one is a compile
  // warning until it is routed.
  switch (TypeOf(in.message)) {
    case MsgType::kRegister:
      OnRegister(in.identity, std::get<RegisterMsg>(in.message), now);
      return;
    case MsgType::kHeartbeat:
      if (WorkerInfo* w = KnownWorker(in.identity, now)) {
        OnHeartbeat(*w, std::get<Heartbeat>(in.message), now);
      }
      return;
    case MsgType::kDoneBatch:
      if (WorkerInfo* w = KnownWorker(in.identity, now)) {
        const DoneBatch& b = std::get<DoneBatch>(in.message);
        OnDone(*w, b, now);
        ReportStarted(*w, b.started);  // taken after its results
      }
      return;
    case MsgType::kSessionOpen:
      if (!HoldResume(in.identity, std::get<SessionOpen>(in.message))) {
        sessions_.Open(in.identity, std::get<SessionOpen>(in.message), now);
      }
      return;
    case MsgType::kSessionSubmit:
      sessions_.Submit(in.identity, std::get<SessionSubmit>(in.message), now);
      return;
    case MsgType::kSessionControl:
      sessions_.Control(in.identity, std::get<SessionControl>(in.message), now);
      return;
    case MsgType::kRegisterAck:
    case MsgType::kReject:
    case MsgType::kHeartbeatAck:
    case MsgType::kAssignBatch:
    case MsgType::kCancelJob:
    case MsgType::kShutdown:
    case MsgType::kFreeJob:
    case MsgType::kSessionAck:
    case MsgType::kSessionUpdate:
    case MsgType::kFreeRuns:
    case MsgType::kCancelRuns:
      // What the controller sends, never takes.
      if ([[maybe_unused]] WorkerInfo* w = KnownWorker(in.identity, now)) {
        SPDLOG_DEBUG("ignored {} from worker {}", MsgTypeName(TypeOf(in.message)), w->name);
      }
      return;
  }
}

void Controller::NoteState(const WorkerInfo& w, const TaskResult& r, TimeUs offset) {
  if (!r.state_held && r.state_load_end_us == 0) return;
  const JobRun* job = scheduler_->job(r.job);
  if (job == nullptr) return;
  const uint32_t submodel = job->graph->task(r.task % job->graph->size()).submodel;
  if (r.state_load_end_us != 0) {
    // Begun ahead, a load may have ended before its run started.
    state_holders_.Loaded(r.job, submodel, w.device, r.state_load_start_us + offset,
                          r.state_load_end_us + offset, r.task, r.state_load_bytes,
                          r.state_load_end_us - std::max(r.state_load_start_us, r.start_us));
  }
  // A failed kernel may have left its state half written: not a source.
  if (r.ok && r.state_held) state_holders_.Held(r.job, submodel, w.id);
}

bool Controller::HoldsRun(const WorkerInfo& w, JobId job_id, uint32_t run) const {
  const JobRun* job = scheduler_->job(job_id);
  if (job == nullptr || run >= job->runs.size()) return true;  // the scheduler says stale
  const CoreId core = job->runs[run].core;
  return core == kNoCore || scheduler_->pool().core(core).device == w.device;
}

void Controller::OnDone(WorkerInfo& w, const DoneBatch& b, TimeUs now) {
  for (const TaskResult& r : b.results) {
    // A deferred run of a later step: its result waits for its adoption
    // (before this iteration's dispatch if an earlier result in this
    // batch started its step).
    if (auto d = deferred_.find({r.job, r.task});
        d != deferred_.end() && d->second.worker == w.id) {
      d->second.result = r;
      continue;
    }
    // Attempts start at 0 again after a controller restart, so a worker
    // that comes back late may report the attempt number of a run that
    // has moved to another worker meanwhile (the stale one it was told to
    // cancel): only the worker the run is placed on speaks for it.
    if (!HoldsRun(w, r.job, r.task)) {
      ++counters_.stale_results;
      spdlog::debug("job {} run {} attempt {} from worker '{}': not placed there, dropped", r.job,
                    r.task, r.attempt, w.name);
      continue;
    }
    bool applied;
    TimeUs start = r.start_us + w.clock.offset_us(), end = r.end_us + w.clock.offset_us();
    // A kernel's message reaches logs, terminals and the store: one line,
    // of bounded length.
    const std::string error = r.ok ? std::string() : OneLine(r.error, kMaxTaskErrorBytes);
    if (r.ok) {
      applied = scheduler_->OnTaskDone(r.job, r.task, r.attempt, start, end, now);
      if (applied) {
        ++counters_.tasks_finished;
        outputs_[{r.job, r.task}] = OutputLocation{w.id, r.output_bytes, r.output_buffers};
        scheduler_->RecordOutput(r.job, r.task, w.device, r.output_bytes, r.output_buffers);
        sessions_.OnRunDone(r.job, r.task, w.data_endpoint, r.output_bytes, r.output_buffers);
        if (writer_) {
          TaskDoneRecord rec{r.job, r.task,   r.attempt,      start,
                             end,   w.device, r.output_bytes, r.output_buffers};
          rec.start_unix_us = wall_.ToUnixUs(start);
          rec.end_unix_us = wall_.ToUnixUs(end);
          if (const JobRun* job = scheduler_->job(r.job);
              job != nullptr && r.task < job->runs.size() && job->runs[r.task].core != kNoCore) {
            const auto& core = scheduler_->pool().core(job->runs[r.task].core);
            rec.place = {w.name, static_cast<int8_t>(core.kind), core.lane};
          }
          store_pending_.push_back(std::move(rec));
        }
      }
    } else if (!r.lost_inputs.empty()) {
      // An input is gone: rebuild it (lineage) and run this task again.
      applied = scheduler_->OnInputsLost(r.job, r.task, r.attempt, r.lost_inputs, error, now,
                                         r.inputs_gone);
      if (applied) {
        ++counters_.tasks_failed;
        ++counters_.lost_inputs;
        spdlog::info("job {} run {}: input run {} lost ({}); rebuilding it", r.job, r.task,
                     r.lost_inputs.front(), error);
      }
    } else {
      // Retryable: a collective that timed out or could not reach a peer;
      // its gang runs again while the gang's attempts last.
      applied = scheduler_->OnTaskFailed(r.job, r.task, r.attempt, error, r.retryable, now);
      if (applied) ++counters_.tasks_failed;
      if (applied && r.retryable) {
        spdlog::info("job {} run {} attempt {} failed ({}); its gang runs again if attempts last",
                     r.job, r.task, r.attempt, error);
      } else if (const JobRun* job = scheduler_->job(r.job);
                 applied && job != nullptr && job->runs[r.task].attempt > r.attempt) {
        spdlog::info("job {} run {} attempt {} failed ({}); retried as attempt {}", r.job, r.task,
                     r.attempt, error, job->runs[r.task].attempt);
      }
    }
    if (applied) {
      NoteState(w, r, w.clock.offset_us());
      ++w.tasks_done;
      task_logs_.Add(r.job, r.task, r.attempt, r.ok, error, r.log);
      if (observer_) observer_->OnTaskEnded(r.job, r.task, r.ok, start, end, now);
    } else {
      ++counters_.stale_results;
      spdlog::debug("job {} run {} attempt {} from worker '{}': stale ({}), dropped", r.job, r.task,
                    r.attempt, w.name, r.ok ? "ok" : error);
    }
  }
}

void Controller::WhenDurable(std::function<void(const Status&)> fn) {
  if (writer_) {
    durable_waiters_.push_back(std::move(fn));
  } else {
    fn(Status::Ok());
  }
}

Status Unstored(const std::string& what, const Status& write) {
  return Status::Unavailable(what + ": the job store cannot be written (" + write.message() +
                             "); try again once it can");
}

Result<JobId> Controller::Submit(JobSubmission job, SubmitDone done) {
  const bool stored = writer_ && !job.spec_json.empty();
  Result<JobId> id = Admit(std::move(job), stored);
  if (!id.ok() || !stored) {
    if (done) done(id);
    return id;
  }
  // The one durability path of a submit: the job starts once its record is
  // in the file, and whoever submitted it hears so only then. A crash
  // before the write then loses no job a client was told about, and gives
  // no id out twice.
  durable_waiters_.push_back([this, id = *id, done = std::move(done)](const Status& st) {
    if (st.ok()) {
      scheduler_->StartHeldJob(id, NowUs());
      if (done) done(id);
      return;
    }
    // Nothing of it ran. It ends cancelled, so that its records, written
    // once the disk has room, say what became of it.
    (void)scheduler_->CancelJob(id, UnstoredSubmit(st).message(), NowUs());
    if (done) done(UnstoredSubmit(st));
  });
  return id;
}

Result<JobId> Controller::Admit(JobSubmission job, bool stored) {
  if (!job.graph) {
    ASSIGN_OR_RETURN(JobSpec spec, ParseJobSpec(job.spec_json, options_.spec_limits));
    ASSIGN_OR_RETURN(job.graph, JobGraph::Build(std::move(spec)));
  }
  // Refused while writes fail (a full disk): its client would wait for an
  // answer the store cannot give, and a crash would lose the job.
  if (writer_) {
    if (Status w = writer_->last_write(); !w.ok()) return UnstoredSubmit(w);
  }
  const JobGraph& graph = *job.graph;
  // Specs were checked when parsed; this also covers graphs built in code.
  if (graph.total_runs() > options_.spec_limits.max_runs) {
    return Status::ResourceExhausted("job: tasks x repeat is over " +
                                     std::to_string(options_.spec_limits.max_runs) + " task runs");
  }
  // Workers run built-in kernels from their arguments alone (no cost hints).
  RETURN_IF_ERROR(CheckWorkerTaskArgs(graph.spec().tasks));
  RETURN_IF_ERROR(RoomForRuns(graph.total_runs(), "job"));
  auto add = [&]() -> Result<JobId> {
    try {
      // A stored job is held (nothing ready) until its record is written.
      return scheduler_->AddJob(std::move(job.graph), NowUs(), stored, job.tenant);
    } catch (const std::bad_alloc&) {
      // The runs' records did not fit (a memory limit below --max-runs'
      // worth): refuse the job, keep the controller and its other jobs.
      return Status::ResourceExhausted(
          "job: its task runs do not fit in the controller's memory; lower tasks x repeat or "
          "--max-runs");
    }
  };
  ASSIGN_OR_RETURN(JobId id, add());
  live_jobs_.insert(id);
  const JobRun* run = scheduler_->job(id);
  spdlog::info("job {} '{}' submitted: {} tasks x {} steps", id, run->graph->spec().name,
               run->graph->size(), run->graph->steps());
  if (writer_ && !stored) {
    spdlog::warn("job {}: submitted without its spec text; it is not kept in the store", id);
  }
  if (stored) {
    store_pending_.push_back(
        JobSubmittedRecord{id, run->graph->spec().name, std::move(job.spec_json), run->submitted,
                           wall_.ToUnixUs(run->submitted), run->tenant.name, run->tenant.share});
  }
  return id;
}

Status Controller::Cancel(JobId id, const std::string& reason) {
  // A cancel the store cannot keep would be undone by a restart.
  if (writer_) {
    if (Status w = writer_->last_write(); !w.ok()) {
      return Unstored("job " + std::to_string(id) + " not cancelled", w);
    }
  }
  RETURN_IF_ERROR(scheduler_->CancelJob(id, reason, NowUs()));
  SendToLiveWorkers(CancelJob{id});
  return Status::Ok();
}

void Controller::WatchJob(JobId id, JobCallback cb) {
  const JobRun* job = scheduler_->job(id);
  if (job && IsTerminal(job->state)) {
    cb(*job);
    return;
  }
  job_watchers_[id].push_back(std::move(cb));
}

void Controller::ShutdownWorkers(const std::string& reason) { SendToLiveWorkers(Shutdown{reason}); }

void Controller::ScheduleAndSend(TimeUs now) {
  // Gang members whose gang starts over stop first (before a new attempt
  // can reach the same worker): they wait for a peer that will not come.
  RunBatches<CancelRuns> aborts;
  for (const RunEnded& e : scheduler_->TakeAborted()) {
    if (const WorkerInfo* w = workers_.OfDevice(e.device)) aborts.Add(w->id, e.job, e.run);
  }
  SendToLive(aborts);
  if (!deferred_.empty()) AdoptDeferred(now);  // before their runs are dispatched
  if (RecoveryHoldsDispatch(now)) return;      // workers are still re-registering
  dispatch_scratch_.clear();
  scheduler_->Schedule(now, &dispatch_scratch_);
  {
    // Live workers do not load state ahead of need yet (only the simulator
    // does): the policies' prefetch intents are dropped so they do not
    // pile up over the controller's life.
    std::vector<StateIntent> intents;
    scheduler_->mutable_policy().TakeStateIntents(&intents);
  }
  if (dispatch_scratch_.empty()) return;
  const ResourcePool& pool = scheduler_->pool();
  round_gangs_.clear();
  round_devices_.clear();
  for (const Dispatch& d : dispatch_scratch_) round_devices_[{d.job, d.run}] = d.device;
  for (const Dispatch& d : dispatch_scratch_) {
    const JobRun* job = scheduler_->job(d.job);
    const JobGraph& g = *job->graph;
    const TaskSpec& t = g.spec_task(d.run % g.size());
    const auto& core = pool.core(d.core);
    TaskAssign a;
    a.job = d.job;
    a.task = d.run;
    a.attempt = d.attempt;
    a.kernel = t.kernel;
    a.core = core.kind;
    a.lane = core.lane;
    a.args = t.args;
    a.submodel = t.submodel;
    a.task_id = t.id;
    FillDataPlane(d, a);
    outbox_[workers_.IdOfDevice(d.device)].tasks.push_back(std::move(a));
  }
  counters_.tasks_dispatched += dispatch_scratch_.size();
  if (observer_) observer_->OnDispatched(dispatch_scratch_.data(), dispatch_scratch_.size(), now);
  for (WorkerId id = 0; id < outbox_.size(); ++id) {
    AssignBatch& batch = outbox_[id];
    if (batch.tasks.empty()) continue;
    body_scratch_.clear();
    EncodeBody(Message(std::move(batch)), &body_scratch_);
    batch = AssignBatch{};
    if (!transport_.SendEncoded(workers_[id].identity, EncodeHeader(MsgType::kAssignBatch),
                                body_scratch_)) {
      // Its connection is gone, though its close may not be read yet: the
      // worker has the disconnect grace to come back, as when the close is
      // read first. Back as the same process, runs sent here that it does
      // not hold go back to the queue (Rejoin); if not, it is declared dead
      // and they run elsewhere. Declaring it dead now would re-run what it
      // holds, though it was coming back (a worker whose register went
      // unanswered sends the next on a fresh connection).
      OnDisconnected({workers_[id].identity}, now);
      continue;
    }
    ++counters_.batches_sent;
  }
}

void Controller::FlushSessions(TimeUs now) {
  // Runs that failed or were cancelled, and what workers must stop or free.
  RunBatches<CancelRuns> cancels;
  for (RunEnded& e : scheduler_->TakeEnded()) {
    if (const WorkerInfo* w = workers_.OfDevice(e.device)) cancels.Add(w->id, e.job, e.run);
    sessions_.OnRunEnded(std::move(e));
  }
  SendToLive(cancels);
  RunBatches<FreeRuns> frees;
  for (const OutputFreed& f : scheduler_->TakeFreed()) {
    const WorkerInfo* w = workers_.OfDevice(f.device);
    if (w == nullptr) continue;
    frees.Add(w->id, f.job, f.run);
    outputs_.erase({f.job, f.run});
  }
  SendToLive(frees);
  sessions_.Flush(now, read_at_);
}

}  // namespace hmpmd
