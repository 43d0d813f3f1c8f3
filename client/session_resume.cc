// Session's resume: after its controller was lost (killed, restarted, a
// standby took over, or the link broke), the I/O thread takes the session
// up again on a new connection and sends what the controller may not have
// kept. The rest of the I/O thread is in session_io.cc.
#include <zmq.h>

#include <algorithm>
#include <chrono>
#include <iterator>
#include <variant>
#include <zmq_addon.hpp>

#include "hmpmd/protocol/address_list.h"
#include "hmpmd/protocol/codec.h"
#include "hmpmd/protocol/data_auth.h"
#include "session.h"

namespace hmpmd::client::internal {

void Session::SendSubmit(SessionSubmit& submit) {
  // Moved into the Message and out again: a SessionSubmit converted to one
  // was copied whole, every task's arguments included.
  Message m(std::move(submit));
  SendMessage(m);
  SessionSubmit& sent = std::get<SessionSubmit>(m);
  if (options_.resume_timeout_ms != 0) {
    for (SubmitGroup& g : sent.groups) unstored_[g.seq].group = std::move(g);
  }
  submit = SessionSubmit{};
  submit.job = job_;
  submit.notify = notify_;
}

bool Session::Resume(const std::string& lost, std::string* why) {
  using Clock = std::chrono::steady_clock;
  const std::vector<std::string> endpoints = SplitAddresses(options_.controller);
  // The same controller first: restarted, it comes back there.
  size_t at = static_cast<size_t>(std::find(endpoints.begin(), endpoints.end(), controller_) -
                                  endpoints.begin());
  if (at >= endpoints.size()) at = 0;
  SessionOpen open;
  open.name = options_.session;
  open.token = token_;
  open.weight = options_.weight;
  open.heartbeat_ms = options_.heartbeat_ms;
  open.resume = job_;
  open.resume_token = data_token_;
  {
    std::lock_guard lock(mu_);
    // Acks come in order: every group below the first unacknowledged one.
    uint64_t first_unacked = next_seq_;
    if (!unacked_.empty()) first_unacked = std::min(first_unacked, unacked_.begin()->first);
    if (!actor_seq_.empty()) first_unacked = std::min(first_unacked, actor_seq_.begin()->first);
    open.acked_seq = first_unacked - 1;
  }
  const auto deadline = Deadline(options_.resume_timeout_ms);
  std::string last = lost;
  constexpr int64_t kFirstTryMs = 200;
  int tries = 0;  // endpoints tried
  while (!stop_ && Clock::now() < deadline) {
    zmq::socket_t s(ctx_, zmq::socket_type::dealer);
    zmq::socket_t handshakes;
    MonitorStop stop_handshakes(s, handshakes);
    try {
      Configure(s);
      handshakes = MonitorHandshakes(ctx_, s);
      s.connect(endpoints[at]);
    } catch (const zmq::error_t& e) {
      *why = "cannot connect to " + endpoints[at] + ": " + e.what();
      return false;
    }
    const auto send_open = [&] {
      open.sent_us = NowUs();
      EncodedFrames f = Encode(Message(open));
      try {
        (void)s.send(zmq::buffer(f.header), zmq::send_flags::sndmore);
        (void)s.send(zmq::buffer(f.body), zmq::send_flags::none);
      } catch (const zmq::error_t&) {
      }
    };
    send_open();
    // An endpoint that completes no handshake in time (a standby still
    // waiting for the store listens on nothing) is left for the next; one
    // that did is waited for (a restarted controller answers once its
    // workers are back). The first round is short: the controller that
    // takes over listens within a moment of the loss, and a whole second
    // on the dead one delayed every takeover by as much.
    bool reached = false;
    int connections = 0;  // handshakes this socket completed
    const int64_t try_ms = std::min<int64_t>(kTryEachMs, kFirstTryMs << std::min(tries++, 4));
    const auto next_at = Clock::now() + std::chrono::milliseconds(try_ms);
    Clock::time_point ask_again_at = Clock::time_point::max();
    zmq::pollitem_t items[2] = {{s.handle(), 0, ZMQ_POLLIN, 0},
                                {handshakes.handle(), 0, ZMQ_POLLIN, 0}};
    while (!stop_) {
      const auto now = Clock::now();
      if (now >= deadline || (!reached && endpoints.size() > 1 && now >= next_at)) break;
      if (now >= ask_again_at) {
        ask_again_at = Clock::time_point::max();
        send_open();
      }
      try {
        // Short slices: Close() may stop this thread meanwhile.
        zmq::poll(items, 2, std::chrono::milliseconds(100));
        if (items[1].revents & ZMQ_POLLIN) {
          const int event = NextMonitorEvent(handshakes, 0);
          if (event == ZMQ_EVENT_HANDSHAKE_SUCCEEDED) {
            // A new connection of this socket: the controller it reached
            // before died holding the open (killed again while it waited
            // for its workers), and this one never heard it.
            if (++connections > 1) send_open();
            reached = true;
          }
          if (event == ZMQ_EVENT_HANDSHAKE_FAILED_AUTH) {
            *why = "the controller at " + endpoints[at] + " refused the credentials";
            return false;
          }
        }
        if (!(items[0].revents & ZMQ_POLLIN)) continue;
      } catch (const zmq::error_t& e) {
        if (e.num() == EINTR) continue;
        *why = std::string("poll: ") + e.what();
        return false;
      }
      std::vector<zmq::message_t> parts;
      (void)zmq::recv_multipart(s, std::back_inserter(parts));
      if (parts.size() != 2) continue;
      auto msg = Decode(parts[0].to_string_view(), parts[1].to_string_view());
      const auto* ack = msg.ok() ? std::get_if<SessionAck>(&*msg) : nullptr;
      if (ack == nullptr) continue;
      reached = true;
      if (ack->job == job_) {
        StopMonitor(s, handshakes);  // before s moves: the guard cannot then
        socket_ = std::move(s);
        controller_ = endpoints[at];
        Replay(ack->resumed_seq);
        return true;
      }
      // Its store cannot be written now: asked again, as Start() does.
      if (static_cast<StatusCode>(ack->code) == StatusCode::kUnavailable) {
        last = "the controller at " + endpoints[at] + ": " + ack->error;
        ask_again_at = Clock::now() + std::chrono::milliseconds(200);
        continue;
      }
      *why = "the controller at " + endpoints[at] + " did not resume it: " + ack->error;
      return false;
    }
    at = (at + 1) % endpoints.size();
  }
  *why = "not resumed within " + std::to_string(options_.resume_timeout_ms) + " ms" +
         (last == lost ? std::string() : " (" + last + ")");
  return false;
}

void Session::Replay(uint64_t resumed_seq) {
  {
    std::lock_guard lock(mu_);
    // Groups the controller does not hold go again, before what is queued;
    // those it acknowledged are acknowledged anew (it may now refuse one).
    std::vector<SubmitGroup> again;
    for (auto it = unstored_.upper_bound(resumed_seq); it != unstored_.end(); ++it) {
      Unstored& u = it->second;
      if (u.first == Unstored::kRefused) continue;
      if (u.first >= 0 && !unacked_.count(it->first)) {
        std::vector<std::weak_ptr<FutureState>>& members = unacked_[it->first];
        for (size_t i = 0; i < u.group.tasks.size(); ++i) {
          const size_t index = static_cast<size_t>(u.first) + i;
          members.push_back(index < tasks_.size() ? tasks_[index] : std::weak_ptr<FutureState>());
          if (auto f = members.back().lock()) f->index = -1;
        }
      }
      again.push_back(std::move(u.group));
    }
    unstored_.clear();
    outbox_.insert(outbox_.begin(), std::make_move_iterator(again.begin()),
                   std::make_move_iterator(again.end()));
    // Releases the controller may not have stored: every ended run whose
    // Future is gone (a second release is ignored).
    for (size_t i = 0; i < tasks_.size(); ++i) {
      if (ended_at_[i] && tasks_[i].expired()) release_.push_back(static_cast<uint32_t>(i));
    }
    if (closing_ && !closed_ && close_ == SessionControl::kKeepOpen) {
      close_ = aborted_ ? SessionControl::kAbort : SessionControl::kClose;
    }
  }
  Wake();
}

}  // namespace hmpmd::client::internal
