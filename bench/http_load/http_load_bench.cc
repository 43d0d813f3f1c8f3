// bench/http_load: dispatch throughput while HTTP clients hammer the API.
//
// One controller with two workers (LocalCluster) runs jobs of independent
// noop tasks, alternately with no HTTP clients and with --clients client
// threads that each send requests back to back (GET pool, jobs list, the
// running job, a page of its tasks, /metrics), plus one SSE client reading
// /api/v1/events (--interval-ms paces the clients). Each figure is the median of --runs runs; the
// ratio loaded / quiet is the goal (>= 0.90): the HTTP server and the event feed must not block the
// scheduler loop.
#include <pthread.h>
#include <sched.h>
#include <spdlog/spdlog.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <atomic>
#include <cstdio>
#include <string>
#include <thread>
#include <vector>

#include "bench_util.h"
#include "event_feed.h"
#include "http_client.h"
#include "http_server.h"
#include "local_cluster.h"
#include "rest_api.h"

namespace hmpmd {
namespace {

// Tasks per second from submission to the end of the job.
double TasksPerSecond(LocalCluster& cluster, std::shared_ptr<const JobGraph> graph) {
  return graph->total_runs() / bench::JobSeconds(cluster, graph);
}

// Client threads sending requests back to back until stopped.
class Hammer {
 public:
  Hammer(HttpUrl url, int clients, bool idle, int interval_ms, std::string target)
      : url_(std::move(url)), idle_(idle), interval_(interval_ms), target_(std::move(target)) {
    for (int i = 0; i < clients; ++i) threads_.emplace_back([this, i] { Client(i); });
    sse_ = std::thread([this] {
      while (!stop_) {
        (void)StreamSse(
            url_, kHttpEventsPath, {},
            [this](std::string_view, std::string_view) {
              ++events_;
              return !stop_.load();
            },
            std::chrono::seconds(2));
      }
    });
  }
  ~Hammer() {
    stop_ = true;
    for (auto& t : threads_) t.join();
    sse_.join();
  }
  uint64_t requests() const { return requests_; }
  uint64_t errors() const { return errors_; }
  uint64_t events() const { return events_; }

 private:
  void Client(int i) {
    if (idle_) {
      // Clients only take CPU the controller and workers leave over.
      sched_param p{};
      pthread_setschedparam(pthread_self(), SCHED_IDLE, &p);
    }
    static const char* kTargets[] = {"/api/v1/pool", "/api/v1/jobs", "/api/v1/jobs/1",
                                     "/api/v1/jobs/2/tasks?limit=100", "/metrics"};
    for (uint64_t n = i; !stop_; ++n) {
      const std::string target = target_.empty() ? kTargets[n % 5] : target_;
      auto r = HttpCall(url_, "GET", target, "", {}, std::chrono::seconds(10));
      ++requests_;
      if (!r.ok() || r->status >= 500) ++errors_;
      if (interval_.count() > 0) std::this_thread::sleep_for(interval_);
    }
  }

  HttpUrl url_;
  bool idle_;
  std::chrono::milliseconds interval_;
  std::string target_;  // empty: the mix
  std::atomic<bool> stop_{false};
  std::atomic<uint64_t> requests_{0}, errors_{0}, events_{0};
  std::vector<std::thread> threads_;
  std::thread sse_;
};

}  // namespace
}  // namespace hmpmd

