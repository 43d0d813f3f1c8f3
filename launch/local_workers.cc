#include "hmpmd/launch/local_workers.h"

#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <string_view>
#include <thread>

extern char** environ;

namespace hmpmd {

std::string WorkerBinary() {
  if (const char* env = std::getenv("HMPMD_WORKER_BIN"); env && *env) return env;
  std::error_code ec;
  auto self = std::filesystem::read_symlink("/proc/self/exe", ec);
  if (!ec) {
    auto beside = self.parent_path() / "hmpmd-worker";
    if (std::filesystem::exists(beside, ec)) return beside.string();
  }
  return "hmpmd-worker";  // posix_spawnp searches PATH
}

LocalWorkers::~LocalWorkers() { StopAll(std::chrono::milliseconds(2000)); }

Status LocalWorkers::Start(const std::string& binary, const std::vector<std::string>& args) {
  std::vector<std::string> argv_store;
  argv_store.push_back(binary);
  argv_store.insert(argv_store.end(), args.begin(), args.end());
  std::vector<char*> argv;
  for (auto& a : argv_store) argv.push_back(a.data());
  argv.push_back(nullptr);
  // The environment plus HMPMD_PARENT_PID, so the worker leaves when this
  // process is gone, however it ended (WorkerOptions::parent_pid).
  constexpr std::string_view kParentVar = "HMPMD_PARENT_PID=";
  const std::string parent = std::string(kParentVar) + std::to_string(::getpid());
  std::vector<char*> envp;
  for (char** e = environ; *e != nullptr; ++e) {
    if (!std::string_view(*e).starts_with(kParentVar)) envp.push_back(*e);
  }
  envp.push_back(const_cast<char*>(parent.c_str()));
  envp.push_back(nullptr);
  // A caller that blocks signals to take them with sigwait (hmpmd run) must
  // not pass the block on: the worker stops on SIGTERM.
  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  sigset_t none;
  sigemptyset(&none);
  posix_spawnattr_setsigmask(&attr, &none);
  posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSIGMASK);
  pid_t pid = 0;
  int rc = posix_spawnp(&pid, binary.c_str(), nullptr, &attr, argv.data(), envp.data());
  posix_spawnattr_destroy(&attr);
  if (rc != 0) {
    return Status::Unavailable("cannot start worker '" + binary + "': " + std::strerror(rc));
  }
  pids_.push_back(pid);
  return Status::Ok();
}

std::string LocalWorkers::Exited(pid_t* pid) {
  for (auto it = pids_.begin(); it != pids_.end(); ++it) {
    int status = 0;
    pid_t r = waitpid(*it, &status, WNOHANG);
    if (r == *it) {
      std::string what =
          "worker pid " + std::to_string(*it) +
          (WIFSIGNALED(status) ? " was killed by signal " + std::to_string(WTERMSIG(status))
                               : " exited with status " + std::to_string(WEXITSTATUS(status)));
      if (pid != nullptr) *pid = *it;
      pids_.erase(it);
      return what;
    }
  }
  return "";
}

void LocalWorkers::StopAll(std::chrono::milliseconds grace) {
  // Give them `grace` to leave after Shutdown (or SIGTERM), then kill.
  auto deadline = std::chrono::steady_clock::now() + grace;
  bool termed = false;
  while (!pids_.empty()) {
    for (auto it = pids_.begin(); it != pids_.end();) {
      int status = 0;
      pid_t r = waitpid(*it, &status, WNOHANG);
      if (r == *it || (r < 0 && errno == ECHILD)) {
        it = pids_.erase(it);
      } else {
        ++it;
      }
    }
    if (pids_.empty()) break;
    auto now = std::chrono::steady_clock::now();
    if (!termed && now >= deadline - grace / 2) {
      for (pid_t p : pids_) kill(p, SIGTERM);
      termed = true;
    }
    if (now >= deadline) {
      for (pid_t p : pids_) {
        kill(p, SIGKILL);
        waitpid(p, nullptr, 0);
      }
      pids_.clear();
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
}

}  // namespace hmpmd
