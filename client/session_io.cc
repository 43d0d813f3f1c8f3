// Session's I/O thread: opening the session, the loop that sends queued
// calls and heartbeats and applies the controller's updates. The calls
// users make (Submit, Wait, Cancel, Close) are in session.cc.
#include <sys/eventfd.h>
#include <unistd.h>
#include <zmq.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <iterator>
#include <variant>
#include <zmq_addon.hpp>

#include "hmpmd/protocol/address_list.h"
#include "hmpmd/protocol/codec.h"
#include "hmpmd/protocol/control_auth.h"
#include "hmpmd/protocol/data_auth.h"
#include "hmpmd/protocol/job_spec.h"
#include "hmpmd/protocol/stall_clock.h"
#include "hmpmd/protocol/token_file.h"
#include "hmpmd/protocol/types.h"
#include "session.h"

namespace hmpmd::client::internal {

Status Session::Start() {
  // One endpoint, or a primary and its standbys separated by commas.
  const std::vector<std::string> endpoints = SplitAddresses(options_.controller);
  for (const std::string& endpoint : endpoints) {
    if (Status st = CheckEndpoint(endpoint, /*bind=*/false); !st.ok()) {
      return Status::InvalidArgument("controller: " + st.message());
    }
  }
  if (options_.max_batch == 0) return Status::InvalidArgument("max_batch: must be at least 1");
  // 0 made the client's loop spin on a 0 ms heartbeat timer.
  // Above a minute, a driver that died held its session open for hours.
  if (options_.heartbeat_ms == 0 || options_.heartbeat_ms > ClientOptions::kMaxHeartbeatMs) {
    return Status::InvalidArgument("heartbeat_ms: must be from 1 to " +
                                   std::to_string(ClientOptions::kMaxHeartbeatMs));
  }
  // -1 (kForever) waits without limit; another negative was read the same
  // way, silently.
  for (auto [name, ms] : {std::pair{"connect_timeout_ms", options_.connect_timeout_ms},
                          std::pair{"fetch_timeout_ms", options_.fetch_timeout_ms},
                          std::pair{"close_timeout_ms", options_.close_timeout_ms},
                          std::pair{"resume_timeout_ms", options_.resume_timeout_ms}}) {
    if (ms < 0 && ms != kForever) {
      return Status::InvalidArgument(std::string(name) + ": must be at least 0, or -1 (no limit)");
    }
  }
  if (options_.weight < 1 || options_.weight > 1'000'000) {
    return Status::InvalidArgument("weight: must be between 1 and 1000000 (as a job spec's)");
  }
  if (std::string ch = FirstControlChar(options_.session); !ch.empty()) {
    return Status::InvalidArgument("session: contains the control character " + ch);
  }
  // Over the decoder's limit, the open was dropped unanswered: Connect
  // failed after its whole timeout as "no controller answered".
  RETURN_IF_ERROR(CheckWireString("session", options_.session));
  // No token given: the one a controller on this host made, if any
  // (DefaultTokenPath); a controller without a token ignores it.
  Result<std::string> token = options_.token.empty() ? ReadDefaultToken() : options_.token;
  if (!token.ok()) return Status::InvalidArgument("token: " + token.status().message());
  RETURN_IF_ERROR(CheckWireString("token", *token));
  token_ = *token;
  wake_fd_ = ::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  if (wake_fd_ < 0) return Status::Internal("eventfd failed");
  zmq::socket_t handshakes;
  size_t at = 0;  // the endpoint tried now
  const auto connect = [&]() -> Status {
    try {
      StopMonitor(socket_, handshakes);  // the previous socket's monitor first
      socket_ = zmq::socket_t(ctx_, zmq::socket_type::dealer);
      Configure(socket_);
      // The controller checks credentials in the handshake, before any
      // message: a refused session would otherwise wait for its time-out.
      handshakes = MonitorHandshakes(ctx_, socket_);
      socket_.connect(endpoints[at]);
    } catch (const zmq::error_t& e) {
      return Status::InvalidArgument("controller '" + endpoints[at] + "': " + e.what());
    }
    return Status::Ok();
  };
  RETURN_IF_ERROR(connect());
  // Only the opening needs the monitor: it stops on every way out, and
  // before the I/O thread takes socket_ (a socket has one thread; once
  // stopped, the guard leaves socket_ alone).
  MonitorStop stop_handshakes(socket_, handshakes);
  // With the hint on where a token is looked for when none was given.
  const auto denied = [&](const std::string& why) {
    return Status::PermissionDenied(
        "controller: " + why +
        (options_.token.empty() ? DefaultTokenHint(!token->empty()) : std::string()));
  };
  SessionOpen open;
  open.name = options_.session;
  open.token = *token;
  open.weight = options_.weight;
  open.heartbeat_ms = options_.heartbeat_ms;
  open.sent_us = NowUs();
  if (!SendMessage(open)) return Status::Unavailable("cannot send to " + endpoints[at]);
  zmq::pollitem_t items[2] = {{socket_.handle(), 0, ZMQ_POLLIN, 0},
                              {handshakes.handle(), 0, ZMQ_POLLIN, 0}};
  const auto deadline = Deadline(options_.connect_timeout_ms);
  // With standbys: an endpoint that completes no handshake within
  // kTryEachMs (a standby waiting for the store listens on nothing) is left
  // for the next. One that did is a controller: it is waited for, as one
  // endpoint is, so that no second session is opened beside a slow first.
  bool reached = false;
  auto next_at = std::chrono::steady_clock::now() + std::chrono::milliseconds(kTryEachMs);
  // A controller that cannot take the session now (its job store cannot be
  // written) is asked again, less often each time, until the deadline, as
  // `hmpmd submit --wait` rides through a 503: a full disk is a pause.
  Status refused = Status::Ok();
  // time_point::max() means "not refused yet": an optional here trips
  // GCC 12's -Wmaybe-uninitialized at -O1.
  constexpr auto kNotRefused = std::chrono::steady_clock::time_point::max();
  auto ask_again_at = kNotRefused;
  std::chrono::milliseconds backoff{100};
  for (;;) {
    const auto now = std::chrono::steady_clock::now();
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - now);
    if (options_.connect_timeout_ms >= 0 && left.count() <= 0) break;
    // In slices of at most INT32_MAX ms, where zmq_poll's int timeout may
    // wrap (a saturated deadline is 292 years away).
    auto slice = std::min(left, std::chrono::milliseconds(INT32_MAX));
    const bool refused_before = ask_again_at != kNotRefused;
    const bool rotating = endpoints.size() > 1 && !reached;
    if (options_.connect_timeout_ms < 0 && !refused_before) slice = std::chrono::milliseconds(-1);
    if (rotating) {
      if (now >= next_at) {
        at = (at + 1) % endpoints.size();
        RETURN_IF_ERROR(connect());
        items[0].socket = socket_.handle();
        items[1].socket = handshakes.handle();
        open.sent_us = NowUs();
        if (!SendMessage(open)) return Status::Unavailable("cannot send to " + endpoints[at]);
        next_at = now + std::chrono::milliseconds(kTryEachMs);
      }
      const auto to_next = std::chrono::duration_cast<std::chrono::milliseconds>(next_at - now);
      slice = slice.count() < 0 ? to_next : std::min(slice, to_next);
    }
    if (refused_before) {
      slice = std::max(std::chrono::milliseconds(0),
                       std::min(slice, std::chrono::duration_cast<std::chrono::milliseconds>(
                                           ask_again_at - now)));
    }
    size_t ready = 0;
    try {
      ready = zmq::poll(items, 2, slice);
      if (items[1].revents & ZMQ_POLLIN) {
        const int event = NextMonitorEvent(handshakes, 0);
        if (event == ZMQ_EVENT_HANDSHAKE_SUCCEEDED) reached = true;
        if (event == ZMQ_EVENT_HANDSHAKE_FAILED_AUTH) {
          if (!options_.curve_server_key.empty()) {
            return Status::PermissionDenied("controller: this CURVE key is not authorized");
          }
          return denied("wrong or missing token");
        }
        if (!(items[0].revents & ZMQ_POLLIN)) continue;
      }
    } catch (const zmq::error_t& e) {
      // EINTR: a signal (Ctrl-C) came while this thread waited; its caller
      // decides what the signal means, so the wait ends here.
      const std::string why = e.num() == EINTR ? "interrupted by a signal" : e.what();
      return Status::Unavailable("connect to " + endpoints[at] + ": " + why +
                                 " while waiting for the controller");
    }
    if (ready == 0) {
      if (ask_again_at != kNotRefused && std::chrono::steady_clock::now() >= ask_again_at) {
        ask_again_at = kNotRefused;
        open.sent_us = NowUs();
        if (!SendMessage(open)) return Status::Unavailable("cannot send to " + endpoints[at]);
      }
      continue;
    }
    std::vector<zmq::message_t> parts;
    (void)zmq::recv_multipart(socket_, std::back_inserter(parts));
    if (parts.size() != 2) continue;
    auto msg = Decode(parts[0].to_string_view(), parts[1].to_string_view());
    if (!msg.ok() || !std::holds_alternative<SessionAck>(*msg)) continue;
    const SessionAck& ack = std::get<SessionAck>(*msg);
    reached = true;
    if (ack.job == 0) {
      const auto code = static_cast<StatusCode>(ack.code);
      const bool known = ack.code > 0 && code <= StatusCode::kAborted;
      if (code == StatusCode::kPermissionDenied) return denied(ack.error);
      Status status(known ? code : StatusCode::kInvalidArgument, "controller: " + ack.error);
      if (status.code() != StatusCode::kUnavailable) return status;
      refused = std::move(status);
      ask_again_at = std::chrono::steady_clock::now() + backoff;
      backoff = std::min(2 * backoff, std::chrono::milliseconds(1000));
      continue;
    }
    job_ = ack.job;
    data_token_ = ack.data_token;
    controller_ = endpoints[at];
    StopMonitor(socket_, handshakes);
    // Workers tell this session of its runs done there, a hop before the
    // controller's update; where it cannot bind, the update alone tells.
    if (options_.direct_done) {
      if (Result<PutServer*> server = DataServer(); server.ok()) notify_ = (*server)->endpoint();
    }
    io_ = std::thread([this] { Loop(); });
    return Status::Ok();
  }
  if (!refused.ok()) {
    return Status::Unavailable(refused.message() + " (asked again for " +
                               std::to_string(options_.connect_timeout_ms) + " ms)");
  }
  return Status::Unavailable("no controller answered at " + options_.controller + " within " +
                             std::to_string(options_.connect_timeout_ms) + " ms");
}

