// Service: the controller as a running service. It owns the Controller
// core and, when HTTP is on, the REST API, the event feed and the HTTP
// server, and wires them to one another: the API and the feed share one CPU
// budget with the server's threads, the feed broadcasts through the server,
// and the server's SSE hello comes from the feed. `hmpmd controller`,
// LocalCluster (so `hmpmd run`, the integration tests and the benchmarks)
// and the test fixtures all stand the service up through it.
//
// Lifecycle: Start() (the controller reloads its store and binds; the HTTP
// side starts), then Run() on the thread that is to be the controller loop,
// until Stop(); Run() then stops the HTTP side. The destructor stops what
// still runs.
//
// Thread-safety: Stop(), controller().Post() and http_port() are
// thread-safe. Start() and Run() belong to the owner, Run() on the loop's
// thread; api(), feed() and http_server() are set by Start() and fixed
// after.
#pragma once

#include <cstdint>
#include <memory>

#include "hmpmd/api/event_feed.h"
#include "hmpmd/api/rest_api.h"
#include "hmpmd/controller/controller.h"
#include "hmpmd/http/cpu_budget.h"
#include "hmpmd/http/http_server.h"

namespace hmpmd {

struct ServiceOptions {
  // The controller core: endpoint, token, store, policy, limits. Its token
  // also guards the REST API's mutating calls, and its spec limits bound
  // what the API takes (spec_limits.max_bytes is the largest request body
  // the HTTP server reads). Default: ControllerOptions's.
  ControllerOptions controller;
  // Serve the REST API, the dashboard and the event stream at http.bind.
  // Off: the controller alone, with no HTTP-side thread and no observer or
  // snapshot hook on its loop (what `hmpmd run` and the dispatch
  // benchmarks want). On, the loop renders a snapshot while someone reads
  // and records a few words per task for the event feed. Default: false.
  bool serve_http = false;
  // The HTTP server: bind, connections, timeouts, threads. The Service sets
  // its max_body_bytes (from controller.spec_limits) and cpu_budget (from
  // http_cpu_percent); its nice and idle_priority also apply to the API's
  // threads and the feed's. Default: HttpServerOptions's (127.0.0.1:8080).
  HttpServerOptions http;
  // CPU the HTTP side (server, formatting and feed threads together) may
  // take, in percent of one core; spec parsing has a budget as large of its
  // own. Over it they pause and requests wait; none is refused. Higher
  // serves large traces sooner, at the cost of dispatch on a busy machine.
  // 0: no cap. Default: kDefaultHttpCpuPercent (10).
  double http_cpu_percent = kDefaultHttpCpuPercent;
  // Lower http.max_connections to what the open-file limit allows (after
  // raising the soft limit to the hard one), keeping 256 descriptors for
  // ZeroMQ, SQLite and logs, so that a client beyond it gets the "too many
  // connections" 503 rather than hanging in accept(). It changes a
  // process-wide limit, so it is for the service's own process (`hmpmd
  // controller`), not for programs that embed one. Default: false.
  bool fit_connections_to_file_limit = false;
  // Snapshot freshness and the renderings kept of ended jobs. Its threads'
  // priority and budgets are set from http and http_cpu_percent.
  // Default: RestApiOptions's.
  RestApiOptions api;
  // The event feed's batching. Its thread's priority and budget are set
  // from http and http_cpu_percent. Default: EventFeedOptions's.
  EventFeedOptions feed;
};

class Service {
 public:
  explicit Service(ServiceOptions options);
  // Stops the HTTP side, if Run() did not; REQUIRES: Run() has returned or
  // never ran.
  ~Service();
  Service(const Service&) = delete;
  Service& operator=(const Service&) = delete;

  // Starts the controller (store reload, bind) and, with serve_http, the
  // REST API, the event feed and the HTTP server. Call once, before Run().
  Status Start();
  // Runs the controller loop on the calling thread until Stop(), then
  // stops the HTTP server and the event feed.
  void Run();
  // Thread-safe. Ends Run() after the loop's current iteration.
  void Stop() { controller_->Stop(); }

  Controller& controller() { return *controller_; }
  // The HTTP side; null without serve_http (or before Start()).
  RestApi* api() { return api_.get(); }
  EventFeed* feed() { return feed_.get(); }
  HttpServer* http_server() { return http_.get(); }
  // The port the HTTP server bound (http.bind's, or the one picked for
  // port 0); 0 without one. Thread-safe.
  uint16_t http_port() const { return http_ ? http_->port() : 0; }
  // The CPU budget the HTTP side charges (http_cpu_percent); null without
  // a cap or an HTTP side.
  const CpuBudget* http_budget() const { return http_budget_.get(); }
  const ServiceOptions& options() const { return options_; }

 private:
  // Stops the HTTP server, then the feed. Idempotent.
  void StopHttp();

  const ServiceOptions options_;
  std::unique_ptr<Controller> controller_;
  std::shared_ptr<CpuBudget> http_budget_;
  // Destroyed before the controller, the server first: the API and the
  // feed reach the controller, and the server reaches both.
  std::unique_ptr<EventFeed> feed_;
  std::unique_ptr<RestApi> api_;
  std::unique_ptr<HttpServer> http_;
};

}  // namespace hmpmd
