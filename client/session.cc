#include "session.h"

#include <sys/eventfd.h>
#include <unistd.h>

#include <chrono>

#include "hmpmd/protocol/codec.h"
#include "hmpmd/protocol/types.h"

namespace hmpmd::client::internal {
namespace {

int64_t NowUs() {
  return std::chrono::duration_cast<std::chrono::microseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

// A deadline `timeout_ms` from now; kForever: none.
std::chrono::steady_clock::time_point Deadline(int64_t timeout_ms) {
  if (timeout_ms < 0) return std::chrono::steady_clock::time_point::max();
  return std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
}

}  // namespace

FutureState::~FutureState() { session->Dropped(*this); }

Session::Session(ClientOptions options) : options_(std::move(options)) {}

Session::~Session() {
  stop_ = true;
  if (io_.joinable()) {
    Wake();
    io_.join();
  }
  if (wake_fd_ >= 0) ::close(wake_fd_);
}

FutureState* Session::StateOf(const Future& f) { return f.state_.get(); }

Status Session::Start() {
  if (Status st = CheckEndpoint(options_.controller, /*bind=*/false); !st.ok()) {
    return Status::InvalidArgument("controller: " + st.message());
  }
  if (options_.max_batch == 0) return Status::InvalidArgument("max_batch: must be at least 1");
  wake_fd_ = ::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  if (wake_fd_ < 0) return Status::Internal("eventfd failed");
  try {
    socket_ = zmq::socket_t(ctx_, zmq::socket_type::dealer);
    socket_.set(zmq::sockopt::linger, 0);
    socket_.set(zmq::sockopt::sndhwm, 0);
    socket_.set(zmq::sockopt::rcvhwm, 0);
    if (!options_.curve_server_key.empty()) {
      socket_.set(zmq::sockopt::curve_serverkey, options_.curve_server_key);
      socket_.set(zmq::sockopt::curve_publickey, options_.curve_public_key);
      socket_.set(zmq::sockopt::curve_secretkey, options_.curve_secret_key);
    }
    socket_.connect(options_.controller);
  } catch (const zmq::error_t& e) {
    return Status::InvalidArgument("controller '" + options_.controller + "': " + e.what());
  }
  SessionOpen open;
  open.name = options_.session;
  open.token = options_.token;
  open.weight = options_.weight;
  open.heartbeat_ms = options_.heartbeat_ms;
  open.sent_us = NowUs();
  if (!SendMessage(open)) return Status::Unavailable("cannot send to " + options_.controller);
  zmq::pollitem_t item{socket_.handle(), 0, ZMQ_POLLIN, 0};
  const auto deadline = Deadline(options_.connect_timeout_ms);
  for (;;) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    if (options_.connect_timeout_ms >= 0 && left.count() <= 0) break;
    if (zmq::poll(&item, 1,
                  options_.connect_timeout_ms < 0 ? std::chrono::milliseconds(-1) : left) == 0) {
      break;
    }
    std::vector<zmq::message_t> parts;
    do {
      zmq::message_t m;
      (void)socket_.recv(m);
      parts.push_back(std::move(m));
    } while (parts.back().more());
    if (parts.size() != 2) continue;
    auto msg = Decode(parts[0].to_string_view(), parts[1].to_string_view());
    if (!msg.ok() || !std::holds_alternative<SessionAck>(*msg)) continue;
    const SessionAck& ack = std::get<SessionAck>(*msg);
    if (ack.job == 0) {
      return ack.permission ? Status::PermissionDenied("controller: " + ack.error)
                            : Status::InvalidArgument("controller: " + ack.error);
    }
    job_ = ack.job;
    io_ = std::thread([this] { Loop(); });
    return Status::Ok();
  }
  return Status::Unavailable("no controller answered at " + options_.controller + " within " +
                             std::to_string(options_.connect_timeout_ms) + " ms");
}

bool Session::SendMessage(const Message& m) {
  EncodedFrames f = Encode(m);
  try {
    if (!socket_.send(zmq::buffer(f.header), zmq::send_flags::sndmore)) return false;
    return socket_.send(zmq::buffer(f.body), zmq::send_flags::none).has_value();
  } catch (const zmq::error_t&) {
    return false;
  }
}

void Session::Wake() {
  uint64_t one = 1;
  if (wake_fd_ >= 0) (void)!::write(wake_fd_, &one, sizeof(one));
}

// Heartbeat periods without a word from the controller after which the
// session is lost (as the controller declares a silent driver lost).
constexpr int64_t kSilentPeriods = 10;

void Session::Loop() {
  zmq::pollitem_t items[] = {{socket_.handle(), 0, ZMQ_POLLIN, 0},
                             {nullptr, wake_fd_, ZMQ_POLLIN, 0}};
  const int64_t heartbeat_us = int64_t{std::max(1u, options_.heartbeat_ms)} * 1000;
  int64_t last_sent = NowUs(), last_heard = last_sent;
  bool lost = false;
  while (!stop_) {
    try {
      zmq::poll(items, 2, std::chrono::milliseconds(options_.heartbeat_ms));
    } catch (const zmq::error_t& e) {
      if (e.num() == EINTR) continue;
      std::lock_guard lock(mu_);
      lost_ = std::string("poll: ") + e.what();
      break;
    }
    if (items[1].revents & ZMQ_POLLIN) {
      uint64_t n;
      (void)!::read(wake_fd_, &n, sizeof(n));
    }
    for (int i = 0; i < 1024; ++i) {
      zmq::message_t header, body;
      if (!socket_.recv(header, zmq::recv_flags::dontwait)) break;
      bool two = header.more();
      if (two) (void)socket_.recv(body, zmq::recv_flags::none);
      while (socket_.get(zmq::sockopt::rcvmore)) {
        zmq::message_t extra;
        (void)socket_.recv(extra, zmq::recv_flags::none);
        two = false;
      }
      if (!two) continue;
      auto msg = Decode(header.to_string_view(), body.to_string_view());
      if (!msg.ok()) continue;
      last_heard = NowUs();
      if (auto* u = std::get_if<SessionUpdate>(&*msg)) HandleUpdate(*u);
    }
    const int64_t now = NowUs();
    if (!lost && now - last_heard > kSilentPeriods * heartbeat_us) {
      // The controller answers every heartbeat: it is gone (killed, or
      // unreachable). Nothing would ever end the futures: fail them.
      lost = true;
      SessionUpdate u;
      u.job = job_;
      u.closed = true;
      u.job_state = "lost";
      u.job_error = "driver session lost: the controller at " + options_.controller +
                    " did not answer for " + std::to_string((now - last_heard) / 1000) + " ms";
      HandleUpdate(u);
    }
    if (Flush(now)) {
      last_sent = now;
    } else if (now - last_sent >= heartbeat_us) {
      SessionControl hb;
      hb.job = job_;
      hb.sent_us = now;
      SendMessage(hb);
      last_sent = now;
    }
  }
}

bool Session::Flush(int64_t now_us) {
  std::vector<SubmitGroup> groups;
  SessionControl control;
  {
    std::lock_guard lock(mu_);
    if (outbox_.empty() && release_.empty() && cancel_.empty() &&
        close_ == SessionControl::kKeepOpen) {
      return false;
    }
    groups.swap(outbox_);
    control.release.swap(release_);
    control.cancel.swap(cancel_);
    control.close = std::exchange(close_, SessionControl::kKeepOpen);
  }
  // Submits first: a release or close must follow the tasks it concerns.
  SessionSubmit submit;
  submit.job = job_;
  size_t tasks = 0;
  for (SubmitGroup& g : groups) {
    tasks += g.tasks.size();
    submit.groups.push_back(std::move(g));
    if (tasks >= options_.max_batch) {
      SendMessage(submit);
      submit.groups.clear();
      tasks = 0;
    }
  }
  if (!submit.groups.empty()) SendMessage(submit);
  if (!control.release.empty() || !control.cancel.empty() ||
      control.close != SessionControl::kKeepOpen) {
    control.job = job_;
    control.sent_us = now_us;
    SendMessage(control);
  }
  return true;
}

void Session::HandleUpdate(SessionUpdate& u) {
  // States locked here may be the last reference; they are destroyed (and
  // release their task, which takes mu_) after the lock is let go.
  std::vector<std::shared_ptr<FutureState>> keep;
  {
    std::lock_guard lock(mu_);
    for (GroupAck& ack : u.acks) {
      if (auto actor = actor_seq_.find(ack.seq); actor != actor_seq_.end()) {
        if (!ack.error.empty()) refused_[actor->second] = ack.error;
        actor_seq_.erase(actor);
      }
      auto it = unacked_.find(ack.seq);
      if (it == unacked_.end()) continue;
      std::vector<std::weak_ptr<FutureState>> members = std::move(it->second);
      unacked_.erase(it);
      for (size_t i = 0; i < members.size(); ++i) {
        const uint32_t index = ack.first_task + static_cast<uint32_t>(i);
        std::shared_ptr<FutureState> f = members[i].lock();
        if (f) keep.push_back(f);
        if (!ack.error.empty()) {
          ++ended_;
          if (f) {
            f->phase = FutureState::Phase::kRejected;
            f->error = ack.error;
          }
          continue;
        }
        if (tasks_.size() <= index) tasks_.resize(index + 1);
        tasks_[index] = members[i];
        if (f) {
          f->index = index;
        } else {
          release_.push_back(index);  // dropped before its ack
        }
      }
    }
    for (TaskEnded& e : u.ended) {
      if (e.task >= tasks_.size()) continue;
      std::shared_ptr<FutureState> f = tasks_[e.task].lock();
      if (f) keep.push_back(f);
      ++ended_;
      if (!f || Ended(*f)) continue;
      f->phase = e.state == TaskEnded::kDone     ? FutureState::Phase::kDone
                 : e.state == TaskEnded::kFailed ? FutureState::Phase::kFailed
                                                 : FutureState::Phase::kCancelled;
      f->error = std::move(e.error);
      f->endpoint = std::move(e.endpoint);
      f->bytes = e.output_bytes;
    }
    if (u.closed && !closed_) {
      closed_ = true;
      final_ =
          u.job_state == "succeeded"
              ? Status::Ok()
              : Status::Aborted("session '" + options_.session + "' (job " + std::to_string(job_) +
                                ") " + u.job_state + ": " + u.job_error);
      const std::string why =
          u.job_state == "lost" ? u.job_error : "the session ended (" + u.job_state + ")";
      for (auto& w : tasks_) {
        if (auto f = w.lock(); f && !Ended(*f)) {
          f->phase = FutureState::Phase::kLost;
          f->error = why;
          keep.push_back(std::move(f));
        } else if (f) {
          keep.push_back(std::move(f));
        }
      }
      for (auto& [seq, members] : unacked_) {
        for (auto& w : members) {
          if (auto f = w.lock(); f && !Ended(*f)) {
            f->phase = FutureState::Phase::kLost;
            f->error = why;
          }
        }
      }
      unacked_.clear();
    }
  }
  cv_.notify_all();
}

Result<std::vector<Future>> Session::Submit(std::vector<Call> calls) {
  if (calls.empty()) return Status::InvalidArgument("submit: no calls");
  std::vector<Future> out;
  {
    std::unique_lock lock(mu_);
    if (closing_ || closed_) return Status::InvalidArgument("submit: the session is closed");
    // Check every call before queueing any.
    std::set<std::string> fresh;
    for (size_t i = 0; i < calls.size(); ++i) {
      const Call& c = calls[i];
      const std::string where =
          "call " + std::to_string(i) + (c.label.empty() ? "" : " '" + c.label + "'");
      if (c.kernel.empty()) return Status::InvalidArgument(where + ": kernel: empty");
      if (!c.label.empty()) {
        if (c.label.find('/') != std::string::npos) {
          return Status::InvalidArgument(where + ": label: must not contain '/'");
        }
        if (labels_.count(c.label) || !fresh.insert(c.label).second) {
          return Status::InvalidArgument(where + ": label: duplicate '" + c.label +
                                         "' in this session");
        }
      }
      if (!c.actor.empty() && c.actor != "default" && !actors_.count(c.actor)) {
        return Status::InvalidArgument(where + ": actor: unknown actor '" + c.actor +
                                       "' (CreateActor first)");
      }
      if (auto bad = refused_.find(c.actor); bad != refused_.end()) {
        return Status::InvalidArgument(where + ": actor: '" + c.actor +
                                       "' was refused by the controller: " + bad->second);
      }
      for (size_t k = 0; k < c.inputs.size(); ++k) {
        const FutureState* in = StateOf(c.inputs[k]);
        if (in == nullptr) {
          return Status::InvalidArgument(where + ": inputs[" + std::to_string(k) +
                                         "]: an empty Future");
        }
        if (in->session.get() != this) {
          return Status::InvalidArgument(where + ": inputs[" + std::to_string(k) + "]: task '" +
                                         in->label + "' belongs to another session (job " +
                                         std::to_string(in->session->job()) + ")");
        }
      }
    }
    SubmitGroup group;
    group.seq = next_seq_++;
    std::vector<std::weak_ptr<FutureState>>& members = unacked_[group.seq];
    for (Call& c : calls) {
      std::string label = std::move(c.label);
      while (label.empty()) {
        std::string auto_label = "t" + std::to_string(submitted_);
        if (!labels_.count(auto_label) && !fresh.count(auto_label)) label = auto_label;
        ++submitted_;
      }
      labels_.insert(label);
      WireTask t;
      t.id = label;
      t.submodel = c.actor.empty() ? "default" : std::move(c.actor);
      t.kernel = std::move(c.kernel);
      t.core = c.core;
      for (const Future& in : c.inputs) t.inputs.push_back(StateOf(in)->label);
      t.args = std::move(c.args);
      t.flops = c.cost.flops;
      t.bytes = c.cost.bytes;
      if (c.collective) {
        t.group = c.collective->group;
        t.op = c.collective->op;
        t.group_bytes = c.collective->bytes;
      }
      group.tasks.push_back(std::move(t));
      auto state = std::make_shared<FutureState>(shared_from_this(), std::move(label));
      members.push_back(state);
      out.push_back(Future(std::move(state)));
    }
    outbox_.push_back(std::move(group));
  }
  Wake();
  return out;
}

Status Session::AddActor(const ActorOptions& options) {
  if (options.name.empty()) return Status::InvalidArgument("actor: name: empty");
  if (options.name == "default") return Status::InvalidArgument("actor: name: 'default' is taken");
  {
    std::lock_guard lock(mu_);
    if (closing_ || closed_) return Status::InvalidArgument("actor: the session is closed");
    if (!actors_.insert(options.name).second) {
      return Status::AlreadyExists("actor: name: duplicate '" + options.name + "'");
    }
    SubmitGroup group;
    group.seq = next_seq_++;
    group.submodels.push_back(
        {options.name, static_cast<uint8_t>(options.kind), options.devices, options.elastic});
    actor_seq_[group.seq] = options.name;  // the ack only reports errors
    outbox_.push_back(std::move(group));
  }
  Wake();
  return Status::Ok();
}

Status Session::StatusOf(const FutureState& f) {
  switch (f.phase) {
    case FutureState::Phase::kPending:
      return Status::DeadlineExceeded("task '" + f.label + "' has not ended");
    case FutureState::Phase::kDone:
      return Status::Ok();
    case FutureState::Phase::kFailed:
      return Status::Aborted("task '" + f.label + "' failed: " + f.error);
    case FutureState::Phase::kCancelled:
      return Status::Cancelled("task '" + f.label + "' cancelled: " + f.error);
    case FutureState::Phase::kRejected:
      return Status::InvalidArgument("task '" + f.label + "' rejected: " + f.error);
    case FutureState::Phase::kLost:
      return Status::Unavailable("task '" + f.label + "': " + f.error);
  }
  return Status::Internal("task '" + f.label + "': unknown state");
}

bool Session::Ready(const FutureState& f) {
  std::lock_guard lock(mu_);
  return Ended(f);
}

Status Session::Wait(const FutureState& f, int64_t timeout_ms) {
  std::unique_lock lock(mu_);
  const auto deadline = Deadline(timeout_ms);
  while (!Ended(f)) {
    if (cv_.wait_until(lock, deadline) == std::cv_status::timeout && !Ended(f)) {
      return Status::DeadlineExceeded("task '" + f.label + "' not ended within " +
                                      std::to_string(timeout_ms) + " ms");
    }
  }
  return StatusOf(f);
}

Status Session::Outcome(const FutureState& f, std::string* endpoint, uint64_t* bytes) {
  std::lock_guard lock(mu_);
  if (closed_ && f.phase == FutureState::Phase::kDone) {
    return Status::Unavailable("task '" + f.label +
                               "': the session is closed; its outputs are freed");
  }
  *endpoint = f.endpoint;
  *bytes = f.bytes;
  return StatusOf(f);
}

Result<size_t> Session::WaitAny(std::span<const Future> futures, int64_t timeout_ms) {
  if (futures.empty()) return Status::InvalidArgument("WaitAny: no futures");
  for (size_t i = 0; i < futures.size(); ++i) {
    if (StateOf(futures[i]) == nullptr) {
      return Status::InvalidArgument("WaitAny: futures[" + std::to_string(i) + "] is empty");
    }
    if (StateOf(futures[i])->session.get() != this) {
      return Status::InvalidArgument("WaitAny: futures[" + std::to_string(i) +
                                     "] belongs to another session");
    }
  }
  std::unique_lock lock(mu_);
  const auto deadline = Deadline(timeout_ms);
  for (;;) {
    for (size_t i = 0; i < futures.size(); ++i) {
      if (Ended(*StateOf(futures[i]))) return i;
    }
    if (cv_.wait_until(lock, deadline) == std::cv_status::timeout) {
      for (size_t i = 0; i < futures.size(); ++i) {
        if (Ended(*StateOf(futures[i]))) return i;
      }
      return Status::DeadlineExceeded("WaitAny: none of " + std::to_string(futures.size()) +
                                      " tasks ended within " + std::to_string(timeout_ms) + " ms");
    }
  }
}

Status Session::Cancel(const FutureState& f) {
  if (f.session.get() != this) {
    return Status::InvalidArgument("cancel: task '" + f.label + "' belongs to another session");
  }
  {
    std::unique_lock lock(mu_);
    if (Ended(f)) return Status::Ok();
    if (closed_) return Status::Ok();
    // Its index comes with the ack; wait for it (the I/O thread sends soon).
    while (f.index < 0 && !Ended(f)) {
      if (cv_.wait_for(lock, std::chrono::milliseconds(options_.connect_timeout_ms)) ==
              std::cv_status::timeout &&
          f.index < 0) {
        return Status::Unavailable("cancel: task '" + f.label + "' not acknowledged");
      }
    }
    if (Ended(f)) return Status::Ok();
    cancel_.push_back(static_cast<uint32_t>(f.index));
  }
  Wake();
  return Status::Ok();
}

void Session::Dropped(FutureState& f) {
  {
    std::lock_guard lock(mu_);
    if (f.index < 0 || closed_) return;  // not acked yet: HandleUpdate releases it
    release_.push_back(static_cast<uint32_t>(f.index));
  }
  Wake();
}

uint64_t Session::in_flight() {
  std::lock_guard lock(mu_);
  return labels_.size() > ended_ ? labels_.size() - ended_ : 0;
}

Status Session::Close(bool abort, int64_t timeout_ms) {
  {
    std::unique_lock lock(mu_);
    if (!io_.joinable()) return final_;
    if (!closed_) {
      closing_ = true;
      close_ = abort ? SessionControl::kAbort : SessionControl::kClose;
    }
  }
  Wake();
  Status result;
  std::vector<std::shared_ptr<FutureState>> keep;  // destroyed unlocked
  {
    std::unique_lock lock(mu_);
    if (!cv_.wait_for(lock, std::chrono::milliseconds(timeout_ms < 0 ? INT32_MAX : timeout_ms),
                      [&] { return closed_; })) {
      result = Status::DeadlineExceeded("close: the controller did not end session '" +
                                        options_.session + "' within " +
                                        std::to_string(timeout_ms) + " ms");
      closed_ = true;
      final_ = result;
      for (auto& w : tasks_) {
        if (auto f = w.lock()) {
          if (!Ended(*f)) {
            f->phase = FutureState::Phase::kLost;
            f->error = "the session was closed";
          }
          keep.push_back(std::move(f));
        }
      }
    } else {
      result = final_;
    }
  }
  cv_.notify_all();
  stop_ = true;
  Wake();
  io_.join();
  return result;
}

}  // namespace hmpmd::client::internal
