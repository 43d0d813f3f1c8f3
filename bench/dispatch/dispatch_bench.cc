// bench/dispatch: what one task costs to dispatch, against raw ZeroMQ.
//
//  (a) raw DEALER/ROUTER round trip on loopback, between two processes;
//  (b) a chain of dependent noop tasks through the controller and one
//      worker: per-task latency, and its ratio to (a);
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
#include "local_cluster.h"

namespace hmpmd {
namespace {

using bench::JobSeconds;
using bench::NoopJob;
using bench::Stats;
using bench::Summarise;

using Clock = std::chrono::steady_clock;

// Median round trip in microseconds, ROUTER echo in a child process. The
// child binds a free port and tells it through a pipe; every receive has a
// timeout, so a dead peer ends the benchmark instead of hanging it.
double RawRoundTripUs(int round_trips) {
  int fds[2];
  if (pipe(fds) != 0) return -1;
  pid_t child = fork();  // before any ZeroMQ context lives in this process
  if (child == 0) {
    close(fds[0]);
    zmq::context_t cctx(1);
    zmq::socket_t router(cctx, zmq::socket_type::router);
    router.set(zmq::sockopt::linger, 0);
    router.set(zmq::sockopt::rcvtimeo, 5000);
    router.bind("tcp://127.0.0.1:*");
    std::string ep = router.get(zmq::sockopt::last_endpoint);
    if (write(fds[1], ep.data(), ep.size()) != static_cast<ssize_t>(ep.size())) _exit(1);
    close(fds[1]);
    while (true) {
      zmq::message_t id, body;
      if (!router.recv(id) || !router.recv(body)) break;  // timeout: the parent is done
      router.send(id, zmq::send_flags::sndmore);
      router.send(body, zmq::send_flags::none);
    }
    _exit(0);
  }
  close(fds[1]);
  char buf[256];
  ssize_t n = read(fds[0], buf, sizeof buf);
  close(fds[0]);
  if (n <= 0) {
    waitpid(child, nullptr, 0);
    return -1;
  }
  std::string endpoint(buf, static_cast<size_t>(n));
  double median = -1;
  {
    zmq::context_t ctx(1);
    zmq::socket_t dealer(ctx, zmq::socket_type::dealer);
    dealer.set(zmq::sockopt::linger, 0);
    dealer.set(zmq::sockopt::rcvtimeo, 5000);
    dealer.connect(endpoint);
    std::string payload(64, 'x');  // about the size of a one-task batch
    bool ok = true;
    auto ping = [&] {
      dealer.send(zmq::buffer(payload), zmq::send_flags::none);
      zmq::message_t reply;
      ok = ok && dealer.recv(reply).has_value();
    };
    for (int i = 0; i < 100 && ok; ++i) ping();  // warm up
    std::vector<double> samples;
    const int batch = 100;
    for (int b = 0; b < round_trips / batch && ok; ++b) {
      auto t0 = Clock::now();
      for (int i = 0; i < batch; ++i) ping();
      samples.push_back(std::chrono::duration<double, std::micro>(Clock::now() - t0).count() /
                        batch);
    }
    if (ok && !samples.empty()) median = Summarise(samples).median;
  }
  kill(child, SIGTERM);
  waitpid(child, nullptr, 0);
  return median;
}

LocalClusterOptions ClusterOptions(int workers) {
  LocalClusterOptions o;
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
  bool smoke = false;
  app.add_option("--runs", runs, "Runs per figure (the median is reported)")->capture_default_str();
  app.add_option("--chain", chain, "Tasks in the dependent chain")->capture_default_str();
  app.add_option("--independent", independent, "Independent tasks")->capture_default_str();
  app.add_option("--round-trips", round_trips, "Raw round trips per run")->capture_default_str();
  app.add_flag("--smoke", smoke, "Small sizes, one run (for CI)");
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
    LocalCluster one(ClusterOptions(1));
    if (Status st = one.Start(); !st.ok())
      return std::fprintf(stderr, "bench: %s\n", st.ToString().c_str()), 1;
    auto g = NoopJob(chain, true);
    JobSeconds(one, NoopJob(std::min(chain, 1000), true));  // warm up
    for (int r = 0; r < runs; ++r) chain_us.push_back(JobSeconds(one, g) * 1e6 / chain);
  }
  {
    LocalCluster two(ClusterOptions(2));
    if (Status st = two.Start(); !st.ok())
      return std::fprintf(stderr, "bench: %s\n", st.ToString().c_str()), 1;
    auto g = NoopJob(independent, false);
    JobSeconds(two, NoopJob(std::min(independent, 10'000), false));  // warm up
    for (int r = 0; r < runs; ++r) tput.push_back(independent / JobSeconds(two, g));
  }
  Stats a = Summarise(raw), b = Summarise(chain_us), c = Summarise(tput);
  std::printf("bench/dispatch: median of %d run(s) [min .. max]\n", runs);
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