int main(int argc, char** argv) {
  using namespace hmpmd;
  CLI::App app{"bench/http_load: dispatch throughput with and without HTTP clients"};
  int runs = 3, tasks = 200'000, clients = 200;
  bool smoke = false, idle = false;
  app.add_flag("--idle-clients", idle,
               "Run client threads at SCHED_IDLE, so they cannot take CPU from the controller "
               "(isolates blocking from CPU contention on small machines)");
  app.add_option("--runs", runs, "Runs per figure (the median is reported)")->capture_default_str();
  app.add_option("--tasks", tasks, "Independent noop tasks per job")->capture_default_str();
  app.add_option("--clients", clients, "Concurrent HTTP clients")->capture_default_str();
  int interval_ms = 0;
  app.add_option("--interval-ms", interval_ms,
                 "Pause of each client between requests (0: back to back)")
      ->capture_default_str();
  std::string target;
  app.add_option("--target", target,
                 "Send only this request target (e.g. /dashboard/style.css, which never reaches "
                 "the loop) instead of the mix");
  HttpServerOptions ho;
  app.add_option("--http-nice", ho.nice,
                 "Nice value of the HTTP server threads (0: the process's priority)")
      ->capture_default_str();
  int snapshot_ms = 100;
  app.add_option("--snapshot-ms", snapshot_ms,
                 "Most the served pool, jobs and metrics lag behind the loop")
      ->capture_default_str();
  std::string worker = HMPMD_WORKER_BIN;
  app.add_option("--worker", worker, "hmpmd-worker binary")->capture_default_str();
  app.add_flag("--smoke", smoke, "Small sizes, one run (for CI)");
  CLI11_PARSE(app, argc, argv);
  if (smoke) {
    runs = 1;
    tasks = 5'000;
    clients = 20;
  }
  spdlog::set_level(spdlog::level::warn);

  LocalClusterOptions o;
  o.workers = 2;
  o.cores = "cube=1";
  o.worker_binary = worker;
  o.log_level = "error";
  LocalCluster cluster(o);
  if (Status st = cluster.Start(); !st.ok()) {
    return std::fprintf(stderr, "bench: %s\n", st.ToString().c_str()), 1;
  }
  Controller* c = &cluster.controller();
  RestApiOptions api_options;
  api_options.snapshots.period = std::chrono::milliseconds(snapshot_ms);
  api_options.formatter_nice = ho.nice;
  RestApi api(c, "", SpecLimits{}, api_options);
  std::unique_ptr<HttpServer> server;
  EventFeed feed(
      c, EventFeedOptions{}, [&server](std::string chunk) { server->Broadcast(std::move(chunk)); },
      [&server] { return server->sse_client_count(); });
  api.SetEventFeed(&feed);
  ho.bind = "127.0.0.1:0";
  server = std::make_unique<HttpServer>(ho, [&api](HttpRequest req, HttpReply reply) {
    api.Handle(std::move(req), std::move(reply));
  });
  server->SetSseHello([&feed] { return feed.Hello(); });
  if (Status st = server->Start(); !st.ok()) {
    return std::fprintf(stderr, "bench: %s\n", st.ToString().c_str()), 1;
  }
  feed.Start();
  HttpUrl url = *ParseHttpUrl("127.0.0.1:" + std::to_string(server->port()));

  auto g = bench::NoopJob(tasks, false);
  TasksPerSecond(cluster, bench::NoopJob(std::min(tasks, 10'000), false));  // warm up
  std::vector<double> quiet, loaded;
  uint64_t requests = 0, errors = 0, events = 0;
  double loaded_seconds = 0;
  for (int r = 0; r < runs; ++r) {
    quiet.push_back(TasksPerSecond(cluster, g));
    Hammer hammer(url, clients, idle, interval_ms, target);
    std::this_thread::sleep_for(std::chrono::milliseconds(300));  // let them all connect
    uint64_t before = hammer.requests();
    auto t0 = std::chrono::steady_clock::now();
    loaded.push_back(TasksPerSecond(cluster, g));
    loaded_seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    requests += hammer.requests() - before;
    errors += hammer.errors();
    events += hammer.events();
  }
  feed.Stop();
  server->Stop();
  cluster.Call([c] { c->SetObserver(nullptr); });
  cluster.Stop();

  double q = bench::Summarise(quiet).median, l = bench::Summarise(loaded).median;
  // Each run's pair, in order: on a shared machine the spread says how far
  // to trust the medians.
  std::string pairs;
  for (size_t r = 0; r < quiet.size(); ++r) {
    char buf[96];
    std::snprintf(buf, sizeof buf, "%s%.0f/%.0f", r ? ", " : "", quiet[r], loaded[r]);
    pairs += buf;
  }
  std::printf(
      "bench/http_load: %d independent noop tasks, 2 workers, median of %d run(s); HTTP threads "
      "at nice %d\n",
      tasks, runs, ho.nice);
  std::printf("  without HTTP clients           %9.0f tasks/s\n", q);
  if (interval_ms > 0) std::printf("  each client pauses %d ms between requests\n", interval_ms);
  std::printf(
      "  with %3d HTTP clients%s + 1 SSE  %9.0f tasks/s  (%.0f requests/s served, %llu errors, "
      "%llu SSE events)\n",
      clients, idle ? " (SCHED_IDLE)" : "", l, loaded_seconds > 0 ? requests / loaded_seconds : 0.0,
      static_cast<unsigned long long>(errors), static_cast<unsigned long long>(events));
  std::printf("  ratio loaded / quiet = %.3f   (goal >= 0.90)\n", l / q);
  std::printf("  runs (quiet/loaded tasks/s): %s\n", pairs.c_str());
  return 0;
}
