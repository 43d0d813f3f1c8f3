// The `hmpmd` commands' client of the controller's REST API (submit,
// status, cancel, fetch, forget, pool): the flags they share, the
// controllers they name (a primary's URL and its standbys'), the token,
// and an answer turned into JSON or a Status that says what was wrong.
// Thread-safety: a Client is used by one thread.
#pragma once

#include <chrono>
#include <cstddef>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "hmpmd/http/http_client.h"
#include "hmpmd/protocol/status.h"

namespace hmpmd {

struct ClientArgs {
  std::string url;
  bool url_given = false;  // --url '' (an unset variable in a script) is an error, not the default
  std::string token_file;
  bool json = false;
  double timeout_s = 10;  // per request
};

struct Client {
  // A primary's URL and its standbys' (--url A,B); calls go to the one
  // that last answered.
  std::vector<HttpUrl> urls;
  mutable size_t at = 0;
  std::map<std::string, std::string> headers;
  std::chrono::milliseconds timeout{0};

  const HttpUrl& url() const { return urls[at]; }
  // "http://A:8080" or "http://A:8080, http://B:8080" for messages.
  std::string names() const;
};

// The client --url (else $HMPMD_URL, else http://127.0.0.1:8080) and the
// token (--token-file, else the default token file) make.
Result<Client> Connect(const ClientArgs& a);

// HttpCall to the client's controller. One it cannot reach (refused, no
// route: nothing was sent) may have handed over to a standby: the next URL
// is tried, each once. A request that reached a controller is never sent
// to another (a submit that timed out may have been taken).
Result<HttpResponse> Send(const Client& c, std::string_view method, const std::string& target,
                          std::string_view body, std::chrono::milliseconds timeout);

// The job store a controller's answer names (RestApi's kStoreHeader).
std::string StoreOf(const HttpResponse& r);

// A 2xx answer's JSON; any other answer becomes a Status carrying its "error".
Result<nlohmann::json> FromAnswer(const Client& c, std::string_view method,
                                  const std::string& target, const HttpResponse& r);

// Calls the API (FromAnswer). With `store`, sets it to the answer's
// Hmpmd-Store header (empty if it has none).
Result<nlohmann::json> Call(const Client& c, std::string_view method, const std::string& target,
                            std::string_view body = {}, std::string* store = nullptr);

}  // namespace hmpmd
