// Control-plane authentication at connect time. The controller's ROUTER is
// a PLAIN server in the ZAP domain kControlZapDomain, or a CURVE server
// with --curve-keys. Every peer (worker, driver, the tests' raw sockets)
// passes the controller's ZapHandler in the handshake, before it can send
// a single message: without the token a peer cannot make the controller
// buffer even one frame (libzmq keeps a message's frames until its last
// one, so a token checked inside the first message came after a peer had
// made the controller hold a message of any number of parts).
//
// Which passwords get in is the controller's TokenBook's to say; without a
// token it lets every PLAIN peer in, so a peer that presents a token (one
// read from the default file) still connects to it.
// PLAIN sends the token in clear text, as the first message did before;
// --curve-keys encrypts it.
//
// Thread-safety: plain functions; each socket is used by its caller's
// thread only, as ZeroMQ requires. ControlPassword is safe from any
// thread (the ZAP handler's).
#pragma once

#include <optional>
#include <string>
#include <zmq.hpp>

#include "hmpmd/protocol/zap_handler.h"

namespace hmpmd {

inline constexpr char kControlZapDomain[] = "hmpmd";
inline constexpr char kControlPlainUser[] = "hmpmd";

// Client side: `s` (before it connects) presents `token` (empty: none).
// Throws zmq::error_t.
void SetControlCredentials(zmq::socket_t& s, const std::string& token);
// Server side: `s` (before it binds) asks its context's ZAP handler about
// every PLAIN peer. Throws zmq::error_t.
void MakeControlServer(zmq::socket_t& s);
// The password a PLAIN peer presents in `r` ("" for none); nullopt for a
// peer of another mechanism.
std::optional<std::string> ControlPassword(const ZapRequest& r);

}  // namespace hmpmd
