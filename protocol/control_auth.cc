#include "hmpmd/protocol/control_auth.h"

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

std::optional<std::string> ControlPassword(const ZapRequest& r) {
  // PLAIN's credentials are the user name and the password.
  if (r.mechanism != "PLAIN" || r.credentials.size() != 2) return std::nullopt;
  return r.credentials[1];
}

}  // namespace hmpmd
