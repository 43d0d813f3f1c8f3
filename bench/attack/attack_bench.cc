// bench/attack: dispatch throughput while peers without the token attack.
//
// One controller with a token and two workers (LocalCluster, the HTTP side
// on) runs jobs of independent noop tasks, alternately with no attacker and
// with: a ZeroMQ peer opening connections with a wrong token back to back
// (each refused in its handshake, a registration or session open queued),
// HTTP clients sending reads and cancels with guessed tokens back to back
// (a connection each), and idle HTTP connections holding half a request
// head (slowloris). Each figure is the
// median of --runs runs; the ratio attacked / quiet is what the attacks
// cost dispatch. The refusals counted and answered are printed beside it.
#include <netinet/in.h>
#include <spdlog/spdlog.h>
#include <sys/socket.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <atomic>
#include <cstdio>
#include <string>
#include <thread>
#include <vector>
#include <zmq.hpp>

#include "bench_util.h"
#include "hmpmd/http/http_client.h"
#include "hmpmd/protocol/codec.h"
#include "hmpmd/protocol/control_auth.h"
#include "hmpmd/protocol/data_auth.h"
#include "hmpmd/protocol/data_token.h"

namespace hmpmd {
namespace {

constexpr int kIdleConnections = 200;

class Attackers {
 public:
  Attackers(std::string zmq_endpoint, uint16_t http_port, int http_clients)
      : http_port_(http_port) {
    threads_.emplace_back([this, zmq_endpoint] { Zmq(zmq_endpoint); });
    for (int i = 0; i < http_clients; ++i) threads_.emplace_back([this, i] { Http(i); });
    for (int i = 0; i < kIdleConnections; ++i) {
      const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
      sockaddr_in a{};
      a.sin_family = AF_INET;
      a.sin_port = htons(http_port_);
      a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
      if (fd < 0 || ::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) != 0) {
        if (fd >= 0) ::close(fd);
        continue;
      }
      const std::string half = "GET /api/v1/pool HTTP/1.1\r\nHost: x\r\n";
      (void)!::send(fd, half.data(), half.size(), MSG_NOSIGNAL);
      idle_.push_back(fd);
    }
  }
  ~Attackers() { Stop(); }
  // Stops every attacker; the counts are final after it.
  void Stop() {
    stop_ = true;
    for (std::thread& t : threads_) t.join();
    threads_.clear();
    for (int fd : idle_) ::close(fd);
    idle_held_ = idle_.size();
    idle_.clear();
  }
  uint64_t zmq_sent() const { return zmq_sent_; }
  uint64_t zmq_let_in() const { return zmq_let_in_; }
  uint64_t http_refused() const { return http_refused_; }
  uint64_t http_answered() const { return http_answered_; }
  size_t idle_held() const { return idle_held_; }

 private:
  // The controller checks the token in the handshake, so a peer without
  // it gets one refusal a connection: this one opens connections back to
  // back, each with a registration or a session open queued behind it.
  void Zmq(const std::string& endpoint) {
    zmq::context_t ctx(1);
    RegisterMsg reg;
    reg.name = "intruder";
    reg.token = "wrong";
    reg.cores = {CoreGroup{CoreKind::kCube, 64}};
    reg.kernels = {"noop"};
    SessionOpen open;
    open.name = "intruder";
    open.token = "wrong";
    const EncodedFrames frames[] = {Encode(Message(reg)), Encode(Message(open))};
    for (uint64_t i = 0; !stop_; ++i) {
      zmq::socket_t rogue(ctx, zmq::socket_type::dealer);
      rogue.set(zmq::sockopt::linger, 0);
      rogue.set(zmq::sockopt::reconnect_ivl, -1);  // one try: one refusal
      SetControlCredentials(rogue, "wrong");
      zmq::socket_t events = MonitorHandshakes(ctx, rogue);
      rogue.connect(endpoint);  // first: a DEALER without a pipe blocks a send
      const EncodedFrames& f = frames[i % 2];
      // Not waiting: a refused DEALER has no pipe, and a send would block.
      if (rogue.send(zmq::buffer(f.header), zmq::send_flags::sndmore | zmq::send_flags::dontwait)) {
        (void)rogue.send(zmq::buffer(f.body), zmq::send_flags::dontwait);
      }
      if (NextMonitorEvent(events, 5000) == ZMQ_EVENT_HANDSHAKE_SUCCEEDED) ++zmq_let_in_;
      ++zmq_sent_;
    }
  }
  void Http(int i) {
    HttpUrl url{"127.0.0.1", std::to_string(http_port_), ""};
    const char* targets[] = {"/api/v1/pool", "/api/v1/jobs", "/api/v1/jobs/1", "/metrics"};
    for (uint64_t n = 0; !stop_; ++n) {
      const bool cancel = n % 5 == 4;
      auto r = HttpCall(url, cancel ? "DELETE" : "GET", cancel ? "/api/v1/jobs/1" : targets[n % 4],
                        "", {{"Authorization", "Bearer guess-" + std::to_string(i * 1000003 + n)}},
                        std::chrono::seconds(5));
      if (r.ok() && (r->status == 401 || r->status == 403)) {
        ++http_refused_;
      } else {
        ++http_answered_;
      }
    }
  }

