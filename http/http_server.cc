// HttpServer: the listener, the server threads and the public methods.
// Connections are Sessions (http_session.h); what they share is ServerCore
// (http_server_core.h, which explains the ownership).
#include "hmpmd/http/http_server.h"

#include <pthread.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <charconv>
#include <exception>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "hmpmd/http/thread_priority.h"
#include "http_server_core.h"
#include "http_session.h"

namespace hmpmd {
namespace http_internal {

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
  pthread_setname_np(pthread_self(), "hmpmd-http");  // for top -H and the load bench
  // Best effort: a failure leaves the thread at the process's priority.
  if (!SetThisThreadPriority(core->options.nice, core->options.idle_priority)) {
    spdlog::warn("http: cannot set the server thread's priority ({}); it keeps the process's",
                 core->options.idle_priority ? std::string("SCHED_IDLE")
                                             : "nice " + std::to_string(core->options.nice));
  }
  // With a CPU budget, handlers run one at a time and the thread charges
  // what it used between them (reading its CPU clock about once a
  // millisecond), pausing when the budget is spent.
  CpuBudget::Meter meter(core->options.cpu_budget);
  auto running = [core] { return !core->Stopping(); };
  for (;;) {
    try {
      if (!core->options.cpu_budget) {
        core->ioc.run();
        return;
      }
      while (core->ioc.run_one() > 0) meter.MaybeCharge(false, running);
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

Status HttpServer::CheckBind(const std::string& bind) {
  net::io_context ioc;
  ASSIGN_OR_RETURN(auto endpoint, http_internal::ResolveBind(ioc, bind));
  boost::asio::ip::tcp::acceptor acceptor(ioc);
  boost::system::error_code ec;
  if (acceptor.open(endpoint.protocol(), ec); !ec) {
    acceptor.set_option(net::socket_base::reuse_address(true), ec);
    acceptor.bind(endpoint, ec);
  }
  if (ec) return Status::Unavailable("http: cannot bind " + bind + ": " + ec.message());
  return Status::Ok();
}

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
