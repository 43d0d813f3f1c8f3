// Blocking calls built from Beast's asynchronous operations: a tcp_stream
// deadline only applies to asynchronous operations, so each step starts one
// and runs a private io_context until it completes.
#include "hmpmd/http/http_client.h"

#include <algorithm>
#include <boost/asio/ip/tcp.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <cctype>
#include <charconv>
#include <exception>
#include <limits>
#include <optional>
#include <utility>
#include <vector>

namespace hmpmd {
namespace {

namespace beast = boost::beast;
namespace http = beast::http;
namespace net = boost::asio;
using tcp = net::ip::tcp;

// Responses (traces included) larger than this are refused.
constexpr uint64_t kMaxResponseBytes = uint64_t{1} << 30;
// An SSE line longer than this ends the stream as corrupt.
constexpr size_t kMaxSseBuffered = size_t{64} << 20;

std::string_view Sv(beast::string_view s) { return {s.data(), s.size()}; }
beast::string_view Bv(std::string_view s) { return {s.data(), s.size()}; }

std::string ToLower(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

std::string HostHeader(const HttpUrl& url) {
  bool v6 = url.host.find(':') != std::string::npos;
  return (v6 ? "[" + url.host + "]" : url.host) + ":" + url.port;
}

// One connection with one deadline for everything done on it.
class Connection {
 public:
  Connection(const HttpUrl& url, std::chrono::milliseconds timeout)
      : url_(url),
        timeout_(timeout),
        deadline_(std::chrono::steady_clock::now() + timeout),
        stream_(ioc_) {}

  ~Connection() {
    beast::error_code ignored;
    stream_.socket().shutdown(tcp::socket::shutdown_both, ignored);
    stream_.close();
  }

  Status Connect() {
    beast::error_code ec;
    std::vector<tcp::endpoint> endpoints;
    auto address = net::ip::make_address(url_.host, ec);
    if (!ec) {
      uint16_t port = 0;
      std::from_chars(url_.port.data(), url_.port.data() + url_.port.size(), port);
      endpoints.emplace_back(address, port);
    } else {
      tcp::resolver resolver(ioc_);
      auto results = resolver.resolve(url_.host, url_.port, ec);
      if (ec) return Status::Unavailable("cannot reach " + url_.ToString() + ": " + ec.message());
      for (const auto& entry : results) endpoints.push_back(entry.endpoint());
    }
    stream_.expires_at(deadline_);
    ec = Run([&](auto handler) { stream_.async_connect(endpoints, handler); });
    if (ec == beast::error::timeout) return TimedOut("connect");
    if (ec) return Status::Unavailable("cannot reach " + url_.ToString() + ": " + ec.message());
    return Status::Ok();
  }

  beast::error_code Write(http::request<http::string_body>& req) {
    stream_.expires_at(deadline_);
    return Run([&](auto handler) { http::async_write(stream_, req, handler); });
  }

  template <typename Parser>
  beast::error_code Read(Parser& parser) {
    stream_.expires_at(deadline_);
    return Run([&](auto handler) { http::async_read(stream_, buffer_, parser, handler); });
  }

  template <typename Parser>
  beast::error_code ReadHeader(Parser& parser) {
    stream_.expires_at(deadline_);
    return Run([&](auto handler) { http::async_read_header(stream_, buffer_, parser, handler); });
  }

  template <typename Parser>
  beast::error_code ReadSome(Parser& parser) {
    stream_.expires_at(deadline_);
    return Run([&](auto handler) { http::async_read_some(stream_, buffer_, parser, handler); });
  }

  Status TimedOut(std::string_view what) const {
    return Status::Unavailable(url_.ToString() + ": " + std::string(what) + " timed out after " +
                               std::to_string(timeout_.count()) + " ms");
  }
  Status Failed(std::string_view what, const beast::error_code& ec) const {
    if (ec == beast::error::timeout) return TimedOut(what);
    return Status::Unavailable(url_.ToString() + ": " + std::string(what) + ": " + ec.message());
  }

 private:
  // Starts one operation through `start(handler)` and runs the loop until
  // it completes.
  template <typename Start>
  beast::error_code Run(Start&& start) {
    beast::error_code result = net::error::would_block;
    start([&result](beast::error_code ec, auto&&...) { result = ec; });
    ioc_.restart();
    ioc_.run();
    return result;
  }

  const HttpUrl& url_;
  const std::chrono::milliseconds timeout_;
  const std::chrono::steady_clock::time_point deadline_;
  net::io_context ioc_{1};
  beast::tcp_stream stream_;
  beast::flat_buffer buffer_;
};

http::request<http::string_body> BuildRequest(const HttpUrl& url, std::string_view method,
                                              std::string_view target, std::string_view body,
                                              const std::map<std::string, std::string>& headers,
                                              std::string_view accept) {
  std::string full = url.base_path;
  if (target.empty() || target.front() != '/') full += '/';
  full += target;
  http::request<http::string_body> req;
  req.version(11);
  req.method_string(Bv(method));
  req.target(full);
  req.set(http::field::host, HostHeader(url));
  req.set(http::field::user_agent, "hmpmd");
  req.set(http::field::accept, Bv(accept));
  // A POST, PUT or PATCH says its body is JSON even when empty, so that the
  // server judges the body ("invalid JSON: the text is empty"), not its type.
  if (!body.empty() || method == "POST" || method == "PUT" || method == "PATCH") {
    req.set(http::field::content_type, "application/json");
  }
  for (const auto& [name, value] : headers) req.set(name, value);
  req.body() = std::string(body);
  req.keep_alive(false);
  req.prepare_payload();
  return req;
}

// Splits a byte stream into Server-Sent Events (the WHATWG rules, minus id
// and retry, which we do not use).
class SseParser {
 public:
  // False once `on_event` returns false.
  bool Feed(std::string_view bytes, const SseCallback& on_event) {
    pending_.append(bytes);
    size_t start = 0;
    bool go_on = true;
    for (size_t nl; go_on && (nl = pending_.find('\n', start)) != std::string::npos;) {
      std::string_view line(pending_.data() + start, nl - start);
      if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
      start = nl + 1;
      go_on = Line(line, on_event);
    }
    pending_.erase(0, start);
    return go_on;
  }
  size_t buffered() const { return pending_.size() + data_.size(); }

 private:
  bool Line(std::string_view line, const SseCallback& on_event) {
    if (line.empty()) {
      bool go_on = true;
      if (has_data_) go_on = on_event(event_.empty() ? "message" : event_, data_);
      event_.clear();
      data_.clear();
      has_data_ = false;
      return go_on;
    }
    if (line.front() == ':') return true;  // a comment
    size_t colon = line.find(':');
    std::string_view field = line.substr(0, colon);
    std::string_view value = colon == std::string_view::npos ? "" : line.substr(colon + 1);
    if (!value.empty() && value.front() == ' ') value.remove_prefix(1);
    if (field == "event") {
      event_ = value;
    } else if (field == "data") {
      if (has_data_) data_ += '\n';
      data_ += value;
      has_data_ = true;
    }
    return true;
  }

  std::string pending_;
  std::string event_;
  std::string data_;
  bool has_data_ = false;
};

Status StatusForHttpError(const HttpUrl& url, std::string_view target, unsigned status) {
  std::string message = url.ToString() + ": GET " + std::string(target) + " answered HTTP " +
                        std::to_string(status) + ", not an event stream";
  if (status == 404) return Status::NotFound(std::move(message));
  if (status == 401 || status == 403) return Status::PermissionDenied(std::move(message));
  return Status::Unavailable(std::move(message));
}

Status StreamSseImpl(const HttpUrl& url, std::string_view target,
                     const std::map<std::string, std::string>& headers, const SseCallback& on_event,
                     std::chrono::milliseconds timeout) {
  Connection conn(url, timeout);
  RETURN_IF_ERROR(conn.Connect());
  auto req = BuildRequest(url, "GET", target, "", headers, "text/event-stream");
  std::string what = "GET " + std::string(Sv(req.target()));
  if (auto ec = conn.Write(req); ec) return conn.Failed(what, ec);

  http::response_parser<http::buffer_body> parser;
  parser.body_limit(std::numeric_limits<uint64_t>::max());
  if (auto ec = conn.ReadHeader(parser); ec) return conn.Failed(what, ec);
  if (parser.get().result_int() != 200) {
    return StatusForHttpError(url, Sv(req.target()), parser.get().result_int());
  }
  SseParser sse;
  char buf[8192];
  while (!parser.is_done()) {
    parser.get().body().data = buf;
    parser.get().body().size = sizeof buf;
    beast::error_code ec = conn.ReadSome(parser);
    if (ec == http::error::need_buffer) ec = {};
    size_t n = sizeof buf - parser.get().body().size;
    if (!sse.Feed(std::string_view(buf, n), on_event)) return Status::Ok();
    if (ec) return conn.Failed(what, ec);
    if (sse.buffered() > kMaxSseBuffered) {
      return Status::Corruption(url.ToString() + ": " + what + ": an event exceeds " +
                                std::to_string(kMaxSseBuffered) + " bytes");
    }
  }
  return Status::Unavailable(url.ToString() + ": " + what + ": the server closed the stream");
}

}  // namespace

std::string HttpUrl::ToString() const { return "http://" + HostHeader(*this) + base_path; }

Result<HttpUrl> ParseHttpUrl(std::string_view url) {
  auto bad = [&](std::string_view why) {
    std::string message = "url '" + std::string(url) + "': ";
    if (!why.empty()) message += std::string(why) + "; ";
    return Status::InvalidArgument(message + "expected http://HOST:PORT");
  };
  std::string_view rest = url;
  constexpr std::string_view kScheme = "http://";
  if (rest.size() >= kScheme.size() && ToLower(rest.substr(0, kScheme.size())) == kScheme) {
    rest.remove_prefix(kScheme.size());
  } else if (size_t sep = rest.find("://"); sep != std::string_view::npos) {
    return bad("scheme '" + std::string(rest.substr(0, sep)) + "' is not supported");
  }
  size_t slash = rest.find('/');
  std::string_view authority = rest.substr(0, slash);
  std::string_view base = slash == std::string_view::npos ? "" : rest.substr(slash);
  while (!base.empty() && base.back() == '/') base.remove_suffix(1);
  if (base.find_first_of("?# ") != std::string_view::npos) return bad("bad base path");

  // A token goes in --token-file; user:password@ would otherwise read as
  // a host with a colon.
  if (authority.find('@') != std::string_view::npos) {
    return bad("credentials (user@) are not supported; give a token with --token-file");
  }
  HttpUrl out;
  std::string_view port;
  if (!authority.empty() && authority.front() == '[') {
    size_t close = authority.find(']');
    if (close == std::string_view::npos) return bad("unclosed '['");
    out.host = std::string(authority.substr(1, close - 1));
    std::string_view after = authority.substr(close + 1);
    if (after.empty() || after.front() != ':') return bad("no port");
    port = after.substr(1);
  } else {
    size_t colon = authority.rfind(':');
    if (colon == std::string_view::npos) return bad("no port");
    out.host = std::string(authority.substr(0, colon));
    if (out.host.find(':') != std::string::npos) return bad("put an IPv6 host in brackets");
    port = authority.substr(colon + 1);
  }
  if (out.host.empty()) return bad("no host");
  unsigned number = 0;
  auto [end, err] = std::from_chars(port.data(), port.data() + port.size(), number);
  if (port.empty() || err != std::errc() || end != port.data() + port.size() || number == 0 ||
      number > 65535) {
    return bad("port '" + std::string(port) + "' is not a number from 1 to 65535");
  }
  out.port = std::to_string(number);
  out.base_path = std::string(base);
  return out;
}

Result<HttpResponse> HttpCall(const HttpUrl& url, std::string_view method, std::string_view target,
                              std::string_view body,
                              const std::map<std::string, std::string>& headers,
                              std::chrono::milliseconds timeout) {
  try {
    Connection conn(url, timeout);
    RETURN_IF_ERROR(conn.Connect());
    auto req = BuildRequest(url, method, target, body, headers, "application/json, */*");
    std::string what = std::string(method) + " " + std::string(Sv(req.target()));
    beast::error_code write_ec = conn.Write(req);
    if (write_ec == beast::error::timeout) return conn.TimedOut(what);
    // A server that refuses the request (413) may answer before it has read
    // the whole body; its answer is still worth reading.
    http::response_parser<http::string_body> parser;
    parser.body_limit(kMaxResponseBytes);
    parser.skip(beast::iequals(Bv(method), "HEAD"));  // a HEAD answer has no body
    beast::error_code read_ec = conn.Read(parser);
    if (read_ec) return conn.Failed(what, write_ec ? write_ec : read_ec);

    auto res = parser.release();
    HttpResponse out;
    out.status = static_cast<int>(res.result_int());
    out.content_type = std::string(Sv(res[http::field::content_type]));
    for (const auto& field : res) {
      auto [it, inserted] =
          out.headers.emplace(ToLower(Sv(field.name_string())), std::string(Sv(field.value())));
      if (!inserted) {
        it->second += ", ";
        it->second += Sv(field.value());
      }
    }
    out.body = std::move(res.body());
    return out;
  } catch (const std::exception& e) {
    return Status::Internal(url.ToString() + ": " + e.what());
  }
}

Status StreamSse(const HttpUrl& url, std::string_view target,
                 const std::map<std::string, std::string>& headers, const SseCallback& on_event,
                 std::chrono::milliseconds timeout) {
  try {
    return StreamSseImpl(url, target, headers, on_event, timeout);
  } catch (const std::exception& e) {
    return Status::Internal(url.ToString() + ": " + e.what());
  }
}

}  // namespace hmpmd
