#include "hmpmd/protocol/control_auth.h"

#include "hmpmd/protocol/same_secret.h"

namespace hmpmd {

void SetControlCredentials(zmq::socket_t& s, const std::string& token) {
  s.set(zmq::sockopt::plain_username, kControlPlainUser);
  // libzmq takes no empty password; unset, PLAIN sends an empty one.
  if (!token.empty()) s.set(zmq::sockopt::plain_password, token);
}

void MakeControlServer(zmq::socket_t& s) {
  s.set(zmq::sockopt::plain_server, 1);
  s.set(zmq::sockopt::zap_domain, kControlZapDomain);
}

bool ControlPeerAllowed(const ZapRequest& r, const std::string& token) {
  if (r.mechanism != "PLAIN" || r.credentials.size() != 2) return false;
  return token.empty() || SameSecret(token, r.credentials[1]);
}

}  // namespace hmpmd
