#include "thread_cpu.h"

#include <dirent.h>
#include <time.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>

namespace hmpmd::bench {
namespace {

// Name and utime + stime (seconds) from a /proc/.../stat file; false when
// it cannot be read (the thread or process is gone).
bool ReadStat(const std::string& path, std::string* name, double* seconds) {
  std::ifstream in(path);
  std::string line;
  if (!std::getline(in, line)) return false;
  size_t open = line.find('('), close = line.rfind(')');
  if (open == std::string::npos || close == std::string::npos || close < open) return false;
  *name = line.substr(open + 1, close - open - 1);
  // Fields after "(comm)": state is field 3; utime and stime are 14 and 15.
  std::istringstream rest(line.substr(close + 2));
  std::string field;
  unsigned long long utime = 0, stime = 0;
  for (int i = 3; i <= 15 && rest >> field; ++i) {
    if (i == 14) utime = std::strtoull(field.c_str(), nullptr, 10);
    if (i == 15) stime = std::strtoull(field.c_str(), nullptr, 10);
  }
  static const double kTick = static_cast<double>(sysconf(_SC_CLK_TCK));
  *seconds = static_cast<double>(utime + stime) / kTick;
  return true;
}

// Scheduler-precise CPU time of a thread (`thread`) or process, through the
// CPU-time clock Linux gives every task (the ids glibc's
// pthread_getcpuclockid and clock_getcpuclockid compute); /proc's ticks
// miss threads that run in bursts shorter than a tick.
bool PreciseSeconds(pid_t id, bool thread, double* seconds) {
  const clockid_t clock =
      static_cast<clockid_t>((~static_cast<unsigned>(id) << 3) | (thread ? 4u | 2u : 2u));
  timespec ts{};
  if (clock_gettime(clock, &ts) != 0) return false;
  *seconds = static_cast<double>(ts.tv_sec) + ts.tv_nsec / 1e9;
  return true;
}

// Seconds the task waited on a run queue (schedstat's second field: the
// scheduler's run_delay in nanoseconds); false when it cannot be read.
bool RunDelaySeconds(const std::string& path, double* seconds) {
  std::ifstream in(path);
  unsigned long long on_cpu = 0, delay = 0;
  if (!(in >> on_cpu >> delay)) return false;
  *seconds = static_cast<double>(delay) / 1e9;
  return true;
}

// Busy seconds of all cores together since boot (/proc/stat's first line:
// everything but idle and iowait).
double MachineBusySeconds() {
  std::ifstream in("/proc/stat");
  std::string cpu;
  unsigned long long v[8] = {};
  if (!(in >> cpu) || cpu != "cpu") return 0;
  for (auto& x : v) in >> x;
  static const double kTick = static_cast<double>(sysconf(_SC_CLK_TCK));
  // user nice system idle iowait irq softirq steal
  return static_cast<double>(v[0] + v[1] + v[2] + v[5] + v[6] + v[7]) / kTick;
}

}  // namespace

CpuSample ThreadCpu::Sample() const {
  CpuSample s;
  s.machine = MachineBusySeconds();
  if (DIR* dir = opendir("/proc/self/task")) {
    while (dirent* e = readdir(dir)) {
      if (e->d_name[0] == '.') continue;
      std::string name;
      double seconds = 0;
      if (!ReadStat(std::string("/proc/self/task/") + e->d_name + "/stat", &name, &seconds)) {
        continue;
      }
      pid_t tid = static_cast<pid_t>(std::atoi(e->d_name));
      (void)PreciseSeconds(tid, true, &seconds);
      const std::string role = tid == loop_tid_ ? std::string("loop") : name;
      s.seconds[role] += seconds;
      double waited = 0;
      if (RunDelaySeconds(std::string("/proc/self/task/") + e->d_name + "/schedstat", &waited)) {
        s.waited[role] += waited;
      }
    }
    closedir(dir);
  }
  for (pid_t pid : workers_) {
    std::string name;
    double seconds = 0;
    if (PreciseSeconds(pid, false, &seconds) ||
        ReadStat("/proc/" + std::to_string(pid) + "/stat", &name, &seconds)) {
      s.seconds["workers"] += seconds;
    }
    const std::string tasks = "/proc/" + std::to_string(pid) + "/task";
    if (DIR* dir = opendir(tasks.c_str())) {
      while (dirent* e = readdir(dir)) {
        double waited = 0;
        if (e->d_name[0] != '.' &&
            RunDelaySeconds(tasks + "/" + e->d_name + "/schedstat", &waited)) {
          s.waited["workers"] += waited;
        }
      }
      closedir(dir);
    }
  }
  return s;
}

CpuSample ThreadCpu::Diff(const CpuSample& before, const CpuSample& after) {
  CpuSample d;
  auto diff = [](const std::map<std::string, double>& b, const std::map<std::string, double>& a,
                 std::map<std::string, double>* out) {
    for (const auto& [role, v] : a) {
      auto it = b.find(role);
      (*out)[role] = v - (it == b.end() ? 0.0 : it->second);
    }
  };
  diff(before.seconds, after.seconds, &d.seconds);
  diff(before.waited, after.waited, &d.waited);
  d.machine = after.machine - before.machine;
  return d;
}

}  // namespace hmpmd::bench
