#include "hmpmd/client/fetch.h"

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <zmq.hpp>

#include "hmpmd/protocol/data_auth.h"
#include "hmpmd/protocol/data_frames.h"

namespace hmpmd::client {

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
    SetDataCredentials(s, token);
    // The worker lets in only a peer with its token, in the handshake: a
    // refusal shows on this monitor (ZeroMQ alone would retry silently).
    zmq::socket_t events = MonitorHandshakes(*ctx, s);
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
      if (NextMonitorEvent(events, 0) == ZMQ_EVENT_HANDSHAKE_FAILED_AUTH) {
        return Status::PermissionDenied(what + ": " + std::string(kWrongDataTokenMessage));
      }
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

}  // namespace hmpmd::client
