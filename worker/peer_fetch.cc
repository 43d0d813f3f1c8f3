#include "peer_fetch.h"

#include <algorithm>
#include <atomic>
#include <cstring>
#include <vector>

#include "data_frames.h"
#include "hmpmd/worker/fetch.h"

namespace hmpmd::worker {
namespace {

// How long a fetch waits to connect to the peer (loopback or LAN: far less).
constexpr int64_t kConnectTimeoutMs = 3000;

// Names each fetch's monitor endpoint apart.
std::atomic<uint64_t> monitor_seq{0};

}  // namespace

Result<BufferList> FetchFromPeer(zmq::context_t* ctx, const std::string& endpoint, JobId job,
                                 uint32_t run, int64_t timeout_us) {
  const std::string what =
      "fetch of job " + std::to_string(job) + " run " + std::to_string(run) + " from " + endpoint;
  try {
    zmq::socket_t s(*ctx, zmq::socket_type::dealer);
    s.set(zmq::sockopt::linger, 0);
    s.set(zmq::sockopt::rcvhwm, 0);
    // The request waits for a connection, not for the whole timeout: a dead
    // peer (connection refused, retried forever by ZeroMQ) fails the fetch
    // within kConnectTimeoutMs, and the controller rebuilds the input.
    s.set(zmq::sockopt::immediate, 1);
    s.set(zmq::sockopt::sndtimeo,
          static_cast<int>(std::min<int64_t>(kConnectTimeoutMs, (timeout_us + 999) / 1000)));
    // A peer that dies after taking the request closes the connection: the
    // monitor reports it, and the fetch fails then instead of at the timeout.
    const std::string monitor = "inproc://hmpmd-fetch-" + std::to_string(monitor_seq++);
    if (zmq_socket_monitor(s.handle(), monitor.c_str(), ZMQ_EVENT_DISCONNECTED) != 0) {
      return Status::Unavailable(what + ": monitor: " + zmq_strerror(zmq_errno()));
    }
    zmq::socket_t events(*ctx, zmq::socket_type::pair);
    events.set(zmq::sockopt::linger, 0);
    events.connect(monitor);
    s.connect(endpoint);
    DataHeader h;
    h.op = static_cast<uint8_t>(DataOp::kFetch);
    h.key = job;
    h.run = run;
    if (!s.send(zmq::buffer(&h, sizeof(h)), zmq::send_flags::none)) {
      return Status::Unavailable(what + ": cannot connect within " +
                                 std::to_string(kConnectTimeoutMs) + " ms");
    }
    zmq::pollitem_t items[] = {{s.handle(), 0, ZMQ_POLLIN, 0}, {events.handle(), 0, ZMQ_POLLIN, 0}};
    if (zmq::poll(items, 2, std::chrono::milliseconds((timeout_us + 999) / 1000)) == 0) {
      return Status::Unavailable(what + ": no answer within " + std::to_string(timeout_us / 1000) +
                                 " ms");
    }
    if (!(items[0].revents & ZMQ_POLLIN)) {
      return Status::Unavailable(what + ": the peer closed the connection");
    }
    std::vector<zmq::message_t> parts;
    do {
      zmq::message_t m;
      (void)s.recv(m);
      parts.push_back(std::move(m));
    } while (parts.back().more());
    std::vector<FrameView> frames;
    frames.reserve(parts.size());
    for (const zmq::message_t& m : parts) frames.push_back({m.data(), m.size()});
    return DecodeFetchReply(frames, what);
  } catch (const zmq::error_t& e) {
    return Status::Unavailable(what + ": " + e.what());
  }
}

Result<std::vector<Buffer>> FetchOutputs(const std::string& endpoint, JobId job, uint32_t run,
                                         int64_t timeout_ms) {
  zmq::context_t ctx(1);
  return FetchFromPeer(&ctx, endpoint, job, run, timeout_ms * 1000);
}

}  // namespace hmpmd::worker
