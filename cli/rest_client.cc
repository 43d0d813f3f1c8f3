#include "rest_client.h"

#include <algorithm>
#include <cstdlib>

#include "hmpmd/protocol/address_list.h"
#include "hmpmd/protocol/token_file.h"

namespace hmpmd {

std::string Client::names() const {
  std::string s;
  for (const HttpUrl& u : urls) s += (s.empty() ? "" : ", ") + u.ToString();
  return s;
}

Result<HttpResponse> Send(const Client& c, std::string_view method, const std::string& target,
                          std::string_view body, std::chrono::milliseconds timeout) {
  Result<HttpResponse> r = HttpCall(c.url(), method, target, body, c.headers, timeout);
  for (size_t tried = 1;
       tried < c.urls.size() && !r.ok() && r.status().message().starts_with("cannot reach ");
       ++tried) {
    c.at = (c.at + 1) % c.urls.size();
    r = HttpCall(c.url(), method, target, body, c.headers, timeout);
    if (tried + 1 == c.urls.size() && !r.ok() &&
        r.status().message().starts_with("cannot reach " + c.url().ToString() + ": ")) {
      // None could be reached: say so of each, not of the last alone.
      const size_t why = ("cannot reach " + c.url().ToString() + ": ").size();
      return Status::Unavailable("cannot reach " + c.names() + ": " +
                                 r.status().message().substr(why));
    }
  }
  return r;
}

Result<Client> Connect(const ClientArgs& a) {
  std::string url = a.url;
  if (a.url_given && url.empty()) {
    return Status::InvalidArgument("--url: empty; give the controller's http://HOST:PORT");
  }
  if (url.empty()) {
    const char* env = std::getenv("HMPMD_URL");
    url = env && *env ? env : "http://127.0.0.1:8080";
  }
  Client c;
  for (const std::string& one : SplitAddresses(url)) {
    ASSIGN_OR_RETURN(HttpUrl parsed, ParseHttpUrl(one));
    c.urls.push_back(std::move(parsed));
  }
  // No --token-file: the token a controller on this host made, if any
  // (DefaultTokenPath); a controller without a token ignores it.
  Result<std::string> token =
      a.token_file.empty() ? ReadDefaultToken() : ReadTokenFile(a.token_file);
  if (!token.ok()) {
    return Status::InvalidArgument(std::string(a.token_file.empty() ? "token" : "--token-file") +
                                   ": " + token.status().message());
  }
  if (!token->empty()) c.headers["Authorization"] = "Bearer " + *token;
  c.timeout = std::chrono::milliseconds(static_cast<int64_t>(a.timeout_s * 1000));
  return c;
}

std::string StoreOf(const HttpResponse& r) {
  auto it = r.headers.find("hmpmd-store");
  return it == r.headers.end() ? std::string() : it->second;
}

Result<nlohmann::json> FromAnswer(const Client& c, std::string_view method,
                                  const std::string& target, const HttpResponse& r) {
  nlohmann::json j = nlohmann::json::parse(r.body, nullptr, false);
  if (r.status >= 200 && r.status < 300) {
    if (j.is_discarded()) return Status::Internal(target + ": the controller sent invalid JSON");
    return j;
  }
  const bool ours = j.is_object() && j.contains("error") && j["error"].is_string();
  std::string msg = ours ? j["error"].get<std::string>()
                         : std::string(method) + " " + target + ": HTTP " +
                               std::to_string(r.status) + " from " + c.url().ToString() +
                               ", without an hmpmd error (is it an hmpmd controller?)";
  // Not an hmpmd controller at --url (a 4xx, or 501 for a method it lacks):
  // the input is wrong, whatever the command's method. A bare 502/503 is a
  // proxy whose controller is down: unavailable.
  if (!ours && (r.status < 500 || r.status == 501)) return Status::InvalidArgument(msg);
  // 404, 400 and 409 (an action the job's state refuses: cancel an ended
  // job) all exit 2 (Fail): the request was wrong. `submit --wait` tells
  // 404 apart.
  StatusCode code = r.status == 404 ? StatusCode::kNotFound
                    : r.status == 400 || r.status == 409 || r.status == 413
                        ? StatusCode::kInvalidArgument
                    : r.status == 401 || r.status == 403 ? StatusCode::kPermissionDenied
                                                         : StatusCode::kUnavailable;
  return Status(code, msg);
}

Result<nlohmann::json> Call(const Client& c, std::string_view method, const std::string& target,
                            std::string_view body, std::string* store) {
  ASSIGN_OR_RETURN(HttpResponse r, Send(c, method, target, body, c.timeout));
  if (store != nullptr) *store = StoreOf(r);
  return FromAnswer(c, method, target, r);
}

}  // namespace hmpmd
