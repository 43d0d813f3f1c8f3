// The address this host uses to reach a peer: what a data socket binds and
// advertises by default (a worker's data socket, a driver's puts).
//
// Thread-safety: a plain function.
#pragma once

#include <optional>
#include <string>

namespace hmpmd {

// The IPv4 address of the interface that reaches the host of `endpoint`
// (tcp://HOST:PORT), found by connecting a UDP socket (nothing is sent);
// 127.0.0.1 when that host is local (or the endpoint is not tcp://).
// nullopt when the host is remote but does not resolve or has no route
// now: no address of this host is known to reach it, and loopback surely
// does not.
std::optional<std::string> RouteAddressFor(const std::string& endpoint);

// RouteAddressFor, or 127.0.0.1 when it has none.
std::string LocalAddressFor(const std::string& endpoint);

}  // namespace hmpmd
