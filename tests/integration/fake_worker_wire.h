// The wire as a fake worker speaks it in tests that stand in for a worker
// on the controller's socket: send one message, wait for one of a type.
#pragma once

#include <chrono>
#include <optional>
#include <zmq.hpp>

#include "hmpmd/protocol/codec.h"

namespace hmpmd::testing {

inline void Send(zmq::socket_t& s, const Message& m) {
  const EncodedFrames f = Encode(m);
  s.send(zmq::buffer(f.header), zmq::send_flags::sndmore);
  s.send(zmq::buffer(f.body), zmq::send_flags::none);
}

// The next message of type `want` within 10 s, skipping others.
inline std::optional<Message> Next(zmq::socket_t& s, MsgType want) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (std::chrono::steady_clock::now() < deadline) {
    zmq::pollitem_t item{s.handle(), 0, ZMQ_POLLIN, 0};
    if (zmq::poll(&item, 1, std::chrono::milliseconds(100)) == 0) continue;
    zmq::message_t header, body;
    if (!s.recv(header) || !header.more() || !s.recv(body)) continue;
    auto m = Decode(header.to_string_view(), body.to_string_view());
    if (m.ok() && TypeOf(*m) == want) return std::move(*m);
  }
  return std::nullopt;
}

}  // namespace hmpmd::testing
