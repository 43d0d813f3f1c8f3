#include "hmpmd/client/fetch.h"

#include <chrono>
#include <cstdint>
#include <cstring>
#include <zmq.hpp>

#include "hmpmd/protocol/data_frames.h"

namespace hmpmd::client {

Result<std::vector<Buffer>> FetchOutputs(const std::string& endpoint, const DataToken& token,
                                         JobId job, uint32_t run, int64_t timeout_ms) {
  // One context per process for fetches: cheap to share, costly to create.
  static zmq::context_t* ctx = new zmq::context_t(1);
  const std::string what =
      "fetch of job " + std::to_string(job) + " run " + std::to_string(run) + " from " + endpoint;
  try {
    zmq::socket_t s(*ctx, zmq::socket_type::dealer);
    s.set(zmq::sockopt::linger, 0);
    s.set(zmq::sockopt::rcvhwm, 0);
    s.connect(endpoint);
    DataHeader h;
    h.op = static_cast<uint8_t>(DataOp::kFetch);
    h.key = job;
    h.run = run;
    h.token = token;
    s.send(zmq::buffer(&h, sizeof(h)), zmq::send_flags::none);
    zmq::pollitem_t item{s.handle(), 0, ZMQ_POLLIN, 0};
    // Past INT32_MAX ms (24 days) zmq_poll's int timeout may wrap: no limit.
    const int64_t poll_ms = timeout_ms < 0 || timeout_ms > INT32_MAX ? -1 : timeout_ms;
    if (zmq::poll(&item, 1, std::chrono::milliseconds(poll_ms)) == 0) {
      return Status::Unavailable(what + ": no answer within " + std::to_string(timeout_ms) + " ms");
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