  uint16_t http_port_;
  std::atomic<bool> stop_{false};
  std::atomic<uint64_t> zmq_sent_{0}, zmq_let_in_{0}, http_refused_{0}, http_answered_{0};
  std::vector<std::thread> threads_;
  std::vector<int> idle_;
  size_t idle_held_ = 0;
};

}  // namespace
}  // namespace hmpmd

int main(int argc, char** argv) {
  using namespace hmpmd;
  CLI::App app{"bench/attack: dispatch throughput with and without attackers lacking the token"};
  int runs = 3, tasks = 200'000, http_clients = 8;
  bool smoke = false;
  app.add_option("--runs", runs, "Runs per figure (the median is reported)")->capture_default_str();
  app.add_option("--tasks", tasks, "Independent noop tasks per job")->capture_default_str();
  app.add_option("--http-clients", http_clients, "HTTP clients guessing tokens back to back")
      ->capture_default_str();
  std::string worker = HMPMD_WORKER_BIN;
  app.add_option("--worker", worker, "hmpmd-worker binary")->capture_default_str();
  app.add_flag("--smoke", smoke, "Small sizes, one run (for CI)");
  CLI11_PARSE(app, argc, argv);
  if (smoke) {
    runs = 1;
    tasks = 5'000;
    http_clients = 2;
  }
  spdlog::set_level(spdlog::level::off);  // the refusals' log lines are not the figure

  const std::string token = DataTokenHex(NewDataToken());
  char token_file[] = "/tmp/hmpmd-attack-bench-XXXXXX";
  const int fd = ::mkstemp(token_file);
  if (fd < 0 || ::write(fd, token.data(), token.size()) != static_cast<ssize_t>(token.size())) {
    return std::fprintf(stderr, "bench: cannot write a token file\n"), 1;
  }
  ::close(fd);
  LocalClusterOptions o;
  o.workers = 2;
  o.cores = "cube=1";
  o.worker_binary = worker;
  o.log_level = "error";
  o.extra_worker_args = {"--token-file", token_file};
  o.service.controller.token = token;
  o.service.serve_http = true;
  o.service.http.bind = "127.0.0.1:0";
  LocalCluster cluster(o);
  if (Status st = cluster.Start(); !st.ok()) {
    ::unlink(token_file);
    return std::fprintf(stderr, "bench: %s\n", st.ToString().c_str()), 1;
  }
  const auto endpoint = cluster.Call([&] { return cluster.controller().endpoint(); });
  const uint16_t http_port = cluster.service().http_port();

  auto g = bench::NoopJob(tasks, false);
  (void)bench::JobSeconds(cluster, bench::NoopJob(std::min(tasks, 10'000), false));  // warm up
  std::vector<double> quiet, attacked;
  uint64_t zmq_sent = 0, let_in = 0, refused = 0, answered = 0;
  size_t idle = 0;
  for (int r = 0; r < runs; ++r) {
    quiet.push_back(g->total_runs() / bench::JobSeconds(cluster, g));
    Attackers attackers(endpoint, http_port, http_clients);
    std::this_thread::sleep_for(std::chrono::milliseconds(300));  // under way
    attacked.push_back(g->total_runs() / bench::JobSeconds(cluster, g));
    attackers.Stop();
    zmq_sent += attackers.zmq_sent();
    let_in += attackers.zmq_let_in();
    refused += attackers.http_refused();
    answered += attackers.http_answered();
    idle = attackers.idle_held();
  }
  // The last refusals are still in flight a moment after the attackers stop.
  uint64_t refused_tokens = 0;
  for (int i = 0; i < 100 && refused_tokens < zmq_sent; ++i) {
    refused_tokens = cluster.Call([&] { return cluster.controller().counters().refused_tokens; });
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  cluster.Stop();
  ::unlink(token_file);

  const double q = bench::Summarise(quiet).median, a = bench::Summarise(attacked).median;
  std::printf("attack: %d noop tasks a job on 2 workers, %d run(s) a figure\n", tasks, runs);
  std::printf("attack: quiet     %10.0f tasks/s (median)\n", q);
  std::printf("attack: attacked  %10.0f tasks/s (median)   ratio %.2f\n", a, a / q);
  std::printf(
      "attack: %llu connections with a wrong token (%llu refused and counted, %llu let "
      "in), %llu REST calls with guessed tokens (%llu answered), %zu idle connections held\n",
      static_cast<unsigned long long>(zmq_sent), static_cast<unsigned long long>(refused_tokens),
      static_cast<unsigned long long>(let_in), static_cast<unsigned long long>(refused + answered),
      static_cast<unsigned long long>(answered), idle);
  return answered == 0 && let_in == 0 ? 0 : 1;
}
