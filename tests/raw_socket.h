// RawSocket: a blocking loopback TCP client for tests that sends exactly
// the bytes it is given (requests a well-behaved client would never send)
// and reads with a bounded wait. Not thread-safe: one thread per socket.
#pragma once

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <string>
#include <string_view>

namespace hmpmd {

class RawSocket {
  using Clock = std::chrono::steady_clock;

 public:
  explicit RawSocket(uint16_t port, int rcvbuf = 0) {
    fd_ = ::socket(AF_INET, SOCK_STREAM, 0);
    if (rcvbuf > 0) ::setsockopt(fd_, SOL_SOCKET, SO_RCVBUF, &rcvbuf, sizeof rcvbuf);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(port);
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    connected_ = ::connect(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0;
  }
  ~RawSocket() { ::close(fd_); }
  bool connected() const { return connected_; }

  bool Send(std::string_view bytes) {
    while (!bytes.empty()) {
      ssize_t n = ::send(fd_, bytes.data(), bytes.size(), MSG_NOSIGNAL);
      if (n <= 0) return false;
      bytes.remove_prefix(static_cast<size_t>(n));
    }
    return true;
  }

  // Appends to `out` until it contains `stop`, the peer closes, or `limit`
  // passes. True when `stop` was seen.
  bool ReadUntil(std::string* out, std::string_view stop,
                 std::chrono::milliseconds limit = std::chrono::seconds(5)) {
    auto deadline = Clock::now() + limit;
    while (out->find(stop) == std::string::npos) {
      if (!ReadSome(out, deadline)) return out->find(stop) != std::string::npos;
    }
    return true;
  }

  // Appends to `out` until the peer closes (true) or `limit` passes.
  bool ReadToEof(std::string* out, std::chrono::milliseconds limit = std::chrono::seconds(5)) {
    auto deadline = Clock::now() + limit;
    while (ReadSome(out, deadline)) {
    }
    return eof_;
  }

 private:
  // False on EOF, error or deadline.
  bool ReadSome(std::string* out, Clock::time_point deadline) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
    if (left.count() <= 0) return false;
    pollfd p{fd_, POLLIN, 0};
    if (::poll(&p, 1, static_cast<int>(left.count())) <= 0) return false;
    char buf[4096];
    ssize_t n = ::recv(fd_, buf, sizeof buf, 0);
    if (n <= 0) {
      eof_ = true;
      return false;
    }
    out->append(buf, static_cast<size_t>(n));
    return true;
  }

  int fd_ = -1;
  bool connected_ = false;
  bool eof_ = false;
};

}  // namespace hmpmd
