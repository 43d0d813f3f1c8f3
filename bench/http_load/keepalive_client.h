// KeepAliveClient: a minimal blocking HTTP/1.1 GET client that keeps one
// connection open across requests, as browsers and Prometheus scrapers do.
// The HTTP load bench uses it so that the load generator, which shares the
// machine with the controller, spends little CPU per request.
// Thread-safety: one object per thread.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <string_view>

namespace hmpmd::bench {

class KeepAliveClient {
 public:
  // `host` is a numeric IPv4 address.
  KeepAliveClient(std::string host, uint16_t port, std::chrono::milliseconds timeout)
      : host_(std::move(host)), port_(port), timeout_(timeout) {}
  ~KeepAliveClient() { Close(); }
  KeepAliveClient(const KeepAliveClient&) = delete;
  KeepAliveClient& operator=(const KeepAliveClient&) = delete;

  // GETs `target` on the open connection (connecting first when there is
  // none) and reads the whole answer. Returns the HTTP status, or -1 on a
  // transport error or a malformed answer (the connection is closed and the
  // next call opens a new one). `body_bytes` gets the body's size.
  int Get(std::string_view target, size_t* body_bytes = nullptr);

 private:
  bool Connect();
  void Close();
  // Reads more bytes into buf_; false on error, timeout or end of stream.
  bool Fill();

  std::string host_;
  uint16_t port_;
  std::chrono::milliseconds timeout_;
  int fd_ = -1;
  std::string request_;  // reused
  std::string buf_;      // received, not yet consumed
};

}  // namespace hmpmd::bench
