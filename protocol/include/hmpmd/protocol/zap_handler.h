// ZapHandler: a ZeroMQ authentication (ZAP, RFC 27) handler. libzmq asks
// it about every new connection to a PLAIN or CURVE server socket of its
// context (one handler per context: it binds inproc://zeromq.zap.01), in
// the handshake, before the peer can send a single message. A `check`
// decides each request; a refused peer gets a ZMTP ERROR (status 400) and
// no connection, which its socket monitor reports as
// ZMQ_EVENT_HANDSHAKE_FAILED_AUTH.
//
// The controller lets in CURVE keys of an allowed set; a worker's data
// socket lets in PLAIN peers whose password is an accepted data token
// (data_auth.h).
//
// Thread-safety: owns one thread, on which `check` runs (it must be safe
// to call there). Start() and the destructor belong to the owner's thread.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <string>
#include <thread>
#include <vector>
#include <zmq.hpp>

#include "hmpmd/protocol/status.h"

namespace hmpmd {

// One ZAP request, as RFC 27 frames it.
struct ZapRequest {
  std::string domain;     // the server socket's ZMQ_ZAP_DOMAIN
  std::string address;    // the peer's IP address
  std::string mechanism;  // "NULL", "PLAIN" or "CURVE"
  // PLAIN: username, password; CURVE: the 32-byte client public key.
  std::vector<std::string> credentials;
};

class ZapHandler {
 public:
  // True lets the peer in.
  using Check = std::function<bool(const ZapRequest&)>;

  // `ctx` must outlive the handler.
  ZapHandler(zmq::context_t* ctx, Check check);
  ~ZapHandler();
  ZapHandler(const ZapHandler&) = delete;
  ZapHandler& operator=(const ZapHandler&) = delete;

  // Binds inproc://zeromq.zap.01 and starts answering. Call before the
  // server socket binds. Internal when the context has a handler already.
  Status Start();
  // Requests refused so far (any thread).
  uint64_t refused() const { return refused_.load(std::memory_order_relaxed); }

 private:
  void Loop();

  zmq::context_t* const ctx_;
  const Check check_;
  zmq::socket_t socket_;
  std::atomic<bool> stop_{false};
  std::atomic<uint64_t> refused_{0};
  std::thread thread_;
};

}  // namespace hmpmd
