// Plain HTTP request/response values that cross between the HTTP server's
// thread and the controller loop. No Beast types here, so the controller
// core never includes Beast.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <string_view>

namespace hmpmd {

struct HttpRequest {
  std::string method;  // "GET", "POST", "DELETE", ...
  // Origin-form, as sent (an absolute-form target is stripped to this):
  // path and query, escapes kept, e.g. "/api/v1/jobs/%33?x=1".
  std::string target;
  std::string path;   // the target's path, percent-decoded: "/api/v1/jobs/3"
  std::string query;  // after '?', escapes kept (decoded per parameter); may be empty
  std::map<std::string, std::string> headers;  // lower-case names
  std::string body;
  std::string peer;  // the client's address, "127.0.0.1:51234"; "" when not known
};

struct HttpResponse {
  int status = 200;
  std::string content_type = "application/json";
  std::string body;
  // When set, sent instead of `body` and never copied: one rendered body
  // (e.g. a snapshot's) shared by every reply that sends it.
  std::shared_ptr<const std::string> shared_body;
  std::map<std::string, std::string> headers;  // extra headers

  std::string_view payload() const { return shared_body ? *shared_body : body; }
};

// Answers one request by calling `reply` exactly once, from any thread.
using HttpReply = std::function<void(HttpResponse)>;
using HttpHandler = std::function<void(HttpRequest, HttpReply)>;

// A long-lived Server-Sent Events stream: the server calls `send` with each
// chunk the handler produces; `send` returns false once the client is gone.
using SseSend = std::function<bool(const std::string& event_chunk)>;

}  // namespace hmpmd
