// A small blocking HTTP/1.1 client for the CLI (`hmpmd submit`, `status`,
// `cancel`, `pool`, `submit --wait`) and for tests. One connection per call,
// plain HTTP only, no redirects. Exceptions never escape: every failure is a
// Status with a one-line message naming the URL.
//
// Thread-safety: the functions share no state; call them from any thread.
#pragma once

#include <chrono>
#include <functional>
#include <map>
#include <string>
#include <string_view>

#include "hmpmd/http/http_types.h"
#include "hmpmd/protocol/status.h"

namespace hmpmd {

struct HttpUrl {
  std::string host;       // "127.0.0.1", "localhost" or "::1" (no brackets)
  std::string port;       // "8080"
  std::string base_path;  // "" or "/prefix" without a trailing slash

  // "http://127.0.0.1:8080/prefix"
  std::string ToString() const;
};

// Accepts "http://HOST:PORT[/base]" and "HOST:PORT"; IPv6 hosts go in
// brackets ("http://[::1]:8080"). Otherwise InvalidArgument:
// "url 'x': expected http://HOST:PORT".
Result<HttpUrl> ParseHttpUrl(std::string_view url);

// Sends one request to `url` (`target` is appended to url.base_path) and
// reads the whole response. `headers` are added as given; Host, User-Agent,
// and Content-Type (application/json when `body` is not empty, and on every
// POST, PUT and PATCH) are set
// unless `headers` names them. `timeout` bounds connect, send and receive
// together (not name resolution of a non-numeric host).
// Any HTTP status is a successful call; errors are transport failures:
// Unavailable "cannot reach http://HOST:PORT: Connection refused",
// Unavailable "http://HOST:PORT: GET /x timed out after 5000 ms", ...
Result<HttpResponse> HttpCall(const HttpUrl& url, std::string_view method, std::string_view target,
                              std::string_view body,
                              const std::map<std::string, std::string>& headers,
                              std::chrono::milliseconds timeout);

// Called once per Server-Sent Event; `event` is "message" when the event
// names none, and `data` joins its data lines with '\n'. Return false to stop.
using SseCallback = std::function<bool(std::string_view event, std::string_view data)>;

// GETs `target` as an event stream and calls `on_event` for each event until
// it returns false (then OK). Comments (": keepalive") are skipped. Fails
// with Unavailable when the server closes the stream or `timeout` (for the
// whole stream) passes first; with NotFound or PermissionDenied for a 404 or
// 401/403 answer.
Status StreamSse(const HttpUrl& url, std::string_view target,
                 const std::map<std::string, std::string>& headers, const SseCallback& on_event,
                 std::chrono::milliseconds timeout);

}  // namespace hmpmd
