// Attacks tried on a controller with a token, all at once while a job runs,
// from peers on loopback that do not hold the token: connections that
// carry worker registrations and driver sessions with a wrong or missing
// token, REST calls without it, idle HTTP connections holding half a
// request head (slowloris), and a multipart message that never ends. Every
// one is refused (the ZeroMQ ones in the handshake); the refusals are
// counted and logged only at the 1st, 2nd, 4th... one; the job ends
// succeeded with each task run exactly once; and the controller still
// answers. docs/operations.md ("Attacks tried") has the table.
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <regex>
#include <sstream>
#include <thread>
#include <zmq.hpp>

#include "hmpmd/protocol/codec.h"
#include "hmpmd/protocol/control_auth.h"
#include "hmpmd/protocol/data_auth.h"
#include "process_cluster.h"

namespace hmpmd::testing {
namespace {

constexpr const char* kToken = "tok-attack-5b1f0c9e";
constexpr int kTasks = 400;

std::string Spec() {
  std::string tasks;
  for (int i = 0; i < kTasks; ++i) {
    if (i > 0) tasks += ",";
    tasks += R"({"id":"t)" + std::to_string(i) + R"(","kernel":"sleep","args":{"us":20000}})";
  }
  return R"({"name":"attacked","tasks":[)" + tasks + "]}";
}

int ConnectTcp(uint16_t port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(port);
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (fd >= 0 && ::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) != 0) {
    ::close(fd);
    return -1;
  }
  return fd;
}

double Metric(ProcessCluster& c, const std::string& name) {
  auto r = c.Call("GET", "/metrics", "", {{"Authorization", std::string("Bearer ") + kToken}});
  std::smatch m;
  const std::regex re(name + " ([0-9.e+]+)");
  return r.ok() && std::regex_search(r->body, m, re) ? std::stod(m[1]) : -1;
}

size_t Count(const std::string& text, const std::string& what) {
  size_t n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

TEST(AttackTest, RefusedWhileAJobRunsWhichEndsWithEachTaskRunOnce) {
  const auto dir =
      std::filesystem::temp_directory_path() / ("hmpmd-attack-" + std::to_string(::getpid()));
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  const std::string token_file = (dir / "token").string();
  std::ofstream(token_file) << kToken << "\n";
  ProcessCluster cluster(dir.string());
  cluster.set_rest_token(kToken);
  ASSERT_TRUE(cluster.StartController({"--token-file", token_file}).ok());
  for (int i = 0; i < 2; ++i) ASSERT_TRUE(cluster.StartWorker({"--token-file", token_file}).ok());
  ASSERT_TRUE(cluster.WaitWorkers(2, 30000));
  const uint16_t http_port = static_cast<uint16_t>(
      std::stoi(cluster.http_url().substr(cluster.http_url().rfind(':') + 1)));

  // Slowloris: idle connections, each with half a request head, held for
  // the whole job.
  std::vector<int> idle;
  for (int i = 0; i < 200; ++i) {
    const int fd = ConnectTcp(http_port);
    if (fd < 0) break;
    const std::string half = "GET /api/v1/pool HTTP/1.1\r\nHost: x\r\n";
    (void)!::send(fd, half.data(), half.size(), MSG_NOSIGNAL);
    idle.push_back(fd);
  }
  EXPECT_EQ(idle.size(), 200u);

  auto submitted = cluster.Call("POST", "/api/v1/jobs", Spec(),
                                {{"Authorization", std::string("Bearer ") + kToken}});
  ASSERT_TRUE(submitted.ok() && submitted->status == 201)
      << (submitted.ok() ? submitted->body : submitted.status().ToString());

  std::atomic<bool> stop{false};
  std::atomic<int> connections{0}, plain{0}, let_in{0}, reads_refused{0}, reads_answered{0};
  zmq::context_t ctx(1);
  std::thread zmq_attacker([&] {
    RegisterMsg reg;
    reg.name = "intruder";
    reg.cores = {CoreGroup{CoreKind::kCube, 64}};
    reg.kernels = {"noop", "sleep"};
    SessionOpen open;
    open.name = "intruder";
    open.heartbeat_ms = 1000;
    for (int i = 0; i < 500 && !stop; ++i) {
      // A connection each: the handshake refuses the first, so nothing
      // more goes out on it.
      zmq::socket_t rogue(ctx, zmq::socket_type::dealer);
      rogue.set(zmq::sockopt::linger, 0);
      rogue.set(zmq::sockopt::reconnect_ivl, -1);  // one try: one refusal
      // No credentials at all, PLAIN without a password, or a wrong one.
      if (i % 3 > 0) SetControlCredentials(rogue, i % 3 == 2 ? "wrong" : "");
      zmq::socket_t events = MonitorHandshakes(ctx, rogue);
      reg.token = open.token = i % 3 == 2 ? "wrong" : "";
      rogue.connect(cluster.zmq_endpoint());  // first: a DEALER without a pipe blocks
      for (const Message& m : {Message(reg), Message(open)}) {
        const EncodedFrames f = Encode(m);
        // Not waiting: a refused DEALER has no pipe, and a send would block.
        if (!rogue.send(zmq::buffer(f.header),
                        zmq::send_flags::sndmore | zmq::send_flags::dontwait)) {
          break;
        }
        (void)rogue.send(zmq::buffer(f.body), zmq::send_flags::dontwait);
      }
      const int event = NextMonitorEvent(events, 10'000);
      if (event == ZMQ_EVENT_HANDSHAKE_SUCCEEDED) ++let_in;
      ++connections;
      if (i % 3 > 0) ++plain;
    }
  });
  // A multipart message that never ends, from a peer with a wrong token:
  // refused in the handshake, so none of it leaves the sender.
  std::thread endless([&] {
    zmq::socket_t s(ctx, zmq::socket_type::dealer);
    s.set(zmq::sockopt::linger, 0);
    s.set(zmq::sockopt::sndhwm, 0);
    s.set(zmq::sockopt::reconnect_ivl, -1);
    SetControlCredentials(s, "wrong");
    s.connect(cluster.zmq_endpoint());
    const std::string part(1024, 'x');
    for (int i = 0; i < 20000 && !stop; ++i) {
      if (!s.send(zmq::buffer(part), zmq::send_flags::sndmore | zmq::send_flags::dontwait)) break;
    }
    while (!stop) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  });
  std::thread rest_attacker([&] {
    const std::vector<std::string> targets = {"/api/v1/pool",           "/api/v1/jobs",
                                              "/api/v1/jobs/1",         "/api/v1/jobs/1/tasks",
                                              "/api/v1/jobs/1/outputs", "/metrics"};
    for (int i = 0; i < 2000 && !stop; ++i) {
      auto r = cluster.Call(i % 7 == 0 ? "DELETE" : "GET",
                            i % 7 == 0 ? "/api/v1/jobs/1" : targets[i % targets.size()], "",
                            {{"Authorization", "Bearer guess-" + std::to_string(i)}});
      if (r.ok() && (r->status == 401 || r->status == 403)) {
        ++reads_refused;
      } else {
        ++reads_answered;
      }
    }
  });

  const nlohmann::json job = cluster.WaitJob(1, 120000);
  stop = true;
  zmq_attacker.join();
  endless.join();
  rest_attacker.join();
  EXPECT_EQ(job.value("state", ""), "succeeded") << job.dump();
  std::printf(
      "while the job ran: %d connections with a wrong or no token, %d REST calls with a "
      "guessed one, %zu idle connections held\n",
      connections.load(), reads_refused.load() + reads_answered.load(), idle.size());
  EXPECT_GT(connections.load(), 0);
  EXPECT_EQ(let_in.load(), 0) << "a peer without the token finished its handshake";
  EXPECT_GT(reads_refused.load(), 0);
  EXPECT_EQ(reads_answered.load(), 0) << "a call with a guessed token was answered";

  // Each refused PLAIN connection is counted, the endless one's too. One
  // without credentials is counted when the controller reads its greeting;
  // the peer may drop the connection first (it sees the mismatch too).
  double refused = 0;
  for (int i = 0; i < 250 && refused < connections + 1; ++i) {
    refused = Metric(cluster, "hmpmd_refused_tokens_total");
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  EXPECT_GE(refused, plain + 1);
  EXPECT_LE(refused, connections + 1);
  auto pool = cluster.Get("/api/v1/pool");
  EXPECT_EQ(pool.value("alive_devices", 0), 2) << pool.dump();

  // Each task ran exactly once: nothing lost, nothing run twice.
  std::map<uint32_t, int> runs;
  for (const ProcessCluster::Exec& e : cluster.ReadExecLog()) {
    if (e.job == 1) ++runs[e.task];
  }
  EXPECT_EQ(runs.size(), static_cast<size_t>(kTasks));
  for (const auto& [task, n] : runs) EXPECT_EQ(n, 1) << "task " << task;

  // The slowloris connections did not stop an answer; closed, they are gone.
  for (int fd : idle) ::close(fd);
  EXPECT_FALSE(cluster.Get("/api/v1/jobs").is_null());

  cluster.KillController();
  std::ifstream in(dir / "controller.log");
  std::stringstream log;
  log << in.rdbuf();
  // 1st, 2nd, 4th, ... of at most 500 each: no log flood.
  EXPECT_LE(Count(log.str(), "refused a connection"), 20u);
  EXPECT_LE(Count(log.str(), "refused"), 40u) << log.str().substr(0, 4000);
  EXPECT_EQ(log.str().find(kToken), std::string::npos) << "the token appears in the log";
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace hmpmd::testing
