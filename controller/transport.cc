#include "hmpmd/controller/transport.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <spdlog/spdlog.h>
#include <sys/socket.h>

#include <cstring>

#include "hmpmd/protocol/codec.h"
#include "hmpmd/protocol/control_auth.h"

namespace hmpmd {
namespace {
// Above the largest body Decode() takes: a header or identity frame is small.
constexpr size_t kMaxMessageSlack = 4096;
}  // namespace

Transport::Transport(zmq::context_t* ctx) : socket_(*ctx, zmq::socket_type::router), ctx_(ctx) {
  socket_.set(zmq::sockopt::linger, 0);
  socket_.set(zmq::sockopt::sndhwm, 0);  // a batch must never be dropped silently
  socket_.set(zmq::sockopt::rcvhwm, 0);
  socket_.set(zmq::sockopt::router_mandatory, 1);  // unknown peer -> error, not silence
  // Decode() drops a body over max_body_bytes anyway; without a cap libzmq
  // first buffered whatever size a peer announced (anyone who reaches the
  // port: 910 MiB from three connections). A peer that sends more is
  // disconnected by libzmq.
  socket_.set(zmq::sockopt::maxmsgsize,
              static_cast<int64_t>(DecodeLimits{}.max_body_bytes + kMaxMessageSlack));
  // Every peer passes the ZAP handler before it sends anything (see
  // control_auth.h); EnableCurveServer makes it a CURVE server instead.
  MakeControlServer(socket_);
}

Status Transport::EnableCurveServer(const std::string& secret_z85) {
  try {
    socket_.set(zmq::sockopt::curve_server, 1);
    socket_.set(zmq::sockopt::curve_secretkey, secret_z85);
    socket_.set(zmq::sockopt::zap_domain, kControlZapDomain);
    return Status::Ok();
  } catch (const zmq::error_t& e) {
    return Status::InvalidArgument(std::string("curve server: ") + e.what());
  }
}

Status Transport::Bind(const std::string& endpoint) {
  try {
    std::string ep = endpoint;
    // "tcp://host:0" means any free port, as with sockets.
    if (ep.size() > 2 && ep.compare(ep.size() - 2, 2, ":0") == 0) ep.replace(ep.size() - 1, 1, "*");
    socket_.bind(ep);
    endpoint_ = socket_.get(zmq::sockopt::last_endpoint);
    return Status::Ok();
  } catch (const zmq::error_t& e) {
    return Status::Unavailable("listen " + endpoint + ": " + e.what());
  }
}

Status Transport::WatchDisconnects() {
  // One name per Transport: several controllers may share a process.
  const std::string endpoint =
      "inproc://hmpmd-router-monitor-" + std::to_string(reinterpret_cast<uintptr_t>(this));
  if (zmq_socket_monitor(socket_.handle(), endpoint.c_str(),
                         ZMQ_EVENT_DISCONNECTED | ZMQ_EVENT_HANDSHAKE_FAILED_PROTOCOL) != 0) {
    return Status::Internal(std::string("monitoring the controller socket: ") +
                            zmq_strerror(zmq_errno()));
  }
  try {
    monitor_ = zmq::socket_t(*ctx_, zmq::socket_type::pair);
    monitor_.set(zmq::sockopt::linger, 0);
    monitor_.connect(endpoint);
  } catch (const zmq::error_t& e) {
    return Status::Internal(std::string("monitoring the controller socket: ") + e.what());
  }
  return Status::Ok();
}

size_t Transport::TakeDisconnected(std::vector<std::string>* out) {
  size_t failed_handshakes = 0;
  if (!monitor_) return failed_handshakes;
  for (int i = 0; i < 4096; ++i) {
    zmq::message_t event, address;
    try {
      if (!monitor_.recv(event, zmq::recv_flags::dontwait)) break;
      if (event.more()) (void)monitor_.recv(address, zmq::recv_flags::none);
    } catch (const zmq::error_t&) {
      break;
    }
    // libzmq's event frame: a 16-bit event and a 32-bit value (the fd).
    if (event.size() < 6) continue;
    uint16_t what = 0;
    uint32_t fd = 0;
    std::memcpy(&what, event.data(), sizeof what);
    std::memcpy(&fd, static_cast<const char*>(event.data()) + 2, sizeof fd);
    if (what == ZMQ_EVENT_HANDSHAKE_FAILED_PROTOCOL) ++failed_handshakes;
    if (what != ZMQ_EVENT_DISCONNECTED) continue;
    auto it = fd_identity_.find(static_cast<int>(fd));
    if (it == fd_identity_.end()) continue;
    identity_fd_.erase(it->second);
    out->push_back(std::move(it->second));
    fd_identity_.erase(it);
  }
  return failed_handshakes;
}

std::string Transport::PeerAddress(const std::string& identity) const {
  auto it = identity_fd_.find(identity);
  if (it == identity_fd_.end()) return "";
  sockaddr_storage a{};
  socklen_t len = sizeof a;
  if (::getpeername(it->second, reinterpret_cast<sockaddr*>(&a), &len) != 0) return "";
  char host[INET6_ADDRSTRLEN] = "";
  uint16_t port = 0;
  if (a.ss_family == AF_INET) {
    const auto* v4 = reinterpret_cast<const sockaddr_in*>(&a);
    ::inet_ntop(AF_INET, &v4->sin_addr, host, sizeof host);
    port = ntohs(v4->sin_port);
    return std::string(host) + ":" + std::to_string(port);
  }
  if (a.ss_family == AF_INET6) {
    const auto* v6 = reinterpret_cast<const sockaddr_in6*>(&a);
    ::inet_ntop(AF_INET6, &v6->sin6_addr, host, sizeof host);
    port = ntohs(v6->sin6_port);
    return "[" + std::string(host) + "]:" + std::to_string(port);
  }
  return "";  // ipc://, inproc://
}

bool Transport::Reachable(const std::string& identity) { return Send(identity, HeartbeatAck{}); }

void Transport::NoteConnection(const zmq::message_t& frame, const std::string& identity) {
  const int fd = const_cast<zmq::message_t&>(frame).get(ZMQ_SRCFD);
  if (fd < 0) return;
  auto mine = identity_fd_.find(identity);
  if (mine != identity_fd_.end() && mine->second == fd) return;
  if (mine != identity_fd_.end()) fd_identity_.erase(mine->second);
  // The kernel gave a closed connection's descriptor to this one.
  if (auto old = fd_identity_.find(fd); old != fd_identity_.end() && old->second != identity) {
    identity_fd_.erase(old->second);
  }
  identity_fd_[identity] = fd;
  fd_identity_[fd] = identity;
}

bool Transport::Receive(std::optional<Incoming>* out) {
  out->reset();
  // Read every frame of one message before judging it, so a bad message
  // never leaves frames behind to be misread as the next one.
  zmq::message_t frames[3];
  size_t count = 0;
  try {
    zmq::message_t part;
    if (!socket_.recv(part, zmq::recv_flags::dontwait)) return false;
    while (true) {
      bool more = part.more();
      if (count < 3) frames[count] = std::move(part);
      ++count;
      if (!more) break;
      if (!socket_.recv(part, zmq::recv_flags::none)) break;
    }
  } catch (const zmq::error_t& e) {
    last_error_ = e.what();
    ++dropped_;
    return true;
  }
  ++received_;
  if (count != 3) {
    ++dropped_;
    last_error_ = "expected 3 frames, got " + std::to_string(count);
    return true;
  }
  auto decoded = Decode(frames[1].to_string_view(), frames[2].to_string_view());
  if (!decoded.ok()) {
    ++dropped_;
    last_error_ = decoded.status().message();
    SPDLOG_DEBUG("dropped a frame: {}", last_error_);
    return true;
  }
  out->emplace(Incoming{frames[0].to_string(), std::move(decoded).value()});
  if (monitor_) NoteConnection(frames[1], (*out)->identity);
  return true;
}

bool Transport::SendEncoded(const std::string& identity, const std::string& header,
                            const std::string& body) {
  try {
    socket_.send(zmq::buffer(identity), zmq::send_flags::sndmore);
    socket_.send(zmq::buffer(header), zmq::send_flags::sndmore);
    socket_.send(zmq::buffer(body), zmq::send_flags::none);
    return true;
  } catch (const zmq::error_t& e) {
    last_error_ = e.what();
    return false;
  }
}

bool Transport::Send(const std::string& identity, const Message& message) {
  body_scratch_.clear();
  EncodeBody(message, &body_scratch_);
  return SendEncoded(identity, EncodeHeader(TypeOf(message)), body_scratch_);
}

}  // namespace hmpmd
