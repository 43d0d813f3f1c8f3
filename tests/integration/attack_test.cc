// Attacks tried on a controller with a token, all at once while a job runs,
// from peers on loopback that do not hold the token: worker registrations
// and driver sessions with a wrong or missing token, REST calls without it,
// idle HTTP connections holding half a request head (slowloris), and a
// multipart message that never ends. Every one is refused; the refusals
// are counted and logged only at the 1st, 2nd, 4th... one; the job ends
// succeeded with each task run exactly once; and the controller still
// answers. What is not defended yet is in docs/operations.md ("Attacks
// tried").
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
  std::atomic<int> registrations{0}, sessions{0}, reads_refused{0}, reads_answered{0};
  zmq::context_t ctx(1);
  std::thread zmq_attacker([&] {
    zmq::socket_t rogue(ctx, zmq::socket_type::dealer);
    rogue.set(zmq::sockopt::linger, 0);
    rogue.connect(cluster.zmq_endpoint());
    RegisterMsg reg;
    reg.name = "intruder";
    reg.cores = {CoreGroup{CoreKind::kCube, 64}};
    reg.kernels = {"noop", "sleep"};
    SessionOpen open;
    open.name = "intruder";
    open.heartbeat_ms = 1000;
    for (int i = 0; i < 500 && !stop; ++i) {
      reg.token = i % 2 ? "wrong" : "";
      open.token = i % 2 ? "" : "wrong";
      for (const Message& m : {Message(reg), Message(open)}) {
        const EncodedFrames f = Encode(m);
        rogue.send(zmq::buffer(f.header), zmq::send_flags::sndmore);
        rogue.send(zmq::buffer(f.body), zmq::send_flags::none);
      }
      ++registrations;
      ++sessions;
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
    }
  });
  // A multipart message that never ends: libzmq delivers none of it until
  // its last part, so it costs the sender, not the controller.
  std::thread endless([&] {
    zmq::socket_t s(ctx, zmq::socket_type::dealer);
    s.set(zmq::sockopt::linger, 0);
    s.set(zmq::sockopt::sndhwm, 0);
    s.connect(cluster.zmq_endpoint());
    const std::string part(1024, 'x');
    for (int i = 0; i < 20000 && !stop; ++i) s.send(zmq::buffer(part), zmq::send_flags::sndmore);
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
      "while the job ran: %d registrations and %d sessions with a wrong token, %d REST "
      "calls with a guessed one, %zu idle connections held\n",
      registrations.load(), sessions.load(), reads_refused.load() + reads_answered.load(),
      idle.size());
  EXPECT_GT(registrations.load(), 0);
  EXPECT_GT(reads_refused.load(), 0);
  EXPECT_EQ(reads_answered.load(), 0) << "a call with a guessed token was answered";

  // Each refused registration and session is counted.
  double refused = 0;
  for (int i = 0; i < 250 && refused < registrations + sessions; ++i) {
    refused = Metric(cluster, "hmpmd_refused_tokens_total");
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  EXPECT_EQ(refused, registrations + sessions);
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
  EXPECT_LE(Count(log.str(), "refused worker"), 10u);
  EXPECT_LE(Count(log.str(), "refused"), 40u) << log.str().substr(0, 4000);
  EXPECT_EQ(log.str().find(kToken), std::string::npos) << "the token appears in the log";
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace hmpmd::testing
