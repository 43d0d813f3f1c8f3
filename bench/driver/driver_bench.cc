// bench/driver: what a task costs through the driver API (hmpmd::client),
// against raw ZeroMQ measured in the same run.
//
//  (a) raw DEALER/ROUTER round trip on loopback, between two processes;
//  (b) Submit -> Wait of one noop at a time, each after the one before
//      (a chain the driver waits on task by task): the round trip; the
//      controller must hear of each done before it sends the next;
//  (b2) the same, each noop reading nothing: a synchronous call, which the
//      worker's word to the driver (DataOp::kRunDone) ends a hop sooner;
//      beside it, the same calls on a session with direct_done off, whose
//      Futures end on the controller's word alone (the baseline);
//  (c) a chain of noops submitted at once, then waited on: tasks/s;
//  (d) independent noops submitted at once over two workers: tasks/s.
// Each figure is the median of --runs runs, printed with min and max.
#include <signal.h>
#include <spdlog/spdlog.h>
#include <sys/wait.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <chrono>
#include <cstdio>
#include <vector>
#include <zmq.hpp>

#include "bench_util.h"
#include "hmpmd/client/client.h"
#include "hmpmd/launch/local_cluster.h"

namespace hmpmd {
namespace {

using bench::RawRoundTripUs;
using bench::Stats;
using bench::Summarise;
using client::Future;
using Clock = std::chrono::steady_clock;

double Seconds(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

[[noreturn]] void Die(const Status& st) {
  std::fprintf(stderr, "bench_driver: %s\n", st.ToString().c_str());
  std::exit(1);
}

// Median Submit -> Wait in microseconds over `n` noops, each after the last
// (`chained`: each reads the one before).
double RoundTripUs(client::Client& c, int n, bool chained) {
  std::vector<double> samples;
  Future prev;
  for (int i = 0; i < n; ++i) {
    client::Call call{.kernel = "noop"};
    if (chained && prev.valid()) call.inputs = {prev};
    auto t0 = Clock::now();
    auto f = c.Submit(std::move(call));
    if (!f.ok()) Die(f.status());
    if (Status st = f->Wait(30000); !st.ok()) Die(st);
    samples.push_back(Seconds(t0) * 1e6);
    prev = *f;
  }
  return Summarise(samples).median;
}

// Tasks/s of `n` noops submitted at once (`chain`: each after the last).
double Throughput(client::Client& c, int n, bool chain) {
  std::vector<Future> fs;
  fs.reserve(n);
  auto t0 = Clock::now();
  for (int i = 0; i < n; ++i) {
    client::Call call{.kernel = "noop"};
    if (chain && i > 0) call.inputs = {fs.back()};
    auto f = c.Submit(std::move(call));
    if (!f.ok()) Die(f.status());
    fs.push_back(*f);
  }
  for (const Future& f : fs) {
    if (Status st = f.Wait(120000); !st.ok()) Die(st);
  }
  return n / Seconds(t0);
}

}  // namespace
}  // namespace hmpmd

int main(int argc, char** argv) {
  using namespace hmpmd;
  CLI::App app{"bench/driver: the driver API's round trip and throughput against raw ZeroMQ"};
  int runs = 3, round_trips = 2'000, chain = 10'000, independent = 50'000;
  bool smoke = false;
  app.add_option("--runs", runs, "Runs per figure (the median is reported)")->capture_default_str();
  app.add_option("--round-trips", round_trips, "Submit -> Wait round trips per run")
      ->capture_default_str();
  app.add_option("--chain", chain, "Tasks in the pipelined chain")->capture_default_str();
  app.add_option("--independent", independent, "Independent tasks")->capture_default_str();
  app.add_flag("--smoke", smoke, "Small sizes, one run (for CI)");
  CLI11_PARSE(app, argc, argv);
  if (smoke) {
    runs = 1;
    round_trips = 200;
    chain = 500;
    independent = 2'000;
  }
  spdlog::set_level(spdlog::level::warn);
  std::vector<double> raw, rtt, call, call_off, chain_tps, tps;
  for (int r = 0; r < runs; ++r) {
    double us = RawRoundTripUs(round_trips * 5);
    if (us <= 0) return std::fprintf(stderr, "bench_driver: the raw round trip failed\n"), 1;
    raw.push_back(us);
  }
  LocalClusterOptions o;
  o.workers = 2;
  o.cores = "cube=1";
  o.worker_binary = HMPMD_WORKER_BIN;
  o.log_level = "error";
  LocalCluster cluster(o);
  if (Status st = cluster.Start(); !st.ok()) Die(st);
  client::ClientOptions co;
  co.controller = cluster.controller().endpoint();
  co.session = "bench_driver";
  auto c = client::Client::Connect(co);
  if (!c.ok()) Die(c.status());
  co.session = "bench_driver_controller_only";
  co.direct_done = false;
  auto off = client::Client::Connect(co);
  if (!off.ok()) Die(off.status());
  Throughput(**c, std::min(independent, 2000), false);  // warm up
  Throughput(**off, std::min(independent, 2000), false);
  for (int r = 0; r < runs; ++r) {
    rtt.push_back(RoundTripUs(**c, round_trips, true));
    call.push_back(RoundTripUs(**c, round_trips, false));
    call_off.push_back(RoundTripUs(**off, round_trips, false));
    chain_tps.push_back(Throughput(**c, chain, true));
    tps.push_back(Throughput(**c, independent, false));
  }
  if (Status st = (*c)->Close(); !st.ok()) Die(st);
  if (Status st = (*off)->Close(); !st.ok()) Die(st);
  Stats a = Summarise(raw), b = Summarise(rtt), b2 = Summarise(call), b3 = Summarise(call_off),
        cc = Summarise(chain_tps), d = Summarise(tps);
  std::printf("bench/driver: median of %d run(s) [min .. max]\n", runs);
  std::printf("  (a) raw DEALER/ROUTER round trip        %9.1f us      [%.1f .. %.1f]\n", a.median,
              a.min, a.max);
  std::printf("  (b) Submit -> Wait of one noop           %9.1f us      [%.1f .. %.1f]\n", b.median,
              b.min, b.max);
  std::printf("  (b2) the same, reading nothing           %9.1f us      [%.1f .. %.1f]\n",
              b2.median, b2.min, b2.max);
  std::printf("       controller's word only             %9.1f us      [%.1f .. %.1f]\n", b3.median,
              b3.min, b3.max);
  std::printf("  (c) chain of %6d noops, submitted at once %6.0f tasks/s [%.0f .. %.0f]\n", chain,
              cc.median, cc.min, cc.max);
  std::printf("  (d) %6d independent noops, 2 workers  %9.0f tasks/s [%.0f .. %.0f]\n", independent,
              d.median, d.min, d.max);
  std::printf("  ratio (b)/(a) = %.2f, (b2)/(a) = %.2f (controller's word only %.2f)\n",
              b.median / a.median, b2.median / a.median, b3.median / a.median);
  return 0;
}
