// LocalCluster: a Service (the controller, and the REST API when asked for)
// on its own thread plus worker processes on this machine, on loopback.
// `hmpmd run`, the integration tests and the benchmarks all stand up a
// cluster this way, wired as `hmpmd controller` wires its service.
// Thread-safety: one owner thread; it talks to the controller only through
// Post()/Call().
#pragma once

#include <chrono>
#include <functional>
#include <future>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "hmpmd/api/service.h"
#include "hmpmd/controller/controller.h"
#include "hmpmd/launch/local_workers.h"

namespace hmpmd {

struct LocalClusterOptions {
  // The service the workers join. Default: a controller on a free loopback
  // port, no HTTP side (service.serve_http turns it on).
  ServiceOptions service = [] {
    ServiceOptions o;
    o.controller.listen = "tcp://127.0.0.1:0";
    return o;
  }();
  // Worker processes to start. Default: 4.
  int workers = 4;
  // --cores of each worker; empty: not passed (a --device file of
  // per_worker_args says). Default: one cube and one vector core.
  std::string cores = "cube=1,vector=1";
  std::string log_level = "warn";
  // Default: WorkerBinary().
  std::string worker_binary;
  std::vector<std::string> extra_worker_args;
  // Arguments for worker i alone, after the others (e.g. its --device
  // file). Empty, or one entry per worker.
  std::vector<std::vector<std::string>> per_worker_args;
  // Asked every 20 ms while Start or RunJob waits: a non-empty answer (why)
  // makes Start return Cancelled with it, or cancels the job and RunJob
  // returns Cancelled with it. Default: none.
  std::function<std::string()> interrupted;
};

class LocalCluster {
 public:
  explicit LocalCluster(LocalClusterOptions options);
  ~LocalCluster();

  // Starts the service and the workers; returns once all registered,
  // or an error if one exits or `timeout` passes first.
  Status Start(std::chrono::milliseconds timeout = std::chrono::seconds(30));
  // Shuts the workers down, stops them by PID, stops the service.
  void Stop();

  // Runs `fn` on the controller loop and returns its result.
  template <typename F>
  auto Call(F fn) -> decltype(fn()) {
    using R = decltype(fn());
    std::promise<R> p;
    auto f = p.get_future();
    controller().Post([&p, &fn] {
      if constexpr (std::is_void_v<R>) {
        fn();
        p.set_value();
      } else {
        p.set_value(fn());
      }
    });
    return f.get();
  }

  // Submits `graph`, waits for it to end, and calls `on_end` on the loop with
  // the ended job. Fails if the job is refused, all workers exit, a worker
  // exits and the job then waits for workers (none but these ever join), or
  // `timeout` passes.
  Status RunJob(std::shared_ptr<const JobGraph> graph, std::chrono::milliseconds timeout,
                std::function<void(const JobRun&, const Controller&)> on_end,
                std::string spec_json = {});  // kept in the store, if any

  Controller& controller() { return service_->controller(); }
  Service& service() { return *service_; }
  LocalWorkers& workers() { return workers_; }

 private:
  LocalClusterOptions options_;
  std::unique_ptr<Service> service_;
  LocalWorkers workers_;
  std::thread loop_;
  bool running_ = false;
};

}  // namespace hmpmd
