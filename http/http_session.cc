#include "http_session.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <boost/asio/write.hpp>
#include <cctype>
#include <charconv>
#include <cstdio>
#include <exception>
#include <optional>
#include <utility>

#include "hmpmd/http/http_target.h"

namespace hmpmd {
namespace http_internal {
namespace {

constexpr char kSseHead[] =
    "HTTP/1.1 200 OK\r\n"
    "Server: hmpmd\r\n"
    "Content-Type: text/event-stream\r\n"
    "Cache-Control: no-cache\r\n"
    "X-Accel-Buffering: no\r\n"
    "\r\n";
// How long a connection closed after an error keeps draining what the
// client still sends, so that the client reads our error instead of a reset.
constexpr std::chrono::milliseconds kLinger{2000};

std::string EscapeJson(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (char ch : s) {
    auto c = static_cast<unsigned char>(ch);
    if (c == '"' || c == '\\') {
      out += '\\';
      out += ch;
    } else if (c < 0x20) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\u%04x", c);
      out += buf;
    } else {
      out += ch;
    }
  }
  return out;
}

std::string_view Sv(beast::string_view s) { return {s.data(), s.size()}; }

std::string ToLower(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

bool HasCrLf(std::string_view s) { return s.find_first_of("\r\n") != std::string_view::npos; }

// A header name of token characters (RFC 9110), so that it cannot break
// the head.
bool IsHeaderName(std::string_view s) {
  if (s.empty()) return false;
  for (char ch : s) {
    auto c = static_cast<unsigned char>(ch);
    if (c <= 0x20 || c >= 0x7f || ch == ':' || ch == '(' || ch == ')' || ch == ',' || ch == '"' ||
        ch == '/' || ch == ';' || ch == '<' || ch == '>' || ch == '=' || ch == '?' || ch == '@' ||
        ch == '[' || ch == '\\' || ch == ']' || ch == '{' || ch == '}') {
      return false;
    }
  }
  return true;
}

// Headers the server sets itself from the body and the connection.
bool IsFramingHeader(std::string_view name) {
  const beast::string_view n(name.data(), name.size());
  return beast::iequals(n, "content-length") || beast::iequals(n, "connection") ||
         beast::iequals(n, "transfer-encoding");
}

void AppendNumber(std::string& out, uint64_t v) {
  char buf[24];
  auto [end, ec] = std::to_chars(buf, buf + sizeof buf, v);
  out.append(buf, end);
}

bool IsHttpParseError(const beast::error_code& ec) {
  return ec.category() == http::make_error_code(http::error::bad_method).category();
}

HttpRequest ToHttpRequest(http::request<http::string_body>&& req, HttpTarget&& target) {
  HttpRequest out;
  out.method = std::string(Sv(req.method_string()));
  out.target = std::move(target.origin);
  out.path = std::move(target.path);
  out.query = std::move(target.query);
  for (const auto& field : req) {
    auto [it, inserted] =
        out.headers.emplace(ToLower(Sv(field.name_string())), std::string(Sv(field.value())));
    if (!inserted) {
      it->second += ", ";
      it->second += Sv(field.value());
    }
  }
  out.body = std::move(req.body());
  return out;
}

bool IsImplemented(const HttpServerOptions& options, std::string_view method) {
  for (const std::string& m : options.methods) {
    if (m == method) return true;
  }
  return false;
}

// "request body exceeds the limit of 1 MiB (1048576 bytes; set by --max-spec-mb)"
std::string BodyLimitError(const HttpServerOptions& options) {
  constexpr size_t kMiB = size_t{1} << 20;
  const size_t limit = options.max_body_bytes;
  std::string out = "request body exceeds the limit of ";
  std::string detail;
  if (limit >= kMiB && limit % kMiB == 0) {
    out += std::to_string(limit / kMiB) + " MiB";
    detail = std::to_string(limit) + " bytes";
  } else {
    out += std::to_string(limit) + " bytes";
  }
  if (!options.max_body_flag.empty()) {
    detail += (detail.empty() ? "set by " : "; set by ") + options.max_body_flag;
  }
  return detail.empty() ? out : out + " (" + detail + ")";
}

// The first transfer coding in `value` ("gzip, chunked") other than
// chunked; empty when there is none.
std::string UnsupportedCoding(std::string_view value) {
  while (!value.empty()) {
    const size_t comma = std::min(value.find(','), value.size());
    std::string_view coding = value.substr(0, comma);
    while (!coding.empty() && (coding.front() == ' ' || coding.front() == '\t')) {
      coding.remove_prefix(1);
    }
    coding = coding.substr(0, coding.find_first_of(" \t;"));
    if (!coding.empty() &&
        !beast::iequals(beast::string_view(coding.data(), coding.size()), "chunked")) {
      return std::string(coding);
    }
    value.remove_prefix(std::min(comma + 1, value.size()));
  }
  return "";
}

}  // namespace

HttpResponse ErrorResponse(int status, std::string_view message) {
  HttpResponse r;
  r.status = status;
  r.body = "{\"error\": \"" + EscapeJson(message) + "\"}";
  return r;
}

void Session::Start() {
  net::post(strand_, [self = shared_from_this()] { self->DoRead(); });
}

void Session::Reject() {
  net::post(strand_,
            [self = shared_from_this()] { self->WriteError(503, "too many connections"); });
}

void Session::PostClose() {
  net::post(strand_, [self = shared_from_this()] { self->Close(); });
}

void Session::PostResponse(HttpResponse response) {
  core_->PostIfRunning(strand_, [self = shared_from_this(), r = std::move(response)]() mutable {
    self->WriteResponse(std::move(r));
  });
}

bool Session::EnqueueLocked(Chunk chunk) {
  if (sse_queue_.size() >= core_->options.sse_max_queued_chunks) return false;
  sse_queue_.push_back(std::move(chunk));
  if (sse_ready_ && !sse_flush_posted_) {
    sse_flush_posted_ = true;
    net::post(strand_, [self = shared_from_this()] { self->FlushSse(); });
  }
  return true;
}

void Session::DoRead() {
  if (closed_) return;
  parser_.emplace();
  parser_->body_limit(core_->options.max_body_bytes);
  stream_.expires_after(core_->options.idle_timeout);
  http::async_read_header(stream_, buffer_, *parser_,
                          [self = shared_from_this()](beast::error_code ec, size_t) {
                            if (ec) return self->OnRead(ec);
                            self->OnHeader();
                          });
}

void Session::OnHeader() {
  if (closed_) return;
  // Beast frames a body by its last coding, chunked, and leaves the others
  // to us: "gzip, chunked" was read as a plain body. We decode none, so
  // the request is refused (RFC 9112 §6.1: 501), and the connection closed
  // since its body cannot be skipped reliably.
  if (std::string coding = UnsupportedCoding(Sv(parser_->get()[http::field::transfer_encoding]));
      !coding.empty()) {
    version_ = parser_->get().version();
    return WriteError(
        501, "Transfer-Encoding '" + ShownInError(coding) + "' is not supported (only chunked)");
  }
  bool expects_continue =
      !parser_->is_done() && beast::iequals(parser_->get()[http::field::expect], "100-continue");
  if (!expects_continue) return ReadBody();
  static constexpr char kContinue[] = "HTTP/1.1 100 Continue\r\n\r\n";
  net::async_write(stream_, net::buffer(kContinue, sizeof kContinue - 1),
                   [self = shared_from_this()](beast::error_code ec, size_t) {
                     if (ec) return self->Close();
                     self->ReadBody();
                   });
}

void Session::ReadBody() {
  if (closed_) return;
  stream_.expires_after(core_->options.idle_timeout);
  http::async_read(stream_, buffer_, *parser_,
                   [self = shared_from_this()](beast::error_code ec, size_t) { self->OnRead(ec); });
}

void Session::OnRead(beast::error_code ec) {
  if (closed_) return;
  if (ec == http::error::body_limit) return WriteError(413, BodyLimitError(core_->options));
  if (ec == http::error::header_limit) return WriteError(431, "request headers too large");
  // end_of_stream is a clean close between requests; partial_message is
  // a peer that vanished mid-request: neither gets an answer.
  if (ec && IsHttpParseError(ec) && ec != http::error::end_of_stream &&
      ec != http::error::partial_message) {
    return WriteError(400, "bad request: " + ec.message());
  }
  if (ec) {
    if (ec != http::error::end_of_stream && ec != beast::error::timeout) {
      spdlog::debug("http: connection {} read: {}", id_, ec.message());
    }
    return Close();
  }
  auto req = parser_->release();
  version_ = req.version();
  keep_alive_ = req.keep_alive();
  head_ = req.method() == http::verb::head;
  // The request was read whole, so the connection stays usable after these
  // answers. The method is judged first: CONNECT's target is no path, and
  // what it needs to hear is that the server does not do CONNECT.
  const std::string_view method = Sv(req.method_string());
  if (!IsImplemented(core_->options, method)) {
    return WriteResponse(
        ErrorResponse(501, "method " + ShownInError(method) + " is not implemented"));
  }
  auto target = ParseHttpTarget(Sv(req.target()));
  if (!target.ok()) return WriteResponse(ErrorResponse(400, target.status().message()));
  HttpRequest request = ToHttpRequest(std::move(req), std::move(target).value());
  if (peer_.empty()) {
    beast::error_code no_peer;
    const auto peer = stream_.socket().remote_endpoint(no_peer);
    if (!no_peer) {
      const std::string host = peer.address().to_string();
      peer_ =
          (peer.address().is_v6() ? "[" + host + "]" : host) + ":" + std::to_string(peer.port());
    }
  }
  request.peer = peer_;
  // The stream takes no query parameters: one given goes to the handler,
  // which refuses it (RestApi: 400 naming it). "?" and "?&" name none.
  if (request.method == "GET" && request.path == kHttpEventsPath &&
      request.query.find_first_not_of('&') == std::string::npos) {
    if (core_->options.events_gate) {
      if (std::optional<HttpResponse> refused = core_->options.events_gate(request)) {
        return WriteResponse(std::move(*refused));
      }
    }
    return StartSse();
  }

  auto state = std::make_shared<ReplyState>(shared_from_this());
  HttpReply reply = [state](HttpResponse r) { state->Send(std::move(r)); };
  handler_thread_.store(std::this_thread::get_id(), std::memory_order_release);
  try {
    core_->handler(std::move(request), reply);
  } catch (const std::exception& e) {
    spdlog::error("http: handler threw: {}", e.what());
    reply(ErrorResponse(500, std::string("internal error: ") + e.what()));
  } catch (...) {
    spdlog::error("http: handler threw a non-exception");
    reply(ErrorResponse(500, "internal error"));
  }
  handler_thread_.store(std::thread::id(), std::memory_order_release);
}

void Session::Deliver(HttpResponse r) {
  // Answered from inside the handler on this session's strand (a snapshot
  // read): write now instead of posting, which saves a lock, a queued
  // handler and a wake-up per request.
  if (handler_thread_.load(std::memory_order_acquire) == std::this_thread::get_id()) {
    return WriteResponse(std::move(r));
  }
  PostResponse(std::move(r));
}

void Session::WriteResponse(HttpResponse r) {
  if (closed_) return;
  if (r.status < 200 || r.status > 599) {
    spdlog::error("http: handler answered with status {}", r.status);
    r = ErrorResponse(500, "handler answered with an invalid status");
  }
  if (r.status == 204 || r.status == 304) {  // they have no body
    r.body.clear();
    r.shared_body.reset();
  }
  const bool keep_alive = keep_alive_ && !core_->Stopping();
  // The head is formatted into a buffer the session keeps, and sent with the
  // body (owned by out_, or shared with other replies) in one gathered
  // write: no copy of the body and, once the buffer has grown, no
  // allocation per response.
  out_ = std::move(r);
  const std::string_view body = out_.payload();
  std::string& h = head_buf_;
  h.clear();
  h += version_ == 10 ? "HTTP/1.0 " : "HTTP/1.1 ";
  AppendNumber(h, static_cast<uint64_t>(out_.status));
  h += ' ';
  h += Sv(http::obsolete_reason(static_cast<http::status>(out_.status)));
  h += "\r\nServer: hmpmd\r\n";
  if (!out_.content_type.empty() && !HasCrLf(out_.content_type)) {
    h += "Content-Type: ";
    h += out_.content_type;
    h += "\r\n";
  }
  for (const auto& [name, value] : out_.headers) {
    if (!IsHeaderName(name) || HasCrLf(value) || IsFramingHeader(name)) continue;
    h += name;
    h += ": ";
    h += value;
    h += "\r\n";
  }
  if (out_.status != 204) {  // RFC 9110 §8.6: a 204 has no Content-Length
    h += "Content-Length: ";
    AppendNumber(h, body.size());
    h += "\r\n";
  }
  if (version_ == 10 && keep_alive) h += "Connection: keep-alive\r\n";
  if (version_ != 10 && !keep_alive) h += "Connection: close\r\n";
  h += "\r\n";
  out_buffers_[0] = net::buffer(h);
  out_buffers_[1] = head_ ? net::const_buffer() : net::buffer(body.data(), body.size());
  stream_.expires_after(core_->options.idle_timeout);
  net::async_write(stream_, out_buffers_,
                   [self = shared_from_this(), keep_alive](beast::error_code ec, size_t) {
                     self->out_.body.clear();  // keeps its capacity for the next answer
                     self->out_.shared_body.reset();
                     if (ec || !keep_alive) return self->Close();
                     self->DoRead();
                   });
}

void Session::WriteError(int status, std::string message) {
  if (closed_) return;
  keep_alive_ = false;
  res_.emplace(static_cast<http::status>(status), version_ ? version_ : 11);
  res_->set(http::field::server, "hmpmd");
  res_->set(http::field::content_type, "application/json");
  res_->body() = ErrorResponse(status, message).body;
  res_->keep_alive(false);
  res_->prepare_payload();
  stream_.expires_after(core_->options.idle_timeout);
  http::async_write(stream_, *res_, [self = shared_from_this()](beast::error_code ec, size_t) {
    self->res_.reset();
    if (ec) return self->Close();
    beast::error_code ignored;
    self->stream_.socket().shutdown(tcp::socket::shutdown_send, ignored);
    self->stream_.expires_after(std::min(kLinger, self->core_->options.idle_timeout));
    self->Drain();
  });
}

void Session::Drain() {
  if (closed_) return;
  stream_.async_read_some(net::buffer(scratch_),
                          [self = shared_from_this()](beast::error_code ec, size_t) {
                            if (ec) return self->Close();
                            self->Drain();
                          });
}

void Session::StartSse() {
  SseHello hello;
  bool full = false;
  {
    std::lock_guard<std::mutex> lock(core_->mu);
    full = core_->sse_clients.size() >= core_->options.max_sse_clients;
    if (!full) {
      core_->sse_clients[id_] = shared_from_this();
      hello = core_->hello;
    }
  }
  if (full) return WriteError(503, "too many event-stream clients");
  // The client is registered before the hello runs, so an event broadcast
  // meanwhile is queued behind the snapshot: seen twice at worst, never
  // missed.
  std::string first = kSseHead;
  if (hello) {
    try {
      first += hello();
    } catch (const std::exception& e) {
      spdlog::error("http: SSE hello threw: {}", e.what());
    }
  }
  {
    std::lock_guard<std::mutex> lock(core_->mu);
    sse_queue_.push_front(std::make_shared<const std::string>(std::move(first)));
    sse_ready_ = true;
  }
  WatchSse();
  FlushSse();
}

void Session::WatchSse() {
  if (closed_) return;
  stream_.expires_never();  // only the write deadline applies to SSE
  stream_.async_read_some(net::buffer(scratch_),
                          [self = shared_from_this()](beast::error_code ec, size_t) {
                            if (ec) return self->Close();
                            self->WatchSse();
                          });
}

void Session::FlushSse() {
  {
    std::lock_guard<std::mutex> lock(core_->mu);
    sse_flush_posted_ = false;
    if (closed_ || sse_writing_ || !sse_ready_ || sse_queue_.empty()) return;
    sse_inflight_.assign(std::make_move_iterator(sse_queue_.begin()),
                         std::make_move_iterator(sse_queue_.end()));
    sse_queue_.clear();
  }
  sse_buffers_.clear();
  for (const Chunk& c : sse_inflight_) sse_buffers_.push_back(net::buffer(*c));
  sse_writing_ = true;
  // A read is pending, so this deadline applies to the write alone.
  stream_.expires_after(core_->options.idle_timeout);
  net::async_write(stream_, sse_buffers_,
                   [self = shared_from_this()](beast::error_code ec, size_t) {
                     self->sse_writing_ = false;
                     self->sse_inflight_.clear();
                     self->sse_buffers_.clear();
                     if (ec) return self->Close();
                     self->FlushSse();
                   });
}

void Session::Close() {
  if (closed_) return;
  closed_ = true;
  auto self = shared_from_this();
  {
    std::lock_guard<std::mutex> lock(core_->mu);
    core_->sessions.erase(id_);
    core_->sse_clients.erase(id_);
    sse_queue_.clear();
  }
  beast::error_code ignored;
  stream_.socket().shutdown(tcp::socket::shutdown_both, ignored);
  stream_.close();
}

void ServerCore::Broadcast(Chunk chunk) {
  std::lock_guard<std::mutex> lock(mu);
  if (stopped || sse_clients.empty()) return;
  broadcasts.push_back(std::move(chunk));
  if (fanout_posted) return;
  fanout_posted = true;
  net::post(ioc, [core = this] { core->FanOut(); });  // safe under mu: Stop() has not begun
}

void ServerCore::FanOut() {
  std::lock_guard<std::mutex> lock(mu);
  fanout_posted = false;
  std::vector<Chunk> chunks;
  chunks.swap(broadcasts);
  if (stopped) return;
  for (const Chunk& chunk : chunks) {
    for (auto it = sse_clients.begin(); it != sse_clients.end();) {
      if (it->second->EnqueueLocked(chunk)) {
        ++it;
        continue;
      }
      spdlog::warn("http: SSE client {} is {} chunks behind; disconnecting it", it->first,
                   options.sse_max_queued_chunks);
      it->second->PostClose();  // safe under mu: Stop() has not begun
      it = sse_clients.erase(it);
    }
  }
}

}  // namespace http_internal
}  // namespace hmpmd
