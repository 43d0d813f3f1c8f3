// bench/http_load: dispatch throughput while HTTP clients hammer the API.
//
// One controller with two workers (LocalCluster) runs jobs of independent
// noop tasks, alternately with no HTTP clients and with --clients client
// threads that each send requests back to back (GET pool, jobs list, the
// running job, a page of its tasks, /metrics), plus one SSE client reading
// /api/v1/events (--interval-ms paces the clients). Each figure is the median of --runs runs; the
// ratio loaded / quiet is the goal (>= 0.90): the HTTP server and the event feed must not block the
// scheduler loop. Clients keep their connection open between requests, as browsers and scrapers do
// (--new-connections: one connection per request). The requests served per second while loaded
// are printed beside the ratio, with the CPU each role took (from /proc), and the load average.
#include <pthread.h>
#include <sched.h>
#include <spdlog/spdlog.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <atomic>
#include <cstdio>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include "bench_util.h"
#include "hmpmd/api/event_feed.h"
#include "hmpmd/api/rest_api.h"
#include "hmpmd/http/cpu_budget.h"
#include "hmpmd/http/http_client.h"
#include "hmpmd/http/http_server.h"
#include "hmpmd/launch/local_cluster.h"
#include "keepalive_client.h"
#include "thread_cpu.h"

