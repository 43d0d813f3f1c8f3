// FakeController: a real ZeroMQ ROUTER on tcp://127.0.0.1:* that plays the
// controller in worker tests. It speaks the protocol through the real codec
// and can also send raw, malformed frames.
//
// Thread-safety: not thread-safe; the test thread owns it.
#pragma once

#include <chrono>
#include <functional>
#include <optional>
#include <string>
#include <vector>
#include <zmq.hpp>

#include "hmpmd/protocol/codec.h"
#include "hmpmd/protocol/zap_handler.h"

namespace hmpmd::worker::testing {

class FakeController {
 public:
  // Every wait gives up after this long.
  static constexpr std::chrono::milliseconds kDeadline{5000};

  FakeController();
  ~FakeController();

  // The bound endpoint, read back with ZMQ_LAST_ENDPOINT.
  const std::string& endpoint() const { return endpoint_; }

  // The next well-formed message from a worker, or nullopt after `timeout`.
  // Remembers the sender as the peer Send() answers.
  std::optional<Message> Recv(std::chrono::milliseconds timeout = kDeadline);

  // The next message of type T for which `match` holds, skipping others
  // (heartbeats, other results); nullopt after `timeout`.
  template <typename T>
  std::optional<T> WaitFor(std::function<bool(const T&)> match = {},
                           std::chrono::milliseconds timeout = kDeadline) {
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    for (;;) {
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
          deadline - std::chrono::steady_clock::now());
      if (left.count() <= 0) return std::nullopt;
      std::optional<Message> m = Recv(left);
      if (!m) return std::nullopt;
      if (T* t = std::get_if<T>(&*m); t != nullptr && (!match || match(*t))) return *t;
    }
  }

  // Sends `message` to the last worker heard from.
  void Send(const Message& message);
  // Sends these frames, as they are, to the last worker heard from.
  void SendRaw(const std::vector<std::string>& frames);

  // Number of messages from a worker that did not decode.
  int bad_messages() const { return bad_messages_; }

 private:
  zmq::context_t context_;
  // Lets every PLAIN peer in, as a controller without a token does; goes
  // before context_ closes.
  std::optional<ZapHandler> zap_;
  zmq::socket_t router_;
  std::string endpoint_;
  std::string peer_;  // ROUTER identity of the last sender
  int bad_messages_ = 0;
};

}  // namespace hmpmd::worker::testing
