#include "bench_util.h"

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <zmq.hpp>

namespace hmpmd::bench {

Stats Summarise(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return {v[v.size() / 2], v.front(), v.back()};
}

std::shared_ptr<const JobGraph> NoopJob(int n, bool chain) {
  JobSpec spec;
  spec.name = chain ? "chain" : "independent";
  spec.tasks.resize(n);
  for (int i = 0; i < n; ++i) {
    spec.tasks[i].id = "t" + std::to_string(i);
    spec.tasks[i].kernel = "noop";
    if (chain && i > 0) spec.tasks[i].inputs.push_back("t" + std::to_string(i - 1));
  }
  auto g = JobGraph::Build(std::move(spec));
  if (!g.ok()) {
    std::fprintf(stderr, "bench: %s\n", g.status().ToString().c_str());
    std::exit(1);
  }
  return *g;
}

double JobSeconds(LocalCluster& cluster, std::shared_ptr<const JobGraph> graph) {
  double seconds = -1;
  Status st =
      cluster.RunJob(graph, std::chrono::minutes(5), [&](const JobRun& job, const Controller&) {
        if (job.state == JobState::kSucceeded) seconds = (job.finished - job.submitted) / 1e6;
      });
  if (!st.ok() || seconds <= 0) {
    std::fprintf(stderr, "bench: job failed: %s\n", st.ToString().c_str());
    std::exit(1);
  }
  return seconds;
}

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
      auto t0 = std::chrono::steady_clock::now();
      for (int i = 0; i < batch; ++i) ping();
      samples.push_back(
          std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count() /
          batch);
    }
    if (ok && !samples.empty()) median = Summarise(samples).median;
  }
  kill(child, SIGTERM);
  waitpid(child, nullptr, 0);
  return median;
}

}  // namespace hmpmd::bench
