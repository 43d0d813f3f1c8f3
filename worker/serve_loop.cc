#include "serve_loop.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstring>
#include <set>
#include <system_error>
#include <utility>
#include <variant>

#include "clock.h"
#include "hmpmd/protocol/token_file.h"

namespace hmpmd::worker {
namespace {

// Messages read per wake-up before results are flushed, so a flood of
// assignments cannot starve the results.
constexpr int kMaxMessagesPerWake = 256;
// Heartbeat period when the controller's RegisterAck names none.
constexpr int64_t kDefaultHeartbeatUs = 1'000'000;
// Registration unanswered this long: the worker says so once.
constexpr int64_t kUnansweredNoticeUs = 5'000'000;
// How often a worker with WorkerOptions::parent_pid looks for its parent.
constexpr int64_t kParentCheckUs = 200'000;
// Finished tasks a re-registration reports and re-sends. It covers results
// a controller got but had not yet written to its store when it died.
constexpr size_t kMaxRecent = 4096;
// Outputs a re-registration reports, below the decoder's batch limit; a
// restarted controller rebuilds any beyond (lineage).
constexpr size_t kMaxReportedOutputs = 60000;

// True for 1, 2, 4, 8, ...: log the first of a kind loudly, then rarely.
bool IsPowerOfTwo(uint64_t n) { return n != 0 && (n & (n - 1)) == 0; }

}  // namespace

ServeLoop::ServeLoop(const WorkerOptions& options, const KernelMap* kernels, WakeupFd* wake,
                     const std::atomic<bool>* stop, spdlog::logger* log)
    : options_(options),
      kernels_(kernels),
      wake_(wake),
      stop_(stop),
      log_(log),
      link_(options.controller_endpoint),
      completions_(wake),
      data_(DataPlaneOptions{options.data_host, options.memory_mb << 20,
                             int64_t{options.peer_timeout_ms} * 1000, options.prefetch_mb << 20},
            log),
      notifier_(&data_.context(), &data_.tokens(), log),
      backoff_(int64_t{options.reconnect_backoff_min_ms} * 1000,
               int64_t{options.reconnect_backoff_max_ms} * 1000) {
  if (!options.curve_server_key.empty()) {
    link_.SetCurve(options.curve_server_key, options.curve_public_key, options.curve_secret_key);
  }
  register_.name = options.name;
  register_.token = options.token;
  register_.pid = static_cast<uint32_t>(::getpid());
  register_.instance = RandomId();  // per process (per ServeLoop, made once per Worker)
  if (options.cube_cores > 0) register_.cores.push_back({CoreKind::kCube, options.cube_cores});
  if (options.vector_cores > 0) {
    register_.cores.push_back({CoreKind::kVector, options.vector_cores});
  }
  register_.memory_mb = options.memory_mb;
  for (const auto& [key, value] : options.labels) register_.labels.push_back({key, value});
  for (const auto& [name, kernel] : *kernels) register_.kernels.push_back(name);
}

ServeLoop::~ServeLoop() {
  StopLanes();
  if (exec_log_fd_ >= 0) ::close(exec_log_fd_);
}

Status ServeLoop::Run() {
  // No token given: the one a controller on this host made, if any
  // (DefaultTokenPath); a controller without a token ignores it.
  if (register_.token.empty()) {
    Result<std::string> token = ReadDefaultToken();
    if (!token.ok()) return Status::InvalidArgument("token: " + token.status().message());
    register_.token = *token;
    token_hint_ = DefaultTokenHint(!token->empty());
  }
  link_.SetToken(register_.token);
  Status status = data_.Start();
  register_.data_endpoint = data_.endpoint();
  if (status.ok()) status = StartLanes();
  if (status.ok()) status = link_.Connect();
  if (status.ok()) status = Serve();
  StopLanes();
  data_.Stop();
  // Results that finished meanwhile go out if the link can still take them.
  TakeResults();
  if (status.ok()) (void)FlushResults();
  return status;
}

Status ServeLoop::StartLanes() {
  const uint32_t counts[kNumCoreKinds] = {options_.cube_cores, options_.vector_cores};
  if (!options_.exec_log.empty()) {
    exec_log_fd_ =
        ::open(options_.exec_log.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    if (exec_log_fd_ < 0) {
      return Status::InvalidArgument("exec log " + options_.exec_log + ": " + std::strerror(errno));
    }
  }
  try {
    for (int kind = 0; kind < kNumCoreKinds; ++kind) {
      for (uint32_t i = 0; i < counts[kind]; ++i) {
        lanes_[kind].push_back(std::make_unique<Lane>(static_cast<CoreKind>(kind), i, &completions_,
                                                      &data_, log_, exec_log_fd_));
      }
    }
  } catch (const std::system_error& e) {
    return Status::ResourceExhausted(std::string("starting a core lane thread: ") + e.what());
  }
  return Status::Ok();
}

void ServeLoop::StopLanes() {
  for (auto& lanes : lanes_) {
    for (auto& lane : lanes) in_flight_ -= static_cast<uint32_t>(lane->Stop());
  }
}

Status ServeLoop::Serve() {
  log_->info("worker '{}' starting: {} cube + {} vector lanes, controller {}", options_.name,
             options_.cube_cores, options_.vector_cores, options_.controller_endpoint);
  phase_ = Phase::kRegistering;
  next_register_us_ = NowUs();
  while (!stop_->load(std::memory_order_acquire)) {
    RETURN_IF_ERROR(OnTimers(NowUs()));
    const int timeout_ms = PollTimeoutMs(NowUs());
    ASSIGN_OR_RETURN(ControllerLink::Ready ready, link_.Poll(wake_->fd(), timeout_ms));
    CreditStall(NowUs(), timeout_ms);
    // Drain before taking results: a result pushed after this re-signals.
    if (ready.wake) wake_->Drain();
    if (ready.socket) RETURN_IF_ERROR(ReadMessages());
    TakeResults();
    RETURN_IF_ERROR(FlushResults());
    if (shutdown_) return Status::Ok();
    if (!ParentAlive(NowUs())) return Status::Ok();
  }
  log_->info("worker '{}' stopping on request", options_.name);
  return Status::Ok();
}

Status ServeLoop::OnTimers(int64_t now) {
  if (phase_ == Phase::kRegistered) {
    if (now - last_rx_us_ >= timeout_us_) {
      log_->warn("nothing from the controller at {} for {} ms (limit {} ms); registering again",
                 link_.endpoint(), (now - last_rx_us_) / 1000, timeout_us_ / 1000);
      phase_ = Phase::kRegistering;
      reconnect_ = true;
      next_register_us_ = now;
    } else if (now >= next_heartbeat_us_ && link_.endpoint_count() > 1 && link_.Disconnected()) {
      // A primary that ended closes its connections: its standby takes
      // over within moments, so look for it now, not after the timeout.
      log_->warn("the controller at {} closed the connection; registering with the next",
                 link_.endpoint());
      phase_ = Phase::kRegistering;
      reconnect_ = true;
      next_register_us_ = now;
    } else if (now >= next_heartbeat_us_) {
      SendHeartbeat(now);
      next_heartbeat_us_ = now + heartbeat_us_;
    }
  }
  if (phase_ == Phase::kRegistering) {
    // The controller checks credentials in the handshake, before any
    // message: a refused worker would otherwise wait unanswered forever.
    if (link_.HandshakeRefused() && !TokenFileChanged()) {
      if (!options_.curve_server_key.empty()) {
        return Status::PermissionDenied(
            "the controller refused this worker's CURVE key (is worker.pub in its "
            "--curve-keys folder's authorized/?)");
      }
      return Status::PermissionDenied(
          "controller rejected the registration: wrong or missing token" + token_hint_);
    }
    if (unanswered_since_us_ == 0) unanswered_since_us_ = now;
    if (!told_unanswered_ && now - unanswered_since_us_ >= kUnansweredNoticeUs) {
      // The CURVE hint only where it may apply: never answered, no keys.
      const bool curve_hint = !registered_once_ && options_.curve_server_key.empty();
      log_->warn("no answer from the controller at {} for {} s: is it running and reachable?{}",
                 options_.controller_endpoint, (now - unanswered_since_us_) / 1'000'000,
                 curve_hint ? " One with --curve-keys ignores a worker without them (give "
                              "--curve-keys DIR)"
                            : "");
      told_unanswered_ = true;
    }
  }
  if (phase_ == Phase::kRegistering && now >= next_register_us_) {
    if (reconnect_) {
      // With standbys, each attempt goes to the next endpoint: the one
      // that did not answer may be a standby still waiting for the store.
      if (link_.endpoint_count() > 1) link_.NextEndpoint();
      log_->debug("no answer from the controller; reconnecting to {}", link_.endpoint());
      RETURN_IF_ERROR(link_.Connect());
    }
    register_.sent_us = now;
    register_.held.clear();
    for (const auto& [key, task] : held_) register_.held.push_back(task);
    for (const auto& [task, result] : recent_) register_.held.push_back(task);
    // Where a restarted controller finds the outputs of done runs.
    register_.outputs = data_.store().List(kMaxReportedOutputs);
    // And the holders of sub-model states, which later tasks load from.
    register_.states = data_.actor_states().List(kMaxReportedOutputs);
    // Which of them run now: a restarted controller that adopts them knows
    // whom to blame should this worker die.
    TakeStarted(&register_.started);
    Status sent = link_.Send(register_);
    if (sent.code() == StatusCode::kInternal) return sent;
    if (!sent.ok()) log_->warn("register: {}", sent.ToString());
    // Until an answer arrives, the next attempt goes out on a fresh socket.
    reconnect_ = true;
    next_register_us_ = now + backoff_.Next();
  }
  return Status::Ok();
}

bool ServeLoop::TokenFileChanged() {
  if (!options_.token.empty() || !options_.curve_server_key.empty()) return false;
  // A worker started beside its controller (one systemd target, one
  // script) may read the default file before the controller has made it.
  Result<std::string> token = ReadDefaultToken();
  if (!token.ok() || *token == register_.token) return false;
  log_->info("the default token file {} changed; registering with its token", DefaultTokenPath());
  register_.token = *token;
  token_hint_ = DefaultTokenHint(!token->empty());
  link_.SetToken(*token);
  reconnect_ = true;  // the next attempt goes out on a socket with it
  return true;
}

bool ServeLoop::ParentAlive(int64_t now) {
  if (options_.parent_pid <= 0 || now < next_parent_check_us_) return true;
  next_parent_check_us_ = now + kParentCheckUs;
  if (::getppid() == options_.parent_pid) return true;
  log_->warn("worker '{}': the process that started it (pid {}) is gone; stopping", options_.name,
             options_.parent_pid);
  return false;
}

void ServeLoop::CreditStall(int64_t now, int timeout_ms) {
  const int64_t stall = stalls_.Observe(now, int64_t{timeout_ms} * 1000);
  if (stall == 0) return;
  // This worker did not run (stopped, starved): the controller's silence
  // is counted only from the resume.
  log_->warn(
      "worker '{}' did not run for {} ms (stopped or starved); the controller gets its "
      "timeout again",
      options_.name, stall / 1000);
  last_rx_us_ = StallClock::Credit(last_rx_us_, stall, now);
}

int ServeLoop::PollTimeoutMs(int64_t now) const {
  int64_t deadline = phase_ == Phase::kRegistering
                         ? next_register_us_
                         : std::min(next_heartbeat_us_, last_rx_us_ + timeout_us_);
  if (options_.parent_pid > 0) deadline = std::min(deadline, next_parent_check_us_);
  const int64_t wait_us = deadline - now;
  if (wait_us <= 0) return 0;
  return static_cast<int>(std::min<int64_t>((wait_us + 999) / 1000, INT_MAX));
}

Status ServeLoop::ReadMessages() {
  for (int i = 0; i < kMaxMessagesPerWake && !shutdown_; ++i) {
    Result<std::optional<Message>> got = link_.TryRecv();
    if (!got.ok()) {
      if (got.status().code() != StatusCode::kCorruption) return got.status();
      ++dropped_frames_;
      const auto level = IsPowerOfTwo(dropped_frames_) ? spdlog::level::warn : spdlog::level::debug;
      log_->log(level, "dropped a malformed frame from the controller ({} so far): {}",
                dropped_frames_, got.status().message());
      continue;
    }
    if (!got->has_value()) break;
    RETURN_IF_ERROR(Handle(**got, NowUs()));
  }
  return Status::Ok();
}

Status ServeLoop::Handle(Message& message, int64_t now) {
  // Any well-formed message shows the controller is alive and answering.
  last_rx_us_ = now;
  reconnect_ = false;
  log_->trace("received {}", MsgTypeName(TypeOf(message)));
  switch (TypeOf(message)) {
    case MsgType::kRegisterAck:
      OnRegisterAck(std::get<RegisterAck>(message), now);
      break;
    case MsgType::kReject: {
      const Reject& reject = std::get<Reject>(message);
      if (!reject.reregister) {
        return Status::PermissionDenied("controller rejected the registration: " + reject.reason +
                                        token_hint_);
      }
      log_->warn("the controller asks this worker to register again: {}", reject.reason);
      // Straight away when it forgot a registered worker; an answer to an
      // attempt waits for the back-off, so two peers cannot ping-pong.
      if (phase_ == Phase::kRegistered) next_register_us_ = now;
      phase_ = Phase::kRegistering;
      break;
    }
    case MsgType::kHeartbeatAck:
      break;
    case MsgType::kAssignBatch:
      Dispatch(std::get<AssignBatch>(message));
      break;
    case MsgType::kCancelJob:
      DropJob(std::get<CancelJob>(message).job);
      break;
    case MsgType::kFreeJob: {
      const JobId job = std::get<FreeJob>(message).job;
      const uint64_t freed = data_.store().FreeJob(job);
      notifier_.Forget(job);
      data_.state_loader().ForgetJob(job);
      const size_t states = data_.actor_states().FreeJob(job);
      if (freed > 0 || states > 0) {
        log_->debug("job {} freed: {} bytes of outputs and {} actor state(s) released", job, freed,
                    states);
      }
      break;
    }
    case MsgType::kFreeRuns: {
      const FreeRuns& f = std::get<FreeRuns>(message);
      for (uint32_t run : f.runs) data_.store().FreeRun(f.job, run);
      break;
    }
    case MsgType::kCancelRuns: {
      // The controller has ended these runs (or given them to another
      // worker) and wants no result of them, finished or not: sent anyway,
      // a "cancelled" failure could reach a restarted controller that has
      // placed the run here again under the same attempt number, and fail
      // it. A running one's result is dropped by its lane; those already
      // finished are taken first and dropped here.
      TakeResults();
      const CancelRuns& c = std::get<CancelRuns>(message);
      for (uint32_t run : c.runs) {
        size_t dropped = 0;
        for (auto& lanes : lanes_) {
          for (auto& lane : lanes) dropped += lane->CancelRun(c.job, run);
        }
        in_flight_ -= static_cast<uint32_t>(dropped);
        auto same = [&](const TaskResult& r) { return r.job == c.job && r.task == run; };
        std::erase_if(done_.results, same);
        std::erase_if(recent_, [&](const auto& entry) { return same(entry.second); });
        notify_.erase({c.job, run});
        auto it = held_.find({c.job, run});
        if (it == held_.end()) continue;
        log_->debug("job {} run {} attempt {} cancelled ({})", c.job, run, it->second.attempt,
                    dropped == 0 ? "running" : "queued");
        held_.erase(it);
      }
      break;
    }
    case MsgType::kShutdown:
      log_->info("the controller asks this worker to shut down: {}",
                 std::get<Shutdown>(message).reason);
      shutdown_ = true;
      break;
    case MsgType::kRegister:
    case MsgType::kHeartbeat:
    case MsgType::kDoneBatch:
    case MsgType::kSessionOpen:
    case MsgType::kSessionAck:
    case MsgType::kSessionSubmit:
    case MsgType::kSessionControl:
    case MsgType::kSessionUpdate:
      // Well-formed, but not for a worker: count them as bad frames.
      ++dropped_frames_;
      log_->warn("dropped a {} message, which only workers send", MsgTypeName(TypeOf(message)));
      break;
  }
  return Status::Ok();
}

void ServeLoop::OnRegisterAck(const RegisterAck& ack, int64_t now) {
  worker_id_ = ack.worker_id;
  heartbeat_us_ = ack.heartbeat_ms > 0 ? int64_t{ack.heartbeat_ms} * 1000 : kDefaultHeartbeatUs;
  timeout_us_ = std::max(int64_t{options_.controller_timeout_ms} * 1000, 2 * heartbeat_us_);
  next_heartbeat_us_ = now + heartbeat_us_;
  phase_ = Phase::kRegistered;
  unanswered_since_us_ = 0;
  told_unanswered_ = false;
  backoff_.Reset();
  if (registered_once_ && ack.epoch != epoch_) DropEverything();
  epoch_ = register_.epoch = ack.epoch;
  // Before any task of this controller runs: its fetches carry the token,
  // and peers' requests with it are served from now on.
  data_.SetDataToken(ack.data_token);
  if (registered_once_) {
    // A new controller may have missed these; an old one ignores repeats.
    for (const auto& [task, result] : recent_) done_.results.push_back(result);
  }
  registered_once_ = true;
  log_->info("registered with {} as worker {} (heartbeat every {} ms)", link_.endpoint(),
             worker_id_, heartbeat_us_ / 1000);
}

void ServeLoop::Dispatch(AssignBatch& batch) {
  for (TaskAssign& task : batch.tasks) {
    const auto& lanes = lanes_[static_cast<int>(task.core)];
    if (task.lane >= lanes.size()) {
      FailNow(task, "lane " + std::to_string(task.lane) + " out of range: this worker has " +
                        std::to_string(lanes.size()) + " " + std::string(CoreKindName(task.core)) +
                        " core(s)");
      continue;
    }
    auto kernel = kernels_->find(task.kernel);
    if (kernel == kernels_->end()) {
      FailNow(task, "unknown kernel '" + task.kernel + "' on this worker");
      continue;
    }
    held_[{task.job, task.task}] =
        HeldTask{task.job, task.task, task.attempt, task.core, task.lane};
    if (!task.notify.empty()) {
      notify_[{task.job, task.task}] = {task.attempt, std::move(task.notify)};
    }
    // Its remote inputs, and its sub-model's state if it must load it, are
    // fetched from now on, while it waits its turn.
    PrefetchedInputs ahead = data_.PrefetchInputs(task);
    data_.PrefetchState(task);
    lanes[task.lane]->Push(LaneTask{std::move(task), &kernel->second, std::move(ahead)});
    ++in_flight_;
  }
}

void ServeLoop::FailNow(const TaskAssign& task, std::string error) {
  log_->debug("job {} task {} attempt {} failed before it ran: {}", task.job, task.task,
              task.attempt, error);
  TaskResult r;
  r.job = task.job;
  r.task = task.task;
  r.attempt = task.attempt;
  r.ok = false;
  r.start_us = r.end_us = NowUs();
  r.error = std::move(error);
  done_.results.push_back(std::move(r));
}

void ServeLoop::DropJob(JobId job) {
  size_t dropped = 0;
  for (auto& lanes : lanes_) {
    for (auto& lane : lanes) dropped += lane->CancelJob(job);
  }
  in_flight_ -= static_cast<uint32_t>(dropped);
  const uint64_t freed = data_.store().FreeJob(job);
  data_.state_loader().ForgetJob(job);
  data_.actor_states().FreeJob(job);
  std::erase_if(held_, [job](const auto& entry) { return entry.first.first == job; });
  std::erase_if(notify_, [job](const auto& entry) { return entry.first.first == job; });
  notifier_.Forget(job);
  log_->info("job {} cancelled: dropped {} queued task(s), freed {} bytes of outputs", job, dropped,
             freed);
}

void ServeLoop::DropEverything() {
  TakeResults();  // those finished go with the rest, below
  std::set<JobId> jobs;
  for (const auto& [key, task] : held_) jobs.insert(task.job);
  for (JobId job : jobs) {
    for (auto& lanes : lanes_) {
      for (auto& lane : lanes) in_flight_ -= static_cast<uint32_t>(lane->CancelJob(job));
    }
  }
  uint64_t freed = 0;
  for (std::vector<HeldOutput> outs; !(outs = data_.store().List(1024)).empty();) {
    for (const HeldOutput& o : outs) freed += data_.store().FreeJob(o.job);
  }
  const size_t states = data_.actor_states().FreeAll();
  log_->warn(
      "registered with another controller (a new job store, or none): dropped {} task(s) of "
      "{} job(s), {} bytes of outputs, {} actor state(s) and {} result(s) not yet sent",
      held_.size(), jobs.size(), freed, states, done_.results.size());
  held_.clear();
  recent_.clear();
  notify_.clear();
  notifier_.Clear();
  done_.results.clear();
}

void ServeLoop::SendHeartbeat(int64_t now) {
  Heartbeat beat{worker_id_,
                 in_flight_,
                 dropped_frames_,
                 now,
                 data_.store().used_bytes(),
                 data_.actor_states().bytes(),
                 {}};
  TakeStarted(&beat.started);
  Status sent = link_.Send(beat);
  if (!sent.ok()) log_->debug("heartbeat: {}", sent.ToString());
}

void ServeLoop::TakeStarted(std::vector<HeldTask>* out) const {
  out->clear();
  HeldTask t;
  for (const auto& lanes : lanes_) {
    for (const auto& lane : lanes) {
      if (!lane->Started(&t)) continue;
      // Only the attempt this controller placed here (held_): another
      // controller's job may have had the same id.
      auto it = held_.find({t.job, t.task});
      if (it != held_.end() && it->second.attempt == t.attempt) out->push_back(t);
    }
  }
}

void ServeLoop::TakeResults() {
  const size_t first = done_.results.size();
  in_flight_ -= static_cast<uint32_t>(completions_.TakeAll(&done_.results));
  for (size_t i = first; i < done_.results.size(); ++i) {
    const TaskResult& r = done_.results[i];
    if (auto n = notify_.find({r.job, r.task});
        n != notify_.end() && n->second.first == r.attempt) {
      if (r.ok) {
        RunDoneNotice& notice = notices_[{std::move(n->second.second), r.job}];
        notice.runs.push_back({r.task, r.output_bytes, r.output_buffers});
      }
      notify_.erase(n);
    }
    auto it = held_.find({r.job, r.task});
    if (it == held_.end() || it->second.attempt != r.attempt) continue;
    recent_.emplace_back(it->second, r);
    held_.erase(it);
    if (recent_.size() > kMaxRecent) recent_.pop_front();
  }
  // The drivers first: they wait on these; the DoneBatch follows at once.
  for (auto& [to, notice] : notices_) {
    notice.endpoint = data_.endpoint();
    for (size_t at = 0; at < notice.runs.size(); at += kMaxNoticeRuns) {
      const size_t end = std::min(notice.runs.size(), at + kMaxNoticeRuns);
      if (at == 0 && end == notice.runs.size()) {
        notifier_.Notify(to.first, to.second, notice);
      } else {
        notifier_.Notify(
            to.first, to.second,
            RunDoneNotice{notice.endpoint, {notice.runs.begin() + at, notice.runs.begin() + end}});
      }
    }
  }
  notices_.clear();
}

Status ServeLoop::FlushResults() {
  // Results wait for a registration: a DoneBatch needs our worker id.
  if (done_.results.empty() || phase_ != Phase::kRegistered) return Status::Ok();
  done_.worker_id = worker_id_;
  done_.sent_us = NowUs();
  // After the results were taken (TakeResults): a lane that finished a run
  // and went on to the next one reports the next one here, so the
  // controller learns it started with the result before it, not a
  // heartbeat later.
  TakeStarted(&done_.started);
  // Move the batch in and out of the Message, keeping its capacity.
  Message message(std::move(done_));
  Status sent = link_.Send(message);
  done_ = std::move(std::get<DoneBatch>(message));
  if (sent.ok()) {
    done_.results.clear();
    return Status::Ok();
  }
  if (sent.code() == StatusCode::kInternal) return sent;
  // Queue full: keep the results and try again on the next wake-up.
  log_->warn("results: {}", sent.ToString());
  return Status::Ok();
}

}  // namespace hmpmd::worker
