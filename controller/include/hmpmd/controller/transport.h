// Transport: the controller's ROUTER socket, speaking the protocol codec.
//
// Receive() decodes one multipart message (identity, header, body); a frame
// that does not decode is counted in dropped() and skipped, never thrown.
// ZeroMQ exceptions stop here and become Status.
// Thread-safety: not thread-safe; the controller loop owns it.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>
#include <zmq.hpp>

#include "hmpmd/protocol/codec.h"
#include "hmpmd/protocol/status.h"

namespace hmpmd {

struct Incoming {
  std::string identity;
  Message message;
};

class Transport {
 public:
  explicit Transport(zmq::context_t* ctx);

  // Binds to `endpoint` (e.g. tcp://*:5555, tcp://127.0.0.1:0 for any port).
  Status Bind(const std::string& endpoint);
  // Makes the socket a CURVE server with this Z85 secret key (encrypted
  // links; a ZapHandler decides who gets in). Call before Bind().
  Status EnableCurveServer(const std::string& secret_z85);
  // The endpoint actually bound, with the port filled in.
  const std::string& endpoint() const { return endpoint_; }
  zmq::socket_t& socket() { return socket_; }

  // Watches the socket's connections (a libzmq monitor on inproc), so that
  // a peer whose connection closes is known at once rather than after its
  // heartbeats are missed. Call once, after Bind().
  Status WatchDisconnects();
  // The monitor's socket, to poll for POLLIN beside socket(); its handle
  // is null until WatchDisconnects().
  zmq::socket_t& monitor() { return monitor_; }
  // Reads the monitor's events and appends the routing ids of the peers
  // whose connection closed. A connection is known by its file descriptor
  // (ZMQ_SRCFD of the last message it brought), which the kernel reuses:
  // an id is a suspect to check (see Reachable), not a verdict. Returns
  // how many connections failed their handshake for speaking another
  // mechanism (no credentials at all, so the ZAP handler never saw them).
  size_t TakeDisconnected(std::vector<std::string>* out);
  // The address ("10.0.0.7:51234") of the connection the peer `identity`
  // last sent on; "" when not known.
  std::string PeerAddress(const std::string& identity) const;
  // Whether the socket still has a connection for `identity`: sends it a
  // HeartbeatAck, which router_mandatory refuses for an id with none.
  bool Reachable(const std::string& identity);

  // Reads one message if one is waiting (returns false when none is). On
  // true, `*out` holds it, or is empty when it was malformed and dropped.
  bool Receive(std::optional<Incoming>* out);
  // Sends to the worker with `identity`; false if it could not be queued.
  bool Send(const std::string& identity, const Message& message);
  // Sends frames already encoded (header from EncodeHeader).
  bool SendEncoded(const std::string& identity, const std::string& header, const std::string& body);

  uint64_t dropped() const { return dropped_; }
  uint64_t received() const { return received_; }
  const std::string& last_error() const { return last_error_; }

 private:
  void NoteConnection(const zmq::message_t& frame, const std::string& identity);

  zmq::socket_t socket_;
  std::string endpoint_;
  uint64_t dropped_ = 0;
  uint64_t received_ = 0;
  std::string last_error_;
  std::string body_scratch_;
  zmq::context_t* ctx_;
  zmq::socket_t monitor_;
  // The connection (file descriptor) each peer's last message came on, and
  // back; only kept while watching.
  std::unordered_map<int, std::string> fd_identity_;
  std::unordered_map<std::string, int> identity_fd_;
};

}  // namespace hmpmd
