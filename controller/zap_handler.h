// ZapHandler: the ZeroMQ authentication (ZAP, RFC 27) handler that lets in
// only CURVE clients whose public key is in an allowed set. libzmq asks it
// about every new connection to a curve server socket of the same context.
// Thread-safety: owns one thread; Start() and the destructor belong to the
// thread that owns the controller.
#pragma once

#include <atomic>
#include <set>
#include <string>
#include <thread>
#include <zmq.hpp>

#include "hmpmd/protocol/status.h"

namespace hmpmd {

class ZapHandler {
 public:
  // `ctx` must outlive the handler. `allowed`: Z85 public keys.
  ZapHandler(zmq::context_t* ctx, std::set<std::string> allowed);
  ~ZapHandler();
  ZapHandler(const ZapHandler&) = delete;
  ZapHandler& operator=(const ZapHandler&) = delete;

  // Binds inproc://zeromq.zap.01 and starts answering. Call before the
  // server socket binds.
  Status Start();
  uint64_t refused() const { return refused_; }

 private:
  void Loop();

  zmq::context_t* const ctx_;
  const std::set<std::string> allowed_;
  zmq::socket_t socket_;
  std::atomic<bool> stop_{false};
  std::atomic<uint64_t> refused_{0};
  std::thread thread_;
};

}  // namespace hmpmd
