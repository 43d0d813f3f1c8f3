// ControllerLink: the DEALER socket to the controller, as Status-returning
// calls. cppzmq's exceptions stop here.
//
// Frames on the wire are those of hmpmd/protocol/codec.h: [header, body].
// Anything else (one frame, three frames, a bad header or body) is read
// whole and reported as Corruption, so the caller can count and drop it.
//
// Thread-safety: not thread-safe; the I/O thread owns it (ZeroMQ sockets
// belong to one thread).
#pragma once

#include <optional>
#include <string>
#include <vector>
#include <zmq.hpp>

#include "hmpmd/protocol/codec.h"
#include "hmpmd/protocol/status.h"

namespace hmpmd::worker {

class ControllerLink {
 public:
  // `endpoints`: one, or a primary and its standbys separated by commas
  // (tcp://A:5555,tcp://B:5555); Connect() uses the current one.
  explicit ControllerLink(const std::string& endpoints);
  // Makes later Connect()s CURVE clients with these Z85 keys.
  void SetCurve(std::string server_public, std::string public_key, std::string secret) {
    curve_server_ = std::move(server_public);
    curve_public_ = std::move(public_key);
    curve_secret_ = std::move(secret);
  }
  // The token later Connect()s present in the handshake (PLAIN; unused
  // with CURVE).
  void SetToken(std::string token) { token_ = std::move(token); }
  ~ControllerLink();
  ControllerLink(const ControllerLink&) = delete;
  ControllerLink& operator=(const ControllerLink&) = delete;

  // Closes the current socket, if any, dropping what it still queues, and
  // connects a fresh DEALER to the current endpoint. InvalidArgument for a
  // bad endpoint.
  Status Connect();
  // Makes the next endpoint the current one (after the last, the first).
  void NextEndpoint() { at_ = (at_ + 1) % endpoints_.size(); }
  const std::string& endpoint() const { return endpoints_[at_]; }
  size_t endpoint_count() const { return endpoints_.size(); }
  // With several endpoints: true when the current socket's connection
  // closed (the controller went away) since the last call. Reads the
  // events that came meanwhile, without blocking.
  bool Disconnected();

  struct Ready {
    bool socket = false;  // a message is waiting
    bool wake = false;    // `wake_fd` is readable
  };
  // Waits up to `timeout_ms` (-1: no limit) for a message or for `wake_fd`.
  // A signal interrupting the wait returns an empty Ready.
  Result<Ready> Poll(int wake_fd, int timeout_ms);

  // Reads one message if one is waiting, without blocking: nullopt when
  // none is; Corruption when the frames were malformed (they are consumed);
  // Internal when the socket failed.
  Result<std::optional<Message>> TryRecv();

  // True when the controller refused this socket's credentials (the token,
  // or the CURVE key) in a handshake since the last call; reads the
  // handshake events that came meanwhile, without blocking.
  bool HandshakeRefused();

  // Queues `message` without blocking. Unavailable when the send queue is
  // full (the controller is not reading); Internal when the socket failed.
  Status Send(const Message& message);

 private:
  std::vector<std::string> endpoints_;
  size_t at_ = 0;
  bool disconnected_ = false;  // seen while reading the monitor
  // Reads the monitor's events that came meanwhile; true when one was a
  // refusal of the credentials.
  bool ReadEvents();
  // Closes the socket and its monitor, the monitor stopped first
  // (StopMonitor).
  void CloseSocket();
  std::string curve_server_, curve_public_, curve_secret_;  // empty: PLAIN
  std::string token_;
  zmq::context_t context_;
  std::optional<zmq::socket_t> socket_;
  std::optional<zmq::socket_t> monitor_;  // socket_'s handshakes
  // Reused for every frame and encoding, so steady state allocates little.
  zmq::message_t header_;
  zmq::message_t body_;
  zmq::message_t extra_;
  std::string encoded_;
};

}  // namespace hmpmd::worker
