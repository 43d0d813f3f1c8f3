#include "hmpmd/client/fetch.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <iterator>
#include <zmq.hpp>
#include <zmq_addon.hpp>

#include "hmpmd/protocol/data_auth.h"
#include "hmpmd/protocol/data_frames.h"

namespace hmpmd::client {
namespace {

// Whether a TCP connection to `endpoint` (tcp://IPV4:PORT) is refused now:
// nothing listens there. A worker's data port is its own for its whole life
// (a port the kernel picked), so a refusal means the worker that held the
// outputs is gone, and waiting out the fetch's timeout would tell no more.
// Anything but a refusal (no route in a partition, a silent host, a name)
// is not one: the fetch waits on.
bool ConnectionRefused(const std::string& endpoint) {
  const size_t colon = endpoint.rfind(':');
  if (!endpoint.starts_with("tcp://") || colon == std::string::npos || colon < 6) return false;
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  const std::string host = endpoint.substr(6, colon - 6);
  uint16_t port = 0;
  const char* end = endpoint.data() + endpoint.size();
  if (::inet_pton(AF_INET, host.c_str(), &addr.sin_addr) != 1 ||
      std::from_chars(endpoint.data() + colon + 1, end, port).ptr != end || port == 0) {
    return false;
  }
  addr.sin_port = htons(port);
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) return false;
  int err = 0;
  if (::connect(fd, reinterpret_cast<const sockaddr*>(&addr), sizeof(addr)) != 0) {
    err = errno;
    pollfd p{fd, POLLOUT, 0};
    if (err == EINPROGRESS && ::poll(&p, 1, 200) == 1) {
      socklen_t len = sizeof(err);
      if (::getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len) != 0) err = 0;
    }
  }
  ::close(fd);
  return err == ECONNREFUSED;
}

}  // namespace

Result<std::vector<Buffer>> FetchOutputs(const std::string& endpoint, const DataToken& token,
                                         JobId job, uint32_t run, int64_t timeout_ms) {
  // One context per process for fetches: cheap to share, costly to create.
  static zmq::context_t* ctx = new zmq::context_t(1);
  const std::string what =
      "fetch of job " + std::to_string(job) + " run " + std::to_string(run) + " from " + endpoint;
  try {
    const auto start = std::chrono::steady_clock::now();
    zmq::socket_t s(*ctx, zmq::socket_type::dealer);
    s.set(zmq::sockopt::linger, 0);
    s.set(zmq::sockopt::rcvhwm, 0);
    SetDataCredentials(s, token, job);
    // The worker lets in only a peer with its token, in the handshake: a
    // refusal shows on this monitor (ZeroMQ alone would retry silently).
    zmq::socket_t events = MonitorHandshakes(*ctx, s, ZMQ_EVENT_CONNECT_RETRIED);
    MonitorStop stop_events(s, events);
    s.connect(endpoint);
    DataHeader h;
    h.op = static_cast<uint8_t>(DataOp::kFetch);
    h.key = job;
    h.run = run;
    h.token = token;
    s.send(zmq::buffer(&h, sizeof(h)), zmq::send_flags::none);
    // Past INT32_MAX ms (24 days) zmq_poll's int timeout may wrap: no limit.
    const bool forever = timeout_ms < 0 || timeout_ms > INT32_MAX;
    for (;;) {
      const int64_t spent = std::chrono::duration_cast<std::chrono::milliseconds>(
                                std::chrono::steady_clock::now() - start)
                                .count();
      const int64_t poll_ms = forever ? -1 : std::max<int64_t>(0, timeout_ms - spent);
      zmq::pollitem_t items[] = {{s.handle(), 0, ZMQ_POLLIN, 0},
                                 {events.handle(), 0, ZMQ_POLLIN, 0}};
      if (zmq::poll(items, 2, std::chrono::milliseconds(poll_ms)) == 0) {
        return Status::Unavailable(what + ": no answer within " + std::to_string(timeout_ms) +
                                   " ms");
      }
      if (items[0].revents & ZMQ_POLLIN) break;
      const int event = NextMonitorEvent(events, 0);
      if (event == ZMQ_EVENT_HANDSHAKE_FAILED_AUTH) {
        return Status::PermissionDenied(what + ": " + std::string(kWrongDataTokenMessage));
      }
      if (event == ZMQ_EVENT_CONNECT_RETRIED && ConnectionRefused(endpoint)) {
        return Status::Unavailable(what +
                                   ": connection refused: the worker that held them is "
                                   "gone, and its outputs with it");
      }
    }
    std::vector<zmq::message_t> parts;
    (void)zmq::recv_multipart(s, std::back_inserter(parts));
    std::vector<FrameView> frames;
    frames.reserve(parts.size());
    for (const zmq::message_t& m : parts) frames.push_back({m.data(), m.size()});
    return DecodeFetchReply(frames, what);
  } catch (const zmq::error_t& e) {
    return Status::Unavailable(what + ": " + e.what());
  }
}

}  // namespace hmpmd::client
