// ThreadCpu: CPU time of this process's threads (by role) and of other
// processes, read from /proc, so the HTTP load bench can say where the CPU
// goes while clients hammer the API (perf is not available on every VM).
// Thread-safety: Sample() reads /proc and may run on any thread; a
// CpuSample is a plain value. Times come from the per-task CPU clocks
// (precise), names from /proc.
#pragma once

#include <sys/types.h>

#include <map>
#include <string>
#include <vector>

namespace hmpmd::bench {

// CPU seconds (user + system) by role at one instant, and the seconds the
// role's threads spent runnable but waiting for a core (the scheduler's
// run_delay from /proc/.../schedstat; empty where the kernel has no
// schedstats): on a machine whose cores are shared, waiting for a core is
// what slows a latency-bound pipeline down even when its own CPU does not
// grow.
struct CpuSample {
  std::map<std::string, double> seconds;
  std::map<std::string, double> waited;
  // Busy CPU seconds of the whole machine (all cores, from /proc/stat):
  // minus the roles above, what other processes took.
  double machine = 0;
};

class ThreadCpu {
 public:
  // `loop_tid`: the controller loop's thread; `workers`: worker processes.
  // Threads of this process are grouped by name: "loop" (loop_tid), then
  // their comm name ("hmpmd-http", "http-client", ...); each worker process
  // counts under "workers".
  ThreadCpu(pid_t loop_tid, std::vector<pid_t> workers)
      : loop_tid_(loop_tid), workers_(std::move(workers)) {}

  CpuSample Sample() const;
  // after - before, per role (roles missing in `before` count from 0; roles
  // whose threads ended in between may be missing from `after`).
  static CpuSample Diff(const CpuSample& before, const CpuSample& after);

 private:
  pid_t loop_tid_;
  std::vector<pid_t> workers_;
};

}  // namespace hmpmd::bench
