// ServerCore: what the connections (Session) of an HttpServer share, and the
// helpers both sides use. Internal to http_server.cc and http_session.cc.
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
// Thread-safety: as marked on each field.
#pragma once

#include <atomic>
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/strand.hpp>
#include <boost/beast/core.hpp>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <thread>
#include <unordered_map>
#include <utility>
#include <vector>

#include "hmpmd/http/http_server.h"

namespace hmpmd {
namespace http_internal {

namespace beast = boost::beast;
namespace net = boost::asio;
using tcp = net::ip::tcp;
using Chunk = std::shared_ptr<const std::string>;

inline constexpr char kKeepaliveChunk[] = ": keepalive\n\n";

// {"error": message} with `status`. Any thread.
HttpResponse ErrorResponse(int status, std::string_view message);

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
  // Queues `chunk` for every SSE client and returns: the caller (the
  // controller loop) does O(1) work; one handler on a server thread hands
  // the chunks queued meanwhile to each client (FanOut). Any thread.
  void Broadcast(Chunk chunk);
  void FanOut();  // server thread
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
  std::vector<Chunk> broadcasts;                                       // guarded by mu
  bool fanout_posted = false;                                          // guarded by mu
  std::vector<std::thread> threads;                                    // guarded by mu
};

}  // namespace http_internal
}  // namespace hmpmd
