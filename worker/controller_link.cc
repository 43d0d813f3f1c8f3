#include "controller_link.h"

#include <zmq.h>

#include <algorithm>
#include <cerrno>
#include <span>
#include <utility>

#include "hmpmd/protocol/address_list.h"
#include "hmpmd/protocol/control_auth.h"
#include "hmpmd/protocol/data_auth.h"

namespace hmpmd::worker {
namespace {

// Queue bounds, in messages. A batch is one message, so these hold far more
// work than a worker is ever sent at once.
constexpr int kSendHwm = 10000;
constexpr int kRecvHwm = 10000;

std::span<const std::byte> Bytes(const zmq::message_t& m) {
  return {static_cast<const std::byte*>(m.data()), m.size()};
}

Status FromZmq(const char* what, const zmq::error_t& e) {
  const int code = e.num();
  std::string msg = std::string(what) + ": " + e.what();
  if (code == EINVAL || code == EPROTONOSUPPORT || code == ENOCOMPATPROTO) {
    return Status::InvalidArgument(std::move(msg));
  }
  return Status::Internal(std::move(msg));
}

}  // namespace

ControllerLink::ControllerLink(const std::string& endpoints)
    : endpoints_(SplitAddresses(endpoints)), context_(1) {}

ControllerLink::~ControllerLink() {
  CloseSocket();
  context_.close();
}

void ControllerLink::CloseSocket() {
  if (socket_ && monitor_) StopMonitor(*socket_, *monitor_);
  monitor_.reset();
  socket_.reset();  // LINGER 0: closing never blocks
}

Status ControllerLink::Connect() {
  try {
    CloseSocket();
    socket_.emplace(context_, zmq::socket_type::dealer);
    socket_->set(zmq::sockopt::linger, 0);
    socket_->set(zmq::sockopt::sndhwm, kSendHwm);
    socket_->set(zmq::sockopt::rcvhwm, kRecvHwm);
    if (!curve_server_.empty()) {
      socket_->set(zmq::sockopt::curve_serverkey, curve_server_);
      socket_->set(zmq::sockopt::curve_publickey, curve_public_);
      socket_->set(zmq::sockopt::curve_secretkey, curve_secret_);
    } else {
      SetControlCredentials(*socket_, token_);
    }
    // With standbys, a closed connection is the cue to try the next one.
    monitor_.emplace(
        MonitorHandshakes(context_, *socket_, endpoints_.size() > 1 ? ZMQ_EVENT_DISCONNECTED : 0));
    disconnected_ = false;
    socket_->connect(endpoint());
  } catch (const zmq::error_t& e) {
    CloseSocket();
    return FromZmq(("controller endpoint '" + endpoint() + "'").c_str(), e);
  }
  return Status::Ok();
}

Result<ControllerLink::Ready> ControllerLink::Poll(int wake_fd, int timeout_ms) {
  if (!socket_) return Status::Internal("poll: not connected");
  zmq_pollitem_t items[2] = {
      {socket_->handle(), 0, ZMQ_POLLIN, 0},
      {nullptr, wake_fd, ZMQ_POLLIN, 0},
  };
  // The C call, not cppzmq's zmq::poll: EINTR is a normal outcome here.
  if (zmq_poll(items, 2, timeout_ms) < 0) {
    if (zmq_errno() == EINTR) return Ready{};
    return Status::Internal(std::string("zmq_poll: ") + zmq_strerror(zmq_errno()));
  }
  return Ready{(items[0].revents & ZMQ_POLLIN) != 0, (items[1].revents & ZMQ_POLLIN) != 0};
}

Result<std::optional<Message>> ControllerLink::TryRecv() {
  if (!socket_) return Status::Internal("recv: not connected");
  try {
    if (!socket_->recv(header_, zmq::recv_flags::dontwait)) return std::optional<Message>();
    if (!header_.more()) return Status::Corruption("frames: one frame, expected header and body");
    // The rest of a multipart message is already here once its first frame
    // is, so these reads do not wait.
    (void)socket_->recv(body_, zmq::recv_flags::none);
    if (body_.more()) {
      size_t frames = 2;
      do {
        (void)socket_->recv(extra_, zmq::recv_flags::none);
        ++frames;
      } while (extra_.more());
      return Status::Corruption("frames: " + std::to_string(frames) +
                                " frames, expected header and body");
    }
  } catch (const zmq::error_t& e) {
    if (e.num() == EINTR) return std::optional<Message>();
    return FromZmq("recv", e);
  }
  Result<Message> decoded = Decode(Bytes(header_), Bytes(body_));
  if (!decoded.ok()) return decoded.status();
  return std::optional<Message>(std::move(decoded).value());
}

bool ControllerLink::ReadEvents() {
  if (!monitor_) return false;
  bool refused = false;
  try {
    // Bounded: a socket that retries every 100 ms makes a few per second.
    for (int i = 0; i < 64; ++i) {
      const int event = NextMonitorEvent(*monitor_, 0);
      if (event == 0) break;
      if (event == ZMQ_EVENT_HANDSHAKE_FAILED_AUTH) refused = true;
      if (event == ZMQ_EVENT_DISCONNECTED) disconnected_ = true;
    }
  } catch (const zmq::error_t&) {
    // A monitor that fails says nothing; the registration times out instead.
  }
  return refused;
}

bool ControllerLink::HandshakeRefused() { return ReadEvents(); }

bool ControllerLink::Disconnected() {
  (void)ReadEvents();
  return std::exchange(disconnected_, false);
}

Status ControllerLink::Send(const Message& message) {
  if (!socket_) return Status::Internal("send: not connected");
  const std::string header = EncodeHeader(TypeOf(message));
  encoded_.clear();
  EncodeBody(message, &encoded_);
  try {
    if (!socket_->send(zmq::buffer(header), zmq::send_flags::sndmore | zmq::send_flags::dontwait)) {
      return Status::Unavailable(std::string("send queue to the controller is full; dropped ") +
                                 std::string(MsgTypeName(TypeOf(message))));
    }
    // Once the first frame is queued, ZeroMQ takes the rest of the message.
    (void)socket_->send(zmq::buffer(encoded_), zmq::send_flags::dontwait);
  } catch (const zmq::error_t& e) {
    return FromZmq("send", e);
  }
  return Status::Ok();
}

}  // namespace hmpmd::worker
