#include "process_cluster.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <signal.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <fstream>
#include <random>
#include <sstream>
#include <thread>

#include "hmpmd/http/http_client.h"

extern char** environ;

namespace hmpmd::testing {
namespace {

// True when `port` can be bound on 127.0.0.1 now (closed again at once).
bool Bindable(int port) {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return false;
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  a.sin_port = htons(static_cast<uint16_t>(port));
  const bool ok = ::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0;
  ::close(fd);
  return ok;
}

// A free port on 127.0.0.1 *below the kernel's ephemeral range*. A cluster
// keeps its ports across controller restarts, and a port from the
// ephemeral range, free while its controller is down, could be handed to
// another test running beside this one (whose controller then answers our
// requests). Ports below the range are only ever taken by name.
int FreePort() {
  int lo = 32768;
  std::ifstream range("/proc/sys/net/ipv4/ip_local_port_range");
  range >> lo;
  const int first = 10000, span = std::max(1000, lo - first);
  std::mt19937 rng(
      static_cast<uint32_t>(::getpid()) * 7919u +
      static_cast<uint32_t>(std::chrono::steady_clock::now().time_since_epoch().count()));
  for (int i = 0; i < 200; ++i) {
    const int port = first + static_cast<int>(rng() % static_cast<uint32_t>(span));
    if (Bindable(port)) return port;
  }
  return 0;  // the controller then fails to bind, naming the port
}

}  // namespace

ProcessCluster::ProcessCluster(std::string dir)
    : dir_(std::move(dir)), db_(dir_ + "/hmpmd.db"), exec_log_(dir_ + "/exec.log") {
  zmq_port_ = FreePort();
  http_port_ = FreePort();
  while (http_port_ == zmq_port_) http_port_ = FreePort();
}

ProcessCluster::~ProcessCluster() {
  for (pid_t p : workers_) KillAndReap(p, SIGKILL);
  KillAndReap(controller_, SIGKILL);
}

pid_t ProcessCluster::Spawn(const std::vector<std::string>& args, const std::string& log) {
  std::vector<std::string> store = args;
  std::vector<char*> argv;
  for (auto& a : store) argv.push_back(a.data());
  argv.push_back(nullptr);
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 2, log.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
  posix_spawn_file_actions_adddup2(&actions, 2, 1);
  pid_t pid = -1;
  int rc = posix_spawn(&pid, argv[0], &actions, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  return rc == 0 ? pid : -1;
}

void ProcessCluster::KillAndReap(pid_t pid, int sig) {
  if (pid <= 0) return;
  if (::kill(pid, sig) == 0 || errno != ESRCH) ::waitpid(pid, nullptr, 0);
}

Status ProcessCluster::StartController(const std::vector<std::string>& extra, bool wait) {
  std::vector<std::string> argv = {HMPMD_CLI_BIN,
                                   "controller",
                                   "--listen",
                                   "tcp://127.0.0.1:" + std::to_string(zmq_port_),
                                   "--http",
                                   "127.0.0.1:" + std::to_string(http_port_),
                                   "--db",
                                   db_,
                                   "--heartbeat-ms",
                                   "100",
                                   "--worker-timeout-ms",
                                   "1000",
                                   "--recovery-grace-ms",
                                   std::to_string(recovery_grace_ms_),
                                   "--log-level",
                                   log_level_};
  argv.insert(argv.end(), extra.begin(), extra.end());
  controller_ = Spawn(argv, dir_ + "/controller.log");
  if (controller_ < 0) return Status::Internal("cannot start " + std::string(HMPMD_CLI_BIN));
  if (!wait) return Status::Ok();
  for (int i = 0; i < 500; ++i) {
    if (!Get("/api/v1/pool").is_null()) return Status::Ok();
    int status = 0;
    if (::waitpid(controller_, &status, WNOHANG) == controller_) {
      controller_ = -1;
      return Status::Internal("controller exited at start");
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return Status::Unavailable("controller REST API did not answer");
}

bool ProcessCluster::ControllerRunning() {
  if (controller_ <= 0) return false;
  if (::waitpid(controller_, nullptr, WNOHANG) == controller_) {
    controller_ = -1;
    return false;
  }
  return true;
}

void ProcessCluster::KillController() {
  KillAndReap(controller_, SIGKILL);
  controller_ = -1;
}

void ProcessCluster::StopController() {
  KillAndReap(controller_, SIGTERM);
  controller_ = -1;
}

Status ProcessCluster::StartWorker(const std::vector<std::string>& extra,
                                   const std::string& cores) {
  std::vector<std::string> argv = {
      worker_bin_, "--controller", worker_controller_.empty() ? zmq_endpoint() : worker_controller_,
      "--cores",   cores,          "--exec-log",
      exec_log_,   "--log-level",  log_level_};
  argv.insert(argv.end(), extra.begin(), extra.end());
  pid_t pid = Spawn(argv, dir_ + "/worker.log");
  if (pid < 0) return Status::Internal("cannot start " + worker_bin_);
  workers_.push_back(pid);
  return Status::Ok();
}

void ProcessCluster::KillWorker(size_t i) {
  KillAndReap(workers_[i], SIGKILL);
  workers_[i] = -1;
}

bool ProcessCluster::WorkerRunning(size_t i) {
  if (workers_[i] <= 0) return false;
  if (::waitpid(workers_[i], nullptr, WNOHANG) == workers_[i]) {
    workers_[i] = -1;
    return false;
  }
  return true;
}

Result<HttpResponse> ProcessCluster::Call(const std::string& method, const std::string& path,
                                          const std::string& body,
                                          const std::map<std::string, std::string>& headers) {
  HttpUrl url{"127.0.0.1", std::to_string(http_port_), ""};
  return HttpCall(url, method, path, body, headers, std::chrono::milliseconds(5000));
}

nlohmann::json ProcessCluster::Get(const std::string& path) {
  HttpUrl url{"127.0.0.1", std::to_string(http_port_), ""};
  std::map<std::string, std::string> headers;
  if (!rest_token_.empty()) headers["Authorization"] = "Bearer " + rest_token_;
  auto r = HttpCall(url, "GET", path, "", headers, std::chrono::milliseconds(2000));
  if (!r.ok() || r->status != 200) return nullptr;
  return nlohmann::json::parse(r->body, nullptr, false);
}

DataToken ProcessCluster::JobDataToken(uint32_t id) {
  nlohmann::json outs = Get("/api/v1/jobs/" + std::to_string(id) + "/outputs");
  if (!outs.is_object() || !outs["data_token"].is_string()) {
    ADD_FAILURE() << "job " << id << ": no data_token in " << outs.dump();
    return {};
  }
  Result<DataToken> t = ParseDataToken(outs["data_token"].get<std::string>());
  EXPECT_TRUE(t.ok()) << t.status().ToString();
  return t.ok() ? *t : DataToken{};
}

Result<uint32_t> ProcessCluster::Submit(const std::string& spec_json) {
  HttpUrl url{"127.0.0.1", std::to_string(http_port_), ""};
  ASSIGN_OR_RETURN(HttpResponse r, HttpCall(url, "POST", "/api/v1/jobs", spec_json, {},
                                            std::chrono::milliseconds(5000)));
  if (r.status != 201)
    return Status::Internal("submit: HTTP " + std::to_string(r.status) + " " + r.body);
  return nlohmann::json::parse(r.body).at("id").get<uint32_t>();
}

nlohmann::json ProcessCluster::WaitJob(uint32_t id, int timeout_ms) {
  nlohmann::json j;
  for (int waited = 0; waited < timeout_ms; waited += 20) {
    j = Get("/api/v1/jobs/" + std::to_string(id));
    if (j.is_object()) {
      std::string state = j.value("state", "");
      if (state == "succeeded" || state == "failed" || state == "cancelled") return j;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return j;
}

bool ProcessCluster::WaitWorkers(size_t n, int timeout_ms) {
  for (int waited = 0; waited < timeout_ms; waited += 20) {
    nlohmann::json pool = Get("/api/v1/pool");
    if (pool.is_object() && pool.value("alive_devices", size_t{0}) >= n) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return false;
}

std::vector<ProcessCluster::Exec> ProcessCluster::ReadExecLog() const {
  std::vector<Exec> out;
  std::ifstream in(exec_log_);
  Exec e{};
  while (in >> e.job >> e.task >> e.attempt >> e.pid) out.push_back(e);
  return out;
}

}  // namespace hmpmd::testing