namespace hmpmd {
namespace {

// Tasks per second from submission to the end of the job.
double TasksPerSecond(LocalCluster& cluster, std::shared_ptr<const JobGraph> graph) {
  return graph->total_runs() / bench::JobSeconds(cluster, graph);
}

// Client threads sending requests back to back until stopped.
class Hammer {
 public:
  Hammer(HttpUrl url, int clients, bool idle, bool new_connections, int interval_ms,
         std::string target)
      : url_(std::move(url)),
        idle_(idle),
        new_connections_(new_connections),
        interval_(interval_ms),
        target_(std::move(target)) {
    for (int i = 0; i < clients; ++i) threads_.emplace_back([this, i] { Client(i); });
    sse_ = std::thread([this] {
      pthread_setname_np(pthread_self(), "http-sse");
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
    pthread_setname_np(pthread_self(), "http-client");
    if (idle_) {
      // Clients only take CPU the controller and workers leave over.
      sched_param p{};
      pthread_setschedparam(pthread_self(), SCHED_IDLE, &p);
    }
    static const char* kTargets[] = {"/api/v1/pool", "/api/v1/jobs", "/api/v1/jobs/1",
                                     "/api/v1/jobs/2/tasks?limit=100", "/metrics"};
    bench::KeepAliveClient keep(url_.host, static_cast<uint16_t>(std::stoi(url_.port)),
                                std::chrono::seconds(10));
    for (uint64_t n = i; !stop_; ++n) {
      const std::string_view target = target_.empty() ? kTargets[n % 5] : target_;
      int status = -1;
      if (new_connections_) {
        auto r = HttpCall(url_, "GET", target, "", {}, std::chrono::seconds(10));
        status = r.ok() ? r->status : -1;
      } else {
        status = keep.Get(target);
      }
      ++requests_;
      if (status < 200 || status >= 500) ++errors_;
      if (interval_.count() > 0) std::this_thread::sleep_for(interval_);
    }
  }

  HttpUrl url_;
  bool idle_;
  bool new_connections_;  // one connection per request instead of keep-alive
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
  bool new_connections = false;
  app.add_flag("--new-connections", new_connections,
               "Open a new connection for every request (HttpCall), instead of keeping one "
               "connection per client open as browsers and scrapers do");
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
  app.add_flag("--http-idle", ho.idle_priority,
               "Run the HTTP server and formatting threads at SCHED_IDLE (--http-nice is then "
               "ignored)");
  double cpu_percent = kDefaultHttpCpuPercent;
  app.add_option("--http-cpu-percent", cpu_percent,
                 "CPU budget of the HTTP server and formatting threads together, in percent of "
                 "one core, as `hmpmd controller --http-cpu-percent` (0: no cap)")
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

  // The HTTP side as `hmpmd controller` wires it (Service), on a free port.
  LocalClusterOptions o;
  o.workers = 2;
  o.cores = "cube=1";
  o.worker_binary = worker;
  o.log_level = "error";
  o.service.serve_http = true;
  ho.bind = "127.0.0.1:0";
  o.service.http = ho;
  o.service.http_cpu_percent = cpu_percent;
  o.service.api.snapshots.period = std::chrono::milliseconds(snapshot_ms);
  LocalCluster cluster(o);
  if (Status st = cluster.Start(); !st.ok()) {
    return std::fprintf(stderr, "bench: %s\n", st.ToString().c_str()), 1;
  }
  RestApi& api = *cluster.service().api();
  EventFeed& feed = *cluster.service().feed();
  const CpuBudget* budget = cluster.service().http_budget();
  HttpUrl url = *ParseHttpUrl("127.0.0.1:" + std::to_string(cluster.service().http_port()));

  auto g = bench::NoopJob(tasks, false);
  TasksPerSecond(cluster, bench::NoopJob(std::min(tasks, 10'000), false));  // warm up
  const pid_t loop_tid = cluster.Call([] { return static_cast<pid_t>(syscall(SYS_gettid)); });
  bench::ThreadCpu cpu(loop_tid, cluster.workers().pids());
  double load_before[3] = {0, 0, 0}, load_after[3] = {0, 0, 0};
  (void)getloadavg(load_before, 3);
  std::vector<double> quiet, loaded;
  uint64_t requests = 0, errors = 0, events = 0, publishes = 0, publish_us = 0, on_loop = 0,
           parked = 0, refreshes = 0, flushes = 0, flush_us = 0;
  double quiet_seconds = 0, loaded_seconds = 0;
  bench::CpuSample quiet_cpu, loaded_cpu;  // summed over the runs
  auto add = [](bench::CpuSample& sum, const bench::CpuSample& d) {
    for (const auto& [role, seconds] : d.seconds) sum.seconds[role] += seconds;
    for (const auto& [role, seconds] : d.waited) sum.waited[role] += seconds;
    sum.machine += d.machine;
  };
  for (int r = 0; r < runs; ++r) {
    auto c0 = cpu.Sample();
    auto t0 = std::chrono::steady_clock::now();
    quiet.push_back(TasksPerSecond(cluster, g));
    quiet_seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    add(quiet_cpu, bench::ThreadCpu::Diff(c0, cpu.Sample()));
    Hammer hammer(url, clients, idle, new_connections, interval_ms, target);
    std::this_thread::sleep_for(std::chrono::milliseconds(300));  // let them all connect
    uint64_t before = hammer.requests();
    const ApiSnapshotStats s0 = api.snapshot_stats();
    const uint64_t flushes0 = feed.flushes(), flush_us0 = feed.flush_cpu_us();
    const RestApiStats api0 = api.stats();
    c0 = cpu.Sample();
    t0 = std::chrono::steady_clock::now();
    loaded.push_back(TasksPerSecond(cluster, g));
    loaded_seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    add(loaded_cpu, bench::ThreadCpu::Diff(c0, cpu.Sample()));
    const ApiSnapshotStats s1 = api.snapshot_stats();
    flushes += feed.flushes() - flushes0;
    flush_us += feed.flush_cpu_us() - flush_us0;
    const RestApiStats api1 = api.stats();
    on_loop += api1.loop_requests - api0.loop_requests;
    parked += api1.parked - api0.parked;
    refreshes += api1.refreshes - api0.refreshes;
    publishes += s1.publishes - s0.publishes;
    publish_us += s1.render_us - s0.render_us;
    requests += hammer.requests() - before;
    errors += hammer.errors();
    events += hammer.events();
  }
  (void)getloadavg(load_after, 3);
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
  const double rps = loaded_seconds > 0 ? requests / loaded_seconds : 0.0;
  std::string priority =
      ho.idle_priority ? std::string("SCHED_IDLE") : "nice " + std::to_string(ho.nice);
  char budget_text[64];
  std::snprintf(budget_text, sizeof budget_text, ", CPU budget %g%% of a core", cpu_percent);
  priority += budget ? budget_text : ", no CPU budget";
  std::printf(
      "bench/http_load: %d independent noop tasks, 2 workers, median of %d run(s); HTTP threads "
      "at %s\n",
      tasks, runs, priority.c_str());
  std::printf("  without HTTP clients           %9.0f tasks/s\n", q);
  if (interval_ms > 0) std::printf("  each client pauses %d ms between requests\n", interval_ms);
  std::printf(
      "  with %3d HTTP clients%s + 1 SSE  %9.0f tasks/s  (%.0f requests/s served, %llu errors, "
      "%llu SSE events; %s)\n",
      clients, idle ? " (SCHED_IDLE)" : "", l, rps, static_cast<unsigned long long>(errors),
      static_cast<unsigned long long>(events),
      new_connections ? "a new connection per request" : "keep-alive connections");
  std::printf("  ratio loaded / quiet = %.3f   (goal >= 0.90) at %.0f requests/s\n", l / q, rps);
  std::printf("  runs (quiet/loaded tasks/s): %s\n", pairs.c_str());
  // Where the CPU went: cores busy per role (CPU seconds / wall seconds),
  // how long its threads waited for a core (run-queue seconds / wall
  // seconds: the mean number of them runnable but not running), and CPU per
  // served request for the HTTP side.
  auto per_wall = [](const std::map<std::string, double>& m, const std::string& role, double wall) {
    auto it = m.find(role);
    return it == m.end() || wall <= 0 ? 0.0 : it->second / wall;
  };
  std::printf("  by role: cores busy and threads waiting for a core (quiet / loaded)%s:\n",
              requests > 0 ? ", CPU us per request while loaded" : "");
  for (const auto& [role, seconds] : loaded_cpu.seconds) {
    const double qs = per_wall(quiet_cpu.seconds, role, quiet_seconds);
    const double ls = seconds / loaded_seconds;
    if (qs < 0.005 && ls < 0.005) continue;
    std::printf("    %-16s busy %5.2f / %5.2f   waiting %5.2f / %5.2f", role.c_str(), qs, ls,
                per_wall(quiet_cpu.waited, role, quiet_seconds),
                per_wall(loaded_cpu.waited, role, loaded_seconds));
    if (requests > 0 && role != "loop" && role != "workers") {
      std::printf("   %7.1f us/request", seconds * 1e6 / static_cast<double>(requests));
    }
    std::printf("\n");
  }
  // Other processes on the machine (other engineers' builds): their busy
  // cores during each phase, the noise the figures above carry.
  auto others = [](const bench::CpuSample& sample, double wall) {
    double ours = 0;
    for (const auto& [role, seconds] : sample.seconds) ours += seconds;
    return wall > 0 ? std::max(0.0, (sample.machine - ours) / wall) : 0.0;
  };
  std::printf("    %-16s busy %5.2f / %5.2f   (the machine's busy cores, less the roles above)\n",
              "other processes", others(quiet_cpu, quiet_seconds),
              others(loaded_cpu, loaded_seconds));
  const double loop_cpu = loaded_cpu.seconds["loop"];
  std::printf(
      "  snapshots rendered on the loop while loaded: %.1f/s, %.0f us CPU each (%.2f%% of "
      "the loop's CPU)\n",
      loaded_seconds > 0 ? publishes / loaded_seconds : 0.0,
      publishes ? static_cast<double>(publish_us) / publishes : 0.0,
      loop_cpu > 0 ? publish_us / 1e4 / loop_cpu : 0.0);
  std::printf(
      "  event feed flushes on the loop while loaded: %.1f/s, %.0f us CPU each (%.2f%% of the "
      "loop's CPU; the snapshot renderings are part of it)\n",
      loaded_seconds > 0 ? flushes / loaded_seconds : 0.0,
      flushes ? static_cast<double>(flush_us) / flushes : 0.0,
      loop_cpu > 0 ? flush_us / 1e4 / loop_cpu : 0.0);
  if (budget) {
    const CpuBudgetStats b = budget->stats();
    std::printf("  CPU budget: %llu pauses, %.1f s paused in all (%.1f s of CPU charged)\n",
                static_cast<unsigned long long>(b.pauses), b.paused_us / 1e6, b.charged_us / 1e6);
  }
  std::printf(
      "  loop work for requests while loaded: %llu of %llu requests answered on the loop; %llu "
      "waited for a fresh snapshot, served by %llu refreshes\n",
      static_cast<unsigned long long>(on_loop), static_cast<unsigned long long>(requests),
      static_cast<unsigned long long>(parked), static_cast<unsigned long long>(refreshes));
  std::printf(
      "  load average before %.2f, after %.2f (1 min; 2-core machine: above ~1 the "
      "figures are noisy)\n",
      load_before[0], load_after[0]);
  return 0;
}