void Session::Configure(zmq::socket_t& s) {
  s.set(zmq::sockopt::linger, 0);
  s.set(zmq::sockopt::sndhwm, 0);
  s.set(zmq::sockopt::rcvhwm, 0);
  if (!options_.curve_server_key.empty()) {
    s.set(zmq::sockopt::curve_serverkey, options_.curve_server_key);
    s.set(zmq::sockopt::curve_publickey, options_.curve_public_key);
    s.set(zmq::sockopt::curve_secretkey, options_.curve_secret_key);
  } else {
    SetControlCredentials(s, token_);
  }
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
  const bool resumes = options_.resume_timeout_ms != 0;
  // A broken connection (the controller was killed) starts a resume at
  // once rather than after 10 periods of silence.
  zmq::socket_t watch;
  const auto watch_socket = [&] {
    if (!resumes) return;
    try {
      watch = MonitorHandshakes(ctx_, socket_, ZMQ_EVENT_DISCONNECTED);
    } catch (const zmq::error_t&) {
      watch = zmq::socket_t();  // silence still tells
    }
  };
  watch_socket();
  zmq::pollitem_t items[] = {{socket_.handle(), 0, ZMQ_POLLIN, 0},
                             {nullptr, wake_fd_, ZMQ_POLLIN, 0},
                             {watch ? watch.handle() : nullptr, 0, ZMQ_POLLIN, 0}};
  const int64_t heartbeat_us = int64_t{std::max(1u, options_.heartbeat_ms)} * 1000;
  int64_t last_sent = NowUs(), last_heard = last_sent;
  StallClock stalls;
  bool lost = false;
  bool broken = false;  // the connection broke (watch)
  while (!stop_) {
    try {
      zmq::poll(items, watch ? 3 : 2, std::chrono::milliseconds(options_.heartbeat_ms));
      if (watch && (items[2].revents & ZMQ_POLLIN)) {
        broken = NextMonitorEvent(watch, 0) == ZMQ_EVENT_DISCONNECTED || broken;
      }
      // A stall of this process (stopped, starved) is not the controller's
      // silence: it gets its periods again from the resume.
      const int64_t woke = NowUs();
      if (const int64_t stall = stalls.Observe(woke, heartbeat_us); stall > 0) {
        last_heard = StallClock::Credit(last_heard, stall, woke);
      }
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
      auto* u = std::get_if<SessionUpdate>(&*msg);
      if (u == nullptr) continue;
      // A controller that does not know this connection (restarted, or a
      // standby that took over, reached by the socket's own reconnect): the
      // session is taken up again, not ended.
      if (resumes && u->job == 0 && u->closed) {
        broken = true;
        continue;
      }
      HandleUpdate(*u);
    }
    int64_t now = NowUs();
    const bool silent = now - last_heard > kSilentPeriods * heartbeat_us;
    if (!lost && (silent || broken)) {
      // The controller answers every heartbeat: it is gone (killed, or
      // unreachable), or its connection broke. It is looked for again, and
      // failing that nothing would ever end the futures: fail them.
      std::string why =
          "the controller at " + controller_ +
          (silent ? " did not answer for " + std::to_string((now - last_heard) / 1000) + " ms"
                  : " closed the connection");
      broken = false;
      std::string not_resumed;
      // The old socket closes in Resume: its monitor stops first.
      StopMonitor(socket_, watch);
      items[2].socket = nullptr;
      if (resumes && Resume(why, &not_resumed)) {
        watch_socket();
        items[0].socket = socket_.handle();
        items[2].socket = watch ? watch.handle() : nullptr;
        now = last_heard = last_sent = NowUs();
        continue;
      }
      if (stop_) break;
      lost = true;
      SessionUpdate u;
      u.job = job_;
      u.closed = true;
      u.job_state = "lost";
      u.job_error = "driver session lost: " + why +
                    (not_resumed.empty() ? std::string() : "; " + not_resumed);
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
  // What was queued as the loop was told to stop: an abort whose close
  // gave up at once (best effort; the socket does not linger).
  Flush(NowUs());
  StopMonitor(socket_, watch);
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
  // The controller drops a message over its decode limits whole, with no
  // reply: a message ends before a group would take it over one (Submit
  // refused any group that is over one alone).
  const size_t max_tasks = std::min<size_t>(options_.max_batch, kWireLimits.max_batch);
  SessionSubmit submit;
  submit.job = job_;
  submit.notify = notify_;
  size_t tasks = 0, bytes = kSubmitHeadBytes;
  for (SubmitGroup& g : groups) {
    const size_t g_bytes = EncodedSize(g);
    if (!submit.groups.empty() &&
        (tasks + g.tasks.size() > max_tasks || bytes + g_bytes > kWireLimits.max_body_bytes ||
         submit.groups.size() >= kWireLimits.max_batch)) {
      SendSubmit(submit);
      tasks = 0;
      bytes = kSubmitHeadBytes;
    }
    tasks += g.tasks.size();
    bytes += g_bytes;
    submit.groups.push_back(std::move(g));
  }
  if (!submit.groups.empty()) SendSubmit(submit);
  // Releases and cancels in parts of at most max_batch each (dropping 70,000
  // Futures at once made one list over it); the close goes with the last.
  size_t released = 0, cancelled = 0;
  while (released < control.release.size() || cancelled < control.cancel.size() ||
         control.close != SessionControl::kKeepOpen) {
    SessionControl part;
    part.job = job_;
    part.sent_us = now_us;
    auto take = [](const std::vector<uint32_t>& from, size_t* at, std::vector<uint32_t>* to) {
      const size_t n = std::min(from.size() - *at, kWireLimits.max_batch);
      to->assign(from.begin() + static_cast<ptrdiff_t>(*at),
                 from.begin() + static_cast<ptrdiff_t>(*at + n));
      *at += n;
    };
    take(control.release, &released, &part.release);
    take(control.cancel, &cancelled, &part.cancel);
    if (released == control.release.size() && cancelled == control.cancel.size()) {
      part.close = std::exchange(control.close, SessionControl::kKeepOpen);
    }
    SendMessage(part);
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
      if (auto kept = unstored_.find(ack.seq); kept != unstored_.end()) {
        kept->second.first = ack.error.empty() ? int64_t{ack.first_task} : Unstored::kRefused;
      }
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
        if (tasks_.size() <= index) {
          tasks_.resize(index + 1);
          ended_at_.resize(index + 1);
        }
        tasks_[index] = members[i];
        if (f) {
          f->index = index;
        } else {
          release_.push_back(index);  // dropped before its ack
        }
        if (auto early = early_done_.find(index); early != early_done_.end()) {
          ApplyRunDone(early->second.first, early->second.second, &keep);
          early_done_.erase(early);
        }
      }
    }
    for (TaskEnded& e : u.ended) {
      if (e.task >= tasks_.size()) continue;
      std::shared_ptr<FutureState> f = tasks_[e.task].lock();
      if (f) keep.push_back(f);
      if (f && Ended(*f)) {
        // Done again: its outputs were rebuilt elsewhere after their worker
        // died (a consumer needed them), or a resume tells where they are;
        // Get() fetches them from there.
        if (f->phase == FutureState::Phase::kDone && e.state == TaskEnded::kDone &&
            !e.endpoint.empty()) {
          f->endpoint = std::move(e.endpoint);
          f->bytes = e.output_bytes;
          f->buffers = e.output_buffers;
        }
        continue;
      }
      // A resume tells every end again, those of dropped Futures too.
      if (!ended_at_[e.task]) {
        ended_at_[e.task] = true;
        ++ended_;
      }
      if (!f) continue;
      f->phase = e.state == TaskEnded::kDone     ? FutureState::Phase::kDone
                 : e.state == TaskEnded::kFailed ? FutureState::Phase::kFailed
                                                 : FutureState::Phase::kCancelled;
      f->error = std::move(e.error);
      f->endpoint = std::move(e.endpoint);
      f->bytes = e.output_bytes;
      f->buffers = e.output_buffers;
    }
    UnpinEndedPuts(&keep);
    // What the store holds need not be kept for a resume.
    unstored_.erase(unstored_.begin(), unstored_.upper_bound(u.stored_seq));
    if (u.closed && !closed_) {
      closed_ = true;
      final_ =
          u.job_state == "succeeded"
              ? Status::Ok()
              : Status::Aborted("session '" + options_.session + "' (job " + std::to_string(job_) +
                                ") " + u.job_state + ": " + u.job_error);
      const std::string why = u.job_state == "lost"
                                  ? u.job_error
                                  : "the session ended (" + u.job_state +
                                        (u.job_error.empty() ? std::string() : ": " + u.job_error) +
                                        ")";
      end_why_ = why;
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

}  // namespace hmpmd::client::internal
