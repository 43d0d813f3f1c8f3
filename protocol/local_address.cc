#include "hmpmd/protocol/local_address.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <sys/socket.h>
#include <unistd.h>

namespace hmpmd {

std::optional<std::string> RouteAddressFor(const std::string& controller) {
  if (!controller.starts_with("tcp://")) return "127.0.0.1";
  const std::string rest = controller.substr(6);
  const size_t colon = rest.rfind(':');
  const std::string host = rest.substr(0, colon);
  if (host.empty() || host == "*" || host == "localhost" || host.starts_with("127.")) {
    return "127.0.0.1";
  }
  addrinfo hints = {};
  hints.ai_family = AF_INET;
  hints.ai_socktype = SOCK_DGRAM;
  addrinfo* found = nullptr;
  if (::getaddrinfo(host.c_str(), "9", &hints, &found) != 0 || found == nullptr) {
    return std::nullopt;
  }
  std::optional<std::string> result;
  const int fd = ::socket(AF_INET, SOCK_DGRAM, 0);
  if (fd >= 0 && ::connect(fd, found->ai_addr, found->ai_addrlen) == 0) {
    sockaddr_in local = {};
    socklen_t len = sizeof(local);
    char text[INET_ADDRSTRLEN] = {};
    if (::getsockname(fd, reinterpret_cast<sockaddr*>(&local), &len) == 0 &&
        ::inet_ntop(AF_INET, &local.sin_addr, text, sizeof(text)) != nullptr) {
      result = text;
    }
  }
  if (fd >= 0) ::close(fd);
  ::freeaddrinfo(found);
  return result;
}

std::string LocalAddressFor(const std::string& endpoint) {
  return RouteAddressFor(endpoint).value_or("127.0.0.1");
}

}  // namespace hmpmd
