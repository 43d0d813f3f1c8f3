// HttpServer internals. Every connection is a Session on its own strand;
// ServerCore holds what the sessions share.
//
// Why the ownership looks like this:
//  - Sessions are shared_ptr-owned by their pending Asio handlers and by
//    the reply closures handed to the handler. Each session owns the core,
//    so the io_context outlives every socket even when the controller keeps
//    a reply after the HttpServer is gone.
//  - A work guard keeps run() going while the server runs, even when no
//    socket operation is pending (every connection waiting on the handler).
//  - A thread outside the server posts to the io_context only under
//    ServerCore::mu and only before Stop() (PostIfRunning). Stop() posts a
//    close to every connection, then drops the work guard and joins the
//    threads once run() runs out of work, so no queued handler is left
//    holding a session, and the session -> core -> io_context -> handler ->
//    session cycle never outlives Stop().
//  - Core-level handlers (accept, keepalive) hold a raw ServerCore*: they
//    never outlive the io_context that the core owns.
#include "http_server.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/strand.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <cctype>
#include <charconv>
#include <deque>
#include <exception>
#include <mutex>
#include <optional>
#include <thread>
#include <unordered_map>
#include <utility>
#include <vector>

namespace hmpmd {
namespace http_internal {

namespace beast = boost::beast;
namespace http = beast::http;
namespace net = boost::asio;
using tcp = net::ip::tcp;
using Chunk = std::shared_ptr<const std::string>;

namespace {

constexpr char kSseHead[] =
    "HTTP/1.1 200 OK\r\n"
    "Server: hmpmd\r\n"
    "Content-Type: text/event-stream\r\n"
    "Cache-Control: no-cache\r\n"
    "X-Accel-Buffering: no\r\n"
    "\r\n";
constexpr char kKeepaliveChunk[] = ": keepalive\n\n";
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

HttpResponse ErrorResponse(int status, std::string_view message) {
  HttpResponse r;
  r.status = status;
  r.body = "{\"error\": \"" + EscapeJson(message) + "\"}";
  return r;
}

std::string_view Sv(beast::string_view s) { return {s.data(), s.size()}; }

std::string ToLower(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

bool HasCrLf(std::string_view s) { return s.find_first_of("\r\n") != std::string_view::npos; }

bool IsHttpParseError(const beast::error_code& ec) {
  return ec.category() == http::make_error_code(http::error::bad_method).category();
}

HttpRequest ToHttpRequest(http::request<http::string_body>&& req) {
  HttpRequest out;
  out.method = std::string(Sv(req.method_string()));
  out.target = std::string(Sv(req.target()));
  size_t q = out.target.find('?');
  out.path = out.target.substr(0, q);
  if (q != std::string::npos) out.query = out.target.substr(q + 1);
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

}  // namespace

class Session;

// What the sessions share. The fields under `mu` are guarded by it.
struct ServerCore : std::enable_shared_from_this<ServerCore> {
  ServerCore(HttpServerOptions o, HttpHandler h)
      : options(std::move(o)),
        handler(std::move(h)),
        ioc(std::max(1, options.threads)),
        work(ioc.get_executor()),
        acceptor(net::make_strand(ioc)),
        accept_retry(acceptor.get_executor()),
        keepalive(net::make_strand(ioc)) {}

  // Posts `fn` to `ex` unless Stop() has begun. Any thread.
  template <typename Fn>
  bool PostIfRunning(const net::any_io_executor& ex, Fn&& fn) {
    std::lock_guard<std::mutex> lock(mu);
    if (stopped) return false;
    net::post(ex, std::forward<Fn>(fn));
    return true;
  }
  void Broadcast(Chunk chunk);
  bool Stopping() const { return stopping.load(std::memory_order_acquire); }

  const HttpServerOptions options;
  HttpHandler handler;  // called on server threads; cleared after they are joined
  net::io_context ioc;
  net::executor_work_guard<net::io_context::executor_type> work;  // reset by Stop()
  tcp::acceptor acceptor;                                         // acceptor strand
  net::steady_timer accept_retry;                                 // acceptor strand
  net::steady_timer keepalive;                                    // its own strand
  std::atomic<uint16_t> port{0};
  std::atomic<bool> stopping{false};  // mirrors `stopped` for lock-free reads

  std::mutex mu;
  bool started = false;                                                // guarded by mu
  bool stopped = false;                                                // guarded by mu
  SseHello hello;                                                      // guarded by mu
  uint64_t next_id = 1;                                                // guarded by mu
  std::unordered_map<uint64_t, std::weak_ptr<Session>> sessions;       // guarded by mu
  std::unordered_map<uint64_t, std::shared_ptr<Session>> sse_clients;  // guarded by mu
  std::vector<std::thread> threads;                                    // guarded by mu
};

// One connection. Every method runs on the session's strand unless it says
// "any thread". The SSE queue fields are guarded by core_->mu.
class Session : public std::enable_shared_from_this<Session> {
 public:
  Session(std::shared_ptr<ServerCore> core, tcp::socket socket, uint64_t id)
      : core_(std::move(core)),
        strand_(socket.get_executor()),
        stream_(std::move(socket)),
        id_(id) {}

  // Any thread.
  void Start() {
    net::post(strand_, [self = shared_from_this()] { self->DoRead(); });
  }
  // Any thread: answers 503 and closes.
  void Reject() {
    net::post(strand_,
              [self = shared_from_this()] { self->WriteError(503, "too many connections"); });
  }
  // Any thread, before Stop() joins the server threads.
  void PostClose() {
    net::post(strand_, [self = shared_from_this()] { self->Close(); });
  }
  // Any thread. Dropped once Stop() has begun.
  void PostResponse(HttpResponse response) {
    core_->PostIfRunning(strand_, [self = shared_from_this(), r = std::move(response)]() mutable {
      self->WriteResponse(std::move(r));
    });
  }
  // REQUIRES: core_->mu held and Stop() not begun. False when the queue is
  // full; the caller then disconnects this client.
  bool EnqueueLocked(Chunk chunk) {
    if (sse_queue_.size() >= core_->options.sse_max_queued_chunks) return false;
    sse_queue_.push_back(std::move(chunk));
    if (sse_ready_ && !sse_flush_posted_) {
      sse_flush_posted_ = true;
      net::post(strand_, [self = shared_from_this()] { self->FlushSse(); });
    }
    return true;
  }

 private:
  // Called exactly once per request, from any thread, via the HttpReply.
  // Destroying it unreplied answers 500, so a lost reply never hangs a client.
  struct ReplyState {
    explicit ReplyState(std::shared_ptr<Session> s) : session(std::move(s)) {}
    ~ReplyState() {
      if (replied.exchange(true)) return;
      try {
        session->PostResponse(ErrorResponse(500, "the request was dropped without a reply"));
      } catch (...) {  // a destructor must not throw; the client times out
      }
    }
    void Send(HttpResponse r) {
      if (!replied.exchange(true)) session->PostResponse(std::move(r));
    }
    std::shared_ptr<Session> session;
    std::atomic<bool> replied{false};
  };

  // Reads the header first, so that a client waiting on
  // "Expect: 100-continue" (curl, for large bodies) is told to go on.
  void DoRead() {
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

  void OnHeader() {
    if (closed_) return;
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

  void ReadBody() {
    if (closed_) return;
    stream_.expires_after(core_->options.idle_timeout);
    http::async_read(
        stream_, buffer_, *parser_,
        [self = shared_from_this()](beast::error_code ec, size_t) { self->OnRead(ec); });
  }

  void OnRead(beast::error_code ec) {
    if (closed_) return;
    if (ec == http::error::body_limit) {
      return WriteError(
          413, "request body exceeds " + std::to_string(core_->options.max_body_bytes) + " bytes");
    }
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
    HttpRequest request = ToHttpRequest(std::move(req));
    if (request.method == "GET" && request.path == kHttpEventsPath) return StartSse();

    auto state = std::make_shared<ReplyState>(shared_from_this());
    HttpReply reply = [state](HttpResponse r) { state->Send(std::move(r)); };
    try {
      core_->handler(std::move(request), reply);
    } catch (const std::exception& e) {
      spdlog::error("http: handler threw: {}", e.what());
      reply(ErrorResponse(500, std::string("internal error: ") + e.what()));
    } catch (...) {
      spdlog::error("http: handler threw a non-exception");
      reply(ErrorResponse(500, "internal error"));
    }
  }

  void WriteResponse(HttpResponse r) {
    if (closed_) return;
    if (r.status < 200 || r.status > 599) {
      spdlog::error("http: handler answered with status {}", r.status);
      r = ErrorResponse(500, "handler answered with an invalid status");
    }
    if (r.status == 204 || r.status == 304) r.body.clear();  // they have no body
    bool keep_alive = keep_alive_ && !core_->Stopping();
    res_.emplace();
    try {
      res_->version(version_);
      res_->result(static_cast<unsigned>(r.status));
      res_->set(http::field::server, "hmpmd");
      if (!r.content_type.empty() && !HasCrLf(r.content_type)) {
        res_->set(http::field::content_type, r.content_type);
      }
      for (const auto& [name, value] : r.headers) {
        if (name.empty() || HasCrLf(name) || HasCrLf(value)) continue;
        res_->set(name, value);
      }
      res_->keep_alive(keep_alive);
      if (head_) {  // the length the GET would have, and no body
        res_->content_length(r.body.size());
      } else {
        res_->body() = std::move(r.body);
        res_->prepare_payload();
      }
    } catch (const std::exception& e) {
      spdlog::error("http: cannot build response: {}", e.what());
      return Close();
    }
    stream_.expires_after(core_->options.idle_timeout);
    http::async_write(stream_, *res_,
                      [self = shared_from_this(), keep_alive](beast::error_code ec, size_t) {
                        self->res_.reset();
                        if (ec || !keep_alive) return self->Close();
                        self->DoRead();
                      });
  }

  // Answers with a JSON error, then closes after draining the rest of the
  // request for up to kLinger.
  void WriteError(int status, std::string message) {
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

  void Drain() {
    if (closed_) return;
    stream_.async_read_some(net::buffer(scratch_),
                            [self = shared_from_this()](beast::error_code ec, size_t) {
                              if (ec) return self->Close();
                              self->Drain();
                            });
  }

  // Turns this connection into an SSE stream: head, hello, then broadcasts.
  void StartSse() {
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

  // Reads (and ignores) whatever the SSE client sends, to notice it leave.
  void WatchSse() {
    if (closed_) return;
    stream_.expires_never();  // only the write deadline applies to SSE
    stream_.async_read_some(net::buffer(scratch_),
                            [self = shared_from_this()](beast::error_code ec, size_t) {
                              if (ec) return self->Close();
                              self->WatchSse();
                            });
  }

  void FlushSse() {
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

  void Close() {
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

  const std::shared_ptr<ServerCore> core_;
  const net::any_io_executor strand_;
  beast::tcp_stream stream_;
  const uint64_t id_;
  beast::flat_buffer buffer_;
  std::optional<http::request_parser<http::string_body>> parser_;
  std::optional<http::response<http::string_body>> res_;  // the one being written
  std::array<char, 4096> scratch_{};                      // drained or ignored input
  unsigned version_ = 11;
  bool keep_alive_ = false;
  bool head_ = false;  // the request is HEAD
  bool closed_ = false;
  // SSE, strand only.
  bool sse_writing_ = false;
  std::vector<Chunk> sse_inflight_;
  std::vector<net::const_buffer> sse_buffers_;
  // SSE, guarded by core_->mu.
  std::deque<Chunk> sse_queue_;
  bool sse_ready_ = false;  // head and hello are queued; flushing may start
  bool sse_flush_posted_ = false;
};

void ServerCore::Broadcast(Chunk chunk) {
  std::lock_guard<std::mutex> lock(mu);
  if (stopped) return;
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

namespace {

void DoAccept(ServerCore* core);

void OnAccept(ServerCore* core, beast::error_code ec, tcp::socket socket) {
  if (ec == net::error::operation_aborted || !core->acceptor.is_open()) return;
  if (ec) {
    // Typically out of file descriptors: back off instead of spinning.
    spdlog::warn("http: accept: {}", ec.message());
    core->accept_retry.expires_after(std::chrono::milliseconds(100));
    core->accept_retry.async_wait([core](beast::error_code wait_ec) {
      if (!wait_ec && !core->Stopping()) DoAccept(core);
    });
    return;
  }
  std::shared_ptr<Session> session;
  bool reject = false;
  {
    std::lock_guard<std::mutex> lock(core->mu);
    if (core->stopped) return;  // `socket` closes as it goes
    uint64_t id = core->next_id++;
    reject = core->sessions.size() >= core->options.max_connections;
    session = std::make_shared<Session>(core->shared_from_this(), std::move(socket), id);
    core->sessions[id] = session;
  }
  if (reject) {
    session->Reject();
  } else {
    session->Start();
  }
  DoAccept(core);
}

void DoAccept(ServerCore* core) {
  core->acceptor.async_accept(
      net::make_strand(core->ioc),
      [core](beast::error_code ec, tcp::socket socket) { OnAccept(core, ec, std::move(socket)); });
}

void ArmKeepalive(ServerCore* core) {
  core->keepalive.expires_after(core->options.sse_keepalive);
  core->keepalive.async_wait([core](beast::error_code ec) {
    if (ec || core->Stopping()) return;
    core->Broadcast(std::make_shared<const std::string>(kKeepaliveChunk));
    ArmKeepalive(core);
  });
}

void RunLoop(ServerCore* core) {
  for (;;) {
    try {
      core->ioc.run();
      return;
    } catch (const std::exception& e) {
      spdlog::error("http: server thread caught: {}", e.what());
    } catch (...) {
      spdlog::error("http: server thread caught a non-exception");
    }
  }
}

// "host:port", "[v6]:port", "*:port" or ":port" -> endpoint.
Result<tcp::endpoint> ResolveBind(net::io_context& ioc, const std::string& bind) {
  auto invalid = [&](std::string why) {
    return Status::InvalidArgument("http bind '" + bind + "': " + why);
  };
  size_t colon = bind.rfind(':');
  if (colon == std::string::npos) return invalid("expected HOST:PORT");
  std::string host = bind.substr(0, colon);
  std::string port_text = bind.substr(colon + 1);
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']') {
    host = host.substr(1, host.size() - 2);
  }
  unsigned port = 0;
  auto [end, err] = std::from_chars(port_text.data(), port_text.data() + port_text.size(), port);
  if (port_text.empty() || err != std::errc() || end != port_text.data() + port_text.size() ||
      port > 65535) {
    return invalid("port '" + port_text + "' is not a number from 0 to 65535");
  }
  if (host.empty() || host == "*") return tcp::endpoint(tcp::v4(), static_cast<uint16_t>(port));
  beast::error_code ec;
  auto address = net::ip::make_address(host, ec);
  if (!ec) return tcp::endpoint(address, static_cast<uint16_t>(port));
  tcp::resolver resolver(ioc);
  auto results = resolver.resolve(host, port_text, ec);
  if (ec || results.empty()) {
    return invalid("cannot resolve host '" + host + "'" + (ec ? ": " + ec.message() : ""));
  }
  return results.begin()->endpoint();
}

}  // namespace
}  // namespace http_internal

using http_internal::ServerCore;
namespace net = boost::asio;

HttpServer::HttpServer(HttpServerOptions options, HttpHandler handler)
    : core_(std::make_shared<ServerCore>(std::move(options), std::move(handler))) {}

HttpServer::~HttpServer() { Stop(); }

Status HttpServer::Start() {
  ServerCore& c = *core_;
  {
    std::lock_guard<std::mutex> lock(c.mu);
    if (c.started || c.stopped) {
      return Status::InvalidArgument("http server: Start() called twice or after Stop()");
    }
    c.started = true;
  }
  const std::string& bind = c.options.bind;
  ASSIGN_OR_RETURN(auto endpoint, http_internal::ResolveBind(c.ioc, bind));
  boost::system::error_code ec;
  auto fail = [&](std::string_view what) {
    boost::system::error_code ignored;
    c.acceptor.close(ignored);
    return Status::Unavailable("http: cannot " + std::string(what) + " " + bind + ": " +
                               ec.message());
  };
  if (c.acceptor.open(endpoint.protocol(), ec); ec) return fail("open a socket for");
  if (c.acceptor.set_option(net::socket_base::reuse_address(true), ec); ec) {
    return fail("configure");
  }
  if (c.acceptor.bind(endpoint, ec); ec) return fail("bind");
  if (c.acceptor.listen(net::socket_base::max_listen_connections, ec); ec) {
    return fail("listen on");
  }
  auto local = c.acceptor.local_endpoint(ec);
  if (ec) return fail("read the port of");
  c.port.store(local.port());

  http_internal::DoAccept(&c);
  http_internal::ArmKeepalive(&c);
  std::vector<std::thread> threads;
  Status status;
  try {
    for (int i = 0; i < std::max(1, c.options.threads); ++i) {
      threads.emplace_back([core = &c] { http_internal::RunLoop(core); });
    }
  } catch (const std::exception& e) {
    status = Status::Internal(std::string("http: cannot start a server thread: ") + e.what());
  }
  {
    std::lock_guard<std::mutex> lock(c.mu);
    c.threads = std::move(threads);
  }
  if (!status.ok()) Stop();
  return status;
}

uint16_t HttpServer::port() const { return core_->port.load(); }

void HttpServer::Stop() {
  ServerCore& c = *core_;
  std::vector<std::thread> threads;
  std::vector<std::shared_ptr<http_internal::Session>> live;
  {
    std::lock_guard<std::mutex> lock(c.mu);
    if (c.stopped) return;
    c.stopped = true;
    c.stopping.store(true, std::memory_order_release);
    threads.swap(c.threads);
    for (auto& [id, weak] : c.sessions) {
      if (auto s = weak.lock()) live.push_back(std::move(s));
    }
  }
  if (!threads.empty()) {
    net::post(c.acceptor.get_executor(), [core = &c] {
      boost::system::error_code ignored;
      core->acceptor.close(ignored);
      core->accept_retry.cancel();
    });
    net::post(c.keepalive.get_executor(), [core = &c] { core->keepalive.cancel(); });
    for (auto& s : live) s->PostClose();
  }
  // The threads leave run() once the closes above have run.
  c.work.reset();
  for (auto& t : threads) t.join();
  live.clear();
  // No server thread runs now. Destroy the callbacks outside the lock: they
  // may own replies whose destructors take it.
  HttpHandler handler = std::move(c.handler);
  c.handler = nullptr;
  SseHello hello;
  {
    std::lock_guard<std::mutex> lock(c.mu);
    hello = std::move(c.hello);
    c.hello = nullptr;
  }
}

void HttpServer::SetSseHello(SseHello hello) {
  // Swapped, so the old hello dies with the parameter, after the unlock.
  std::lock_guard<std::mutex> lock(core_->mu);
  if (!core_->stopped) std::swap(core_->hello, hello);
}

void HttpServer::Broadcast(std::string event_chunk) {
  core_->Broadcast(std::make_shared<const std::string>(std::move(event_chunk)));
}

size_t HttpServer::connection_count() const {
  std::lock_guard<std::mutex> lock(core_->mu);
  return core_->sessions.size();
}

size_t HttpServer::sse_client_count() const {
  std::lock_guard<std::mutex> lock(core_->mu);
  return core_->sse_clients.size();
}

}  // namespace hmpmd
