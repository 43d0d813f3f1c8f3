// bench/scale: the controller with hundreds to thousands of workers on one
// machine. A FakeFleet child process stands in for N workers (real DEALER
// sockets, the real protocol, heartbeats, every task answered at once or
// after --task-us); the controller runs here, with its REST API on, so
// this process's CPU and memory are the controller's. For each N it reports
// the time for all N to register, dispatch tasks/s over independent no-op
// tasks and the controller's CPU per task, its CPU per heartbeat while
// idle, the time to notice a worker that went silent, resident memory, and
// what GET /api/v1/pool costs with N devices; beside them, the same job on
// 2 real worker processes in the same run.
#include <spdlog/spdlog.h>
#include <sys/resource.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "bench_util.h"
#include "fake_fleet.h"
#include "fleet_process.h"
#include "hmpmd/http/http_client.h"
#include "hmpmd/launch/local_cluster.h"

namespace hmpmd::bench {
namespace {

using Clock = std::chrono::steady_clock;

double ProcessCpuSeconds() {
  rusage u{};
  ::getrusage(RUSAGE_SELF, &u);
  return u.ru_utime.tv_sec + u.ru_stime.tv_sec + (u.ru_utime.tv_usec + u.ru_stime.tv_usec) / 1e6;
}

double RssMb() {
  std::ifstream f("/proc/self/status");
  for (std::string line; std::getline(f, line);) {
    if (line.rfind("VmRSS:", 0) == 0) return std::stod(line.substr(6)) / 1024.0;
  }
  return 0;
}

double Seconds(Clock::time_point since) {
  return std::chrono::duration<double>(Clock::now() - since).count();
}

[[noreturn]] void Fail(const std::string& why) {
  std::fprintf(stderr, "bench/scale: %s\n", why.c_str());
  std::exit(1);
}

struct Settings {
  std::string self;
  int tasks = 200'000;
  int runs = 3;
  double idle_s = 3;
  double task_us = 0;
  uint32_t worker_timeout_ms = 5000;
  int pool_gets = 10;
};

LocalClusterOptions Cluster(const Settings& s, int real_workers) {
  LocalClusterOptions o;
  o.workers = real_workers;
  o.cores = "cube=1";
  o.worker_binary = HMPMD_WORKER_BIN;
  o.log_level = "error";
  o.service.controller.worker_timeout_ms = s.worker_timeout_ms;
  o.service.serve_http = real_workers == 0;
  o.service.http.bind = "127.0.0.1:0";
  return o;
}

struct DispatchFigures {
  double tasks_per_s = 0;
  double cpu_us_per_task = 0;
};

DispatchFigures MeasureDispatch(LocalCluster& cluster, const Settings& s) {
  JobSeconds(cluster, NoopJob(std::min(s.tasks, 10'000), false));  // warm up
  auto job = NoopJob(s.tasks, false);
  std::vector<double> tput, cpu;
  for (int r = 0; r < s.runs; ++r) {
    const double c0 = ProcessCpuSeconds();
    const double seconds = JobSeconds(cluster, job);
    cpu.push_back((ProcessCpuSeconds() - c0) * 1e6 / s.tasks);
    tput.push_back(s.tasks / seconds);
  }
  return {Summarise(tput).median, Summarise(cpu).median};
}

struct Row {
  uint32_t workers = 0;
  double register_s = 0;
  DispatchFigures dispatch;
  double cpu_us_per_heartbeat = 0;
  double dead_s = 0;
  double rss_mb = 0;
  double pool_ms = 0;
  double pool_kb = 0;
};

uint64_t Heartbeats(FleetProcess& fleet) {
  std::optional<std::string> line = fleet.Ask("stats");
  if (!line) Fail("the fake fleet did not answer 'stats'");
  std::istringstream in(*line);
  std::string word;
  uint64_t n = 0;
  in >> word >> n;
  return n;
}

Row MeasureFleet(const Settings& s, uint32_t n) {
  Row row;
  row.workers = n;
  LocalCluster cluster(Cluster(s, 0));
  if (Status st = cluster.Start(); !st.ok()) Fail(st.ToString());
  const double rss0 = RssMb();

  auto all = std::make_shared<std::promise<void>>();
  std::future<void> registered = all->get_future();
  cluster.controller().Post(
      [&cluster, all, n] { cluster.controller().WhenWorkers(n, [all] { all->set_value(); }); });
  const auto t0 = Clock::now();
  FleetProcess fleet(
      s.self, {"--fake-workers", std::to_string(n), "--controller", cluster.controller().endpoint(),
               "--task-us", std::to_string(s.task_us)});
  if (!fleet.started()) Fail("cannot start the fake fleet");
  if (registered.wait_for(std::chrono::seconds(120)) != std::future_status::ready) {
    Fail(std::to_string(n) + " fake workers did not register within 120 s");
  }
  row.register_s = Seconds(t0);
  if (!fleet.ReadLine(std::chrono::seconds(30))) Fail("the fake fleet never saw all its acks");

  // Idle: heartbeats only.
  const uint64_t hb0 = Heartbeats(fleet);
  const double c0 = ProcessCpuSeconds();
  std::this_thread::sleep_for(std::chrono::duration<double>(s.idle_s));
  const double idle_cpu = ProcessCpuSeconds() - c0;
  const uint64_t beats = Heartbeats(fleet) - hb0;
  row.cpu_us_per_heartbeat = beats > 0 ? idle_cpu * 1e6 / beats : 0;

  row.dispatch = MeasureDispatch(cluster, s);
  row.rss_mb = RssMb();
  (void)rss0;

  Result<HttpUrl> url = ParseHttpUrl("127.0.0.1:" + std::to_string(cluster.service().http_port()));
  if (!url.ok()) Fail(url.status().ToString());
  std::vector<double> ms;
  for (int i = 0; i < s.pool_gets; ++i) {
    const auto g0 = Clock::now();
    Result<HttpResponse> r =
        HttpCall(*url, "GET", "/api/v1/pool", "", {}, std::chrono::seconds(60));
    if (!r.ok() || r->status != 200) Fail("GET /api/v1/pool failed");
    ms.push_back(Seconds(g0) * 1e3);
    row.pool_kb = r->body.size() / 1024.0;
  }
  row.pool_ms = Summarise(ms).median;

  // A worker that goes silent (closes its socket, sends nothing more).
  const auto d0 = Clock::now();
  if (fleet.Ask("silence 0") != "ok") Fail("the fake fleet did not silence worker 0");
  auto alive = [&cluster] {
    return cluster.Call([&cluster] { return cluster.controller().workers().alive_count(); });
  };
  const auto limit = Clock::now() + std::chrono::milliseconds(s.worker_timeout_ms) * 4;
  while (alive() >= n && Clock::now() < limit) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  if (alive() >= n) Fail("a silent worker was not declared dead");
  row.dead_s = Seconds(d0);
  return row;
}

}  // namespace
}  // namespace hmpmd::bench

int main(int argc, char** argv) {
  using namespace hmpmd;
  using namespace hmpmd::bench;
  CLI::App app{"bench/scale: the controller with N workers from one fake-fleet process"};
  Settings s;
  std::vector<uint32_t> sizes = {100, 1000, 4000};
  bool smoke = false;
  FakeFleetOptions fleet;
  app.add_option("--workers", sizes, "Fleet sizes to measure")
      ->delimiter(',')
      ->capture_default_str();
  app.add_option("--tasks", s.tasks, "Independent no-op tasks per dispatch run")
      ->capture_default_str();
  app.add_option("--runs", s.runs, "DispatchFigures runs per size (the median is reported)")
      ->capture_default_str();
  app.add_option("--idle-s", s.idle_s, "Seconds of heartbeats only, for CPU per heartbeat")
      ->capture_default_str();
  app.add_option("--task-us", s.task_us, "Modelled duration of a fake worker's task")
      ->capture_default_str();
  app.add_option("--worker-timeout-ms", s.worker_timeout_ms, "The controller's worker timeout")
      ->capture_default_str();
  app.add_flag("--smoke", smoke, "Small sizes, one run (for CI)");
  // The child's mode.
  app.add_option("--fake-workers", fleet.workers, "(internal) run as the fake fleet");
  app.add_option("--controller", fleet.controller, "(internal) the fleet's controller");
  CLI11_PARSE(app, argc, argv);
  if (!fleet.controller.empty()) {
    fleet.task_us = s.task_us;
    return RunFakeFleet(fleet);
  }
  if (smoke) {
    sizes = {20};
    s.tasks = 2'000;
    s.runs = 1;
    s.idle_s = 0.5;
    s.worker_timeout_ms = 1000;
    s.pool_gets = 2;
  }
  s.self = "/proc/self/exe";
  spdlog::set_level(spdlog::level::err);
  rlimit files{};
  if (::getrlimit(RLIMIT_NOFILE, &files) == 0) {
    files.rlim_cur = files.rlim_max;
    ::setrlimit(RLIMIT_NOFILE, &files);
  }

  DispatchFigures real;
  {
    LocalCluster two(Cluster(s, 2));
    if (Status st = two.Start(); !st.ok()) Fail(st.ToString());
    real = MeasureDispatch(two, s);
  }
  std::vector<Row> rows;
  for (uint32_t n : sizes) rows.push_back(MeasureFleet(s, n));

  std::printf(
      "bench/scale: %d independent no-op tasks, median of %d run(s); fake tasks %.0f us; "
      "worker timeout %u ms\n",
      s.tasks, s.runs, s.task_us, s.worker_timeout_ms);
  std::printf("%-8s %10s %12s %9s %11s %12s %9s %8s %10s %9s\n", "workers", "register_s", "tasks/s",
              "vs_2real", "cpu_us/task", "cpu_us/beat", "dead_s", "rss_MB", "pool_GET_ms",
              "pool_KB");
  std::printf("%-8s %10s %12.0f %9.2f %11.2f %12s %9s %8s %10s %9s\n", "2 real", "-",
              real.tasks_per_s, 1.0, real.cpu_us_per_task, "-", "-", "-", "-", "-");
  for (const Row& r : rows) {
    std::printf("%-8u %10.3f %12.0f %9.2f %11.2f %12.2f %9.3f %8.1f %10.2f %9.1f\n", r.workers,
                r.register_s, r.dispatch.tasks_per_s, r.dispatch.tasks_per_s / real.tasks_per_s,
                r.dispatch.cpu_us_per_task, r.cpu_us_per_heartbeat, r.dead_s, r.rss_mb, r.pool_ms,
                r.pool_kb);
  }
  std::printf(
      "targets: at 1,000 workers dispatch >= 0.5x the 2 real workers'; CPU per heartbeat "
      "constant in N (ratio to the smallest fleet: ");
  for (const Row& r : rows) {
    std::printf("%u: %.2f ", r.workers,
                rows.front().cpu_us_per_heartbeat > 0
                    ? r.cpu_us_per_heartbeat / rows.front().cpu_us_per_heartbeat
                    : 0.0);
  }
  std::printf(")\n");
  return 0;
}
