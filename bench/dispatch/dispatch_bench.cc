// bench/dispatch: what one task costs to dispatch, against raw ZeroMQ.
//
//  (a) raw DEALER/ROUTER round trip on loopback, between two processes;
//  (b) a chain of dependent noop tasks through the controller and one
//      worker: per-task latency, and its ratio to (a) (with early dispatch,
//      the controller's default, a link queues behind its running producer
//      and pays no round trip; --no-early-dispatch measures the round trip);
//  (c) independent noop tasks over two workers: tasks per second.
// Each figure is the median of --runs runs, printed with min and max.
#include <signal.h>
#include <spdlog/spdlog.h>
#include <sys/wait.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <vector>
#include <zmq.hpp>

#include "bench_util.h"
#include "hmpmd/launch/local_cluster.h"

namespace hmpmd {
namespace {

using bench::JobSeconds;
using bench::NoopJob;
using bench::RawRoundTripUs;
using bench::Stats;
using bench::Summarise;

using Clock = std::chrono::steady_clock;

LocalClusterOptions ClusterOptions(int workers, bool early) {
  LocalClusterOptions o;
  o.service.controller.scheduler.early_dispatch = early;
  o.workers = workers;
  o.cores = "cube=1";
  o.worker_binary = HMPMD_WORKER_BIN;
  o.log_level = "error";
  return o;
}

}  // namespace
}  // namespace hmpmd

int main(int argc, char** argv) {
  using namespace hmpmd;
  CLI::App app{"bench/dispatch: dispatch latency and throughput against raw ZeroMQ"};
  int runs = 3, chain = 10'000, independent = 200'000, round_trips = 20'000;
  bool smoke = false, no_early = false;
  app.add_option("--runs", runs, "Runs per figure (the median is reported)")->capture_default_str();
  app.add_option("--chain", chain, "Tasks in the dependent chain")->capture_default_str();
  app.add_option("--independent", independent, "Independent tasks")->capture_default_str();
  app.add_option("--round-trips", round_trips, "Raw round trips per run")->capture_default_str();
  app.add_flag("--smoke", smoke, "Small sizes, one run (for CI)");
  app.add_flag("--no-early-dispatch", no_early,
               "Dispatch a task only once its input's result reached the controller");
  CLI11_PARSE(app, argc, argv);
  if (smoke) {
    runs = 1;
    chain = 500;
    independent = 5'000;
    round_trips = 1'000;
  }
  spdlog::set_level(spdlog::level::warn);

  std::vector<double> raw, chain_us, tput;
  for (int r = 0; r < runs; ++r) {
    double us = RawRoundTripUs(round_trips);
    if (us <= 0) return std::fprintf(stderr, "bench: the raw round trip failed\n"), 1;
    raw.push_back(us);
  }
  {
    LocalCluster one(ClusterOptions(1, !no_early));
    if (Status st = one.Start(); !st.ok())
      return std::fprintf(stderr, "bench: %s\n", st.ToString().c_str()), 1;
    auto g = NoopJob(chain, true);
    JobSeconds(one, NoopJob(std::min(chain, 1000), true));  // warm up
    for (int r = 0; r < runs; ++r) chain_us.push_back(JobSeconds(one, g) * 1e6 / chain);
  }
  {
    LocalCluster two(ClusterOptions(2, !no_early));
    if (Status st = two.Start(); !st.ok())
      return std::fprintf(stderr, "bench: %s\n", st.ToString().c_str()), 1;
    auto g = NoopJob(independent, false);
    JobSeconds(two, NoopJob(std::min(independent, 10'000), false));  // warm up
    for (int r = 0; r < runs; ++r) tput.push_back(independent / JobSeconds(two, g));
  }
  Stats a = Summarise(raw), b = Summarise(chain_us), c = Summarise(tput);
  std::printf("bench/dispatch: median of %d run(s) [min .. max]; early dispatch %s\n", runs,
              no_early ? "off" : "on");
  std::printf("  (a) raw DEALER/ROUTER round trip       %9.1f us      [%.1f .. %.1f]\n", a.median,
              a.min, a.max);
  std::printf("  (b) chain of %6d noop tasks          %9.1f us/task [%.1f .. %.1f]\n", chain,
              b.median, b.min, b.max);
  std::printf("  (c) %7d independent noop tasks     %9.0f tasks/s [%.0f .. %.0f]\n", independent,
              c.median, c.min, c.max);
  std::printf("  ratio (b)/(a) = %.2f   (target <= 3.0)\n", b.median / a.median);
  std::printf("  (c) vs target 100000 tasks/s = %.2fx\n", c.median / 100000.0);
  return 0;
}
