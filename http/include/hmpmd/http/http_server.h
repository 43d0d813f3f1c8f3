// HttpServer: the controller's HTTP/1.1 front door, on Boost.Beast/Asio.
//
// It parses requests into plain HttpRequest values and hands them to one
// HttpHandler, having answered itself what no handler could: a malformed
// request (400, or 431 for a huge head), a body over max_body_bytes (413,
// then the connection is closed), a method outside `methods` (501) and a
// request-target that is not a path (400; see http_target.h: absolute-form
// targets are stripped to their path and the path is percent-decoded).
// The handler answers later, from any thread, through the HttpReply it was
// given. GET /api/v1/events never reaches the handler: the
// server keeps those connections open as Server-Sent Events streams and
// feeds them from Broadcast(). No Beast type appears in this header.
//
// Threading and ownership:
//  - All socket work runs on the server's own threads (options.threads),
//    each connection on its own strand. The handler and the SSE hello run on
//    those threads (with threads > 1, possibly on several at once), so they
//    must not block: post the work to the controller loop and call `reply`
//    from there.
//  - An HttpReply keeps its connection alive until it is called or
//    destroyed. It may outlive the server: a reply called after Stop() is
//    dropped, and a reply destroyed without being called answers 500.
//  - Broadcast() and the reply never block on the network; they queue and
//    return.
//
// Thread-safety: Broadcast(), SetSseHello(), port(), connection_count() and
// sse_client_count() are thread-safe. Start() and Stop() must be called from
// one owning thread, never from the handler or the hello (Stop() joins the
// server's threads).
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "hmpmd/http/cpu_budget.h"
#include "hmpmd/http/http_types.h"
#include "hmpmd/protocol/status.h"

namespace hmpmd {

namespace http_internal {
struct ServerCore;
}  // namespace http_internal

// The path served as a Server-Sent Events stream by the server itself.
inline constexpr char kHttpEventsPath[] = "/api/v1/events";

// Returns the first chunk a new SSE client receives, already formatted
// ("event: hello\ndata: {...}\n\n"); empty sends nothing. Runs on a server
// thread, so it must be thread-safe (e.g. read a snapshot the controller
// publishes under its own lock) and must not call back into the server.
using SseHello = std::function<std::string()>;

struct HttpServerOptions {
  // HOST:PORT to listen on; "[::1]:8080" for IPv6, "*:8080" or ":8080" for
  // every interface; port 0 picks a free port (read it back with port()).
  // Default: 127.0.0.1:8080, reachable from this machine only.
  std::string bind = "127.0.0.1:8080";
  // Largest request body accepted; larger requests get 413 and the
  // connection is closed. Job specs are small; a higher limit lets a client
  // make the server buffer more. Default: 16 MiB.
  size_t max_body_bytes = size_t{16} << 20;
  // The option that sets max_body_bytes, named in the 413 answer so that
  // its reader knows what to raise (`hmpmd controller`: "--max-spec-mb",
  // which also sets max_body_bytes). Default: none.
  std::string max_body_flag;
  // Request methods the server implements: any other gets 501 (and never
  // reaches the handler), before its target is looked at. A method named
  // here that a route does not take is the handler's to refuse (405).
  // Default: GET, HEAD, POST, PUT, PATCH, DELETE, OPTIONS.
  std::vector<std::string> methods = {"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"};
  // Open connections (SSE streams included) beyond which new connections
  // get 503 and are closed. Each costs a socket and a few KiB.
  // Default: 1024.
  size_t max_connections = 1024;
  // Threads running the I/O loop. One is plenty for a control plane; more
  // only help when many clients send large bodies. Default: 1.
  int threads = 1;
  // Deadline for each step of a connection: receiving a request header,
  // receiving its body, sending a response, sending a batch of SSE chunks.
  // A connection that misses one is closed; a connection waiting for the
  // handler's reply has no deadline. Lower frees stuck sockets sooner; too
  // low cuts off slow clients and uploads. Default: 30 s.
  std::chrono::milliseconds idle_timeout{30000};
  // Nice value of the server threads (Linux: per thread; raising it needs
  // no privilege). On a small machine these threads compete for CPU with the
  // controller loop and the workers; a positive value lets requests have
  // what dispatch leaves over (requests are served more slowly, never
  // dropped, while dispatch is busy). 0 keeps the process's priority.
  // Default: 10.
  int nice = 10;
  // Run the server threads at SCHED_IDLE instead (nice is then ignored):
  // they get only CPU time that dispatch and the workers leave idle, and a
  // waking loop or worker preempts them at once, so on a machine that
  // dispatch keeps busy, requests wait longer. Default: false.
  bool idle_priority = false;
  // CPU budget the server threads charge what they use to (shared with
  // other threads of the HTTP side, e.g. RestApi's formatting thread). Over
  // budget, a server thread pauses: requests wait in the socket buffers,
  // none is refused. Null: no cap. Default: null (`hmpmd controller` sets
  // kDefaultHttpCpuPercent, `--http-cpu-percent`).
  std::shared_ptr<CpuBudget> cpu_budget;
  // SSE streams beyond this get 503. Default: 256.
  size_t max_sse_clients = 256;
  // Back-pressure: chunks queued for one SSE client (not yet handed to its
  // socket). A client that reaches this is disconnected, never slowed down
  // or silently thinned; its EventSource reconnects and gets a fresh hello
  // snapshot. Higher tolerates longer stalls at the cost of memory.
  // Default: 4096.
  size_t sse_max_queued_chunks = 4096;
  // Period of the ": keepalive" comment sent to every SSE client, which
  // keeps proxies from closing idle streams and finds dead peers.
  // Default: 15 s.
  std::chrono::milliseconds sse_keepalive{15000};
  // Asked before a GET kHttpEventsPath starts its stream: an answer to send
  // instead (a refusal), or nullopt to stream. Null: every client streams.
  std::function<std::optional<HttpResponse>(const HttpRequest&)> events_gate;
};

class HttpServer {
 public:
  // `handler` answers every request except GET kHttpEventsPath.
  HttpServer(HttpServerOptions options, HttpHandler handler);
  // Calls Stop().
  ~HttpServer();
  HttpServer(const HttpServer&) = delete;
  HttpServer& operator=(const HttpServer&) = delete;

  // Binds options.bind and starts the server's threads. Fails with
  // InvalidArgument for a malformed address and Unavailable when the
  // address cannot be bound; the message names the address. Call once.
  Status Start();
  // What Start() would say of `bind` (resolved, and bound for a moment),
  // for checking a flag before other work starts.
  static Status CheckBind(const std::string& bind);
  // The bound port; 0 before Start(). Thread-safe.
  uint16_t port() const;
  // Closes the listener and every connection, then joins the threads.
  // Idempotent. Pending replies become no-ops.
  void Stop();

  // Sets the snapshot sent first to each new SSE client. Thread-safe.
  void SetSseHello(SseHello hello);
  // Queues `event_chunk` (a complete SSE event, "event: x\ndata: y\n\n")
  // for every connected SSE client and returns at once: the caller's cost
  // does not depend on the number of clients; a server thread hands the
  // chunks queued meanwhile to each client (a client that connects in
  // between may get them after its hello). Clients over
  // options.sse_max_queued_chunks are disconnected. Thread-safe.
  void Broadcast(std::string event_chunk);

  // Open connections, SSE streams included. Thread-safe.
  size_t connection_count() const;
  // Connected SSE clients. Thread-safe.
  size_t sse_client_count() const;

 private:
  std::shared_ptr<http_internal::ServerCore> core_;
};

}  // namespace hmpmd
