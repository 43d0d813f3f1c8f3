// An LD_PRELOAD library for the fault tests: faults of the disk and the
// clock in one process, turned on and off by writing a file that it
// re-reads at most every 20 ms.
//  - Slow disk (fault_run.py): pwrite64, fdatasync and fsync (the calls
//    SQLite writes and syncs its files with) first sleep for the
//    microseconds the file named by HMPMD_SLOW_DISK_FILE holds. Other
//    writes (logs, sockets) are not touched.
//  - Torn write (fault_run.py): while the file named by
//    HMPMD_CRASH_WRITE_FILE holds a non-zero value, the next pwrite64
//    writes half its bytes and the process kills itself with SIGKILL, as
//    a power cut or kill -9 in the middle of a store write would leave it.
//  - Clock step (clock_step_test.py, fault_run.py): clock_gettime of CLOCK_REALTIME (what
//    std::chrono::system_clock reads) is moved by the microseconds, of
//    either sign, the file named by HMPMD_CLOCK_STEP_FILE holds. The
//    monotonic clocks are not touched.
// A file that is missing, empty or 0 means no fault.
#include <dlfcn.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/types.h>
#include <time.h>
#include <unistd.h>

#include <atomic>
#include <cstdint>
#include <cstdlib>

namespace {

using ClockGettime = int (*)(clockid_t, timespec*);

template <typename F>
F Next(const char* name) {
  return reinterpret_cast<F>(dlsym(RTLD_NEXT, name));
}

ClockGettime RealClockGettime() {
  static const auto real = Next<ClockGettime>("clock_gettime");
  return real;
}

// open/read, not stdio: no allocation, and no call this library wraps.
int64_t ReadMicros(const char* path) {
  const int fd = ::open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return 0;
  char buf[32] = {};
  const ssize_t n = ::read(fd, buf, sizeof buf - 1);
  ::close(fd);
  return n > 0 ? std::strtoll(buf, nullptr, 10) : 0;
}

// The value of the file named by `env`, re-read at most every 20 ms.
class Knob {
 public:
  explicit Knob(const char* env) : path_(std::getenv(env)) {}
  int64_t Get() {
    if (path_ == nullptr) return 0;
    timespec ts{};
    RealClockGettime()(CLOCK_MONOTONIC, &ts);
    const int64_t now = int64_t{ts.tv_sec} * 1'000'000'000 + ts.tv_nsec;
    if (now - read_at_ns_.load(std::memory_order_relaxed) > 20'000'000) {
      read_at_ns_.store(now, std::memory_order_relaxed);
      value_.store(ReadMicros(path_), std::memory_order_relaxed);
    }
    return value_.load(std::memory_order_relaxed);
  }

 private:
  const char* path_;
  std::atomic<int64_t> value_{0};
  std::atomic<int64_t> read_at_ns_{0};
};

void Delay() {
  static Knob delay("HMPMD_SLOW_DISK_FILE");
  const int64_t us = delay.Get();
  if (us <= 0) return;
  timespec d{static_cast<time_t>(us / 1'000'000), static_cast<long>(us % 1'000'000) * 1000};
  while (nanosleep(&d, &d) != 0) {
  }
}

}  // namespace

extern "C" {

ssize_t pwrite64(int fd, const void* buf, size_t count, off64_t offset) {
  static const auto real = Next<ssize_t (*)(int, const void*, size_t, off64_t)>("pwrite64");
  static Knob crash("HMPMD_CRASH_WRITE_FILE");
  Delay();
  if (crash.Get() != 0) {
    (void)real(fd, buf, count / 2, offset);
    ::kill(::getpid(), SIGKILL);
  }
  return real(fd, buf, count, offset);
}

int fdatasync(int fd) {
  static const auto real = Next<int (*)(int)>("fdatasync");
  Delay();
  return real(fd);
}

int fsync(int fd) {
  static const auto real = Next<int (*)(int)>("fsync");
  Delay();
  return real(fd);
}

int clock_gettime(clockid_t id, timespec* tp) {
  const int r = RealClockGettime()(id, tp);
  if (r != 0 || (id != CLOCK_REALTIME && id != CLOCK_REALTIME_COARSE)) return r;
  static Knob step("HMPMD_CLOCK_STEP_FILE");
  const int64_t us = step.Get();
  if (us == 0) return r;
  const int64_t ns = int64_t{tp->tv_sec} * 1'000'000'000 + tp->tv_nsec + us * 1000;
  tp->tv_sec = static_cast<time_t>(ns / 1'000'000'000);
  tp->tv_nsec = static_cast<long>(ns % 1'000'000'000);
  return r;
}

}  // extern "C"
