// LocalWorkers: worker processes that `hmpmd run` starts on this machine and
// stops again, by PID, whatever happens; and which stop by themselves when
// this process is gone (HMPMD_PARENT_PID, WorkerOptions::parent_pid).
// Thread-safety: not thread-safe; one owner thread.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <string>
#include <vector>

#include "hmpmd/protocol/status.h"

namespace hmpmd {

// The hmpmd-worker binary: $HMPMD_WORKER_BIN, else beside this executable,
// else found on PATH.
std::string WorkerBinary();

class LocalWorkers {
 public:
  ~LocalWorkers();  // stops whatever still runs

  // Starts `binary` with `args` (argv[0] excluded).
  Status Start(const std::string& binary, const std::vector<std::string>& args);
  // First child that has exited, as "pid N exited with status S"; empty
  // when all still run. Reaps it, and sets *pid (if given) to its pid.
  std::string Exited(pid_t* pid = nullptr);
  // SIGTERM, then SIGKILL after `grace`; waits for every child.
  void StopAll(std::chrono::milliseconds grace);
  const std::vector<pid_t>& pids() const { return pids_; }

 private:
  std::vector<pid_t> pids_;
};

}  // namespace hmpmd
