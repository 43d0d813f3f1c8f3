#include "keepalive_client.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <charconv>

namespace hmpmd::bench {
namespace {

// Case-insensitive search for a header line's value in `head` (which
// starts after the status line); empty when absent.
std::string_view HeaderValue(std::string_view head, std::string_view name) {
  size_t pos = 0;
  while ((pos = head.find("\r\n", pos)) != std::string_view::npos) {
    pos += 2;
    if (head.size() - pos < name.size() + 1) break;
    bool match = head[pos + name.size()] == ':';
    for (size_t i = 0; match && i < name.size(); ++i) {
      match = std::tolower(static_cast<unsigned char>(head[pos + i])) == name[i];
    }
    if (!match) continue;
    size_t start = pos + name.size() + 1, end = head.find("\r\n", start);
    std::string_view v = head.substr(start, end - start);
    while (!v.empty() && v.front() == ' ') v.remove_prefix(1);
    return v;
  }
  return {};
}

}  // namespace

bool KeepAliveClient::Connect() {
  fd_ = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd_ < 0) return false;
  timeval tv{};
  tv.tv_sec = timeout_.count() / 1000;
  tv.tv_usec = (timeout_.count() % 1000) * 1000;
  setsockopt(fd_, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  setsockopt(fd_, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
  int one = 1;
  setsockopt(fd_, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(port_);
  if (inet_pton(AF_INET, host_.c_str(), &addr.sin_addr) != 1 ||
      connect(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
    Close();
    return false;
  }
  buf_.clear();
  return true;
}

void KeepAliveClient::Close() {
  if (fd_ >= 0) close(fd_);
  fd_ = -1;
}

bool KeepAliveClient::Fill() {
  char chunk[16384];
  ssize_t n = recv(fd_, chunk, sizeof chunk, 0);
  if (n <= 0) return false;
  buf_.append(chunk, static_cast<size_t>(n));
  return true;
}

int KeepAliveClient::Get(std::string_view target, size_t* body_bytes) {
  if (fd_ < 0 && !Connect()) return -1;
  request_.clear();
  request_ += "GET ";
  request_ += target;
  request_ += " HTTP/1.1\r\nHost: ";
  request_ += host_;
  request_ += "\r\nUser-Agent: hmpmd-bench\r\nAccept: */*\r\n\r\n";
  for (size_t sent = 0; sent < request_.size();) {
    ssize_t n = send(fd_, request_.data() + sent, request_.size() - sent, MSG_NOSIGNAL);
    if (n <= 0) return Close(), -1;
    sent += static_cast<size_t>(n);
  }
  size_t head_end;
  while ((head_end = buf_.find("\r\n\r\n")) == std::string::npos) {
    if (!Fill()) return Close(), -1;
  }
  std::string_view head(buf_.data(), head_end + 2);
  int status = 0;
  if (head.size() < 12 || head.compare(0, 5, "HTTP/") != 0 ||
      std::from_chars(head.data() + 9, head.data() + 12, status).ec != std::errc()) {
    return Close(), -1;
  }
  size_t length = 0;
  std::string_view cl = HeaderValue(head, "content-length");
  if (std::from_chars(cl.data(), cl.data() + cl.size(), length).ec != std::errc()) {
    return Close(), -1;  // the server always sends a length
  }
  const bool close_after = HeaderValue(head, "connection") == "close";
  const size_t total = head_end + 4 + length;
  while (buf_.size() < total) {
    if (!Fill()) return Close(), -1;
  }
  buf_.erase(0, total);
  if (body_bytes) *body_bytes = length;
  if (close_after) Close();
  return status;
}

}  // namespace hmpmd::bench
