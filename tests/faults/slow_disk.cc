// An LD_PRELOAD library for fault_run.py's `slow-disk` fault: pwrite64,
// fdatasync and fsync (the calls SQLite writes and syncs its files with)
// first sleep for the microseconds the file named by HMPMD_SLOW_DISK_FILE
// holds (none, empty or 0: no delay), as a disk whose every write and
// sync is slow. The file is re-read at most every 20 ms, so the harness
// turns the fault on and off by writing it. Other writes (logs, sockets)
// are not touched.
#include <dlfcn.h>
#include <fcntl.h>
#include <sys/types.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstdlib>

namespace {

std::atomic<int64_t> g_delay_us{0};
std::atomic<int64_t> g_read_at_ns{0};

int64_t NowNs() {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return int64_t{ts.tv_sec} * 1'000'000'000 + ts.tv_nsec;
}

// open/read, not stdio: no allocation, and no call this library wraps.
int64_t ReadDelayUs(const char* path) {
  const int fd = ::open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return 0;
  char buf[32] = {};
  const ssize_t n = ::read(fd, buf, sizeof buf - 1);
  ::close(fd);
  return n > 0 ? std::max<int64_t>(0, std::strtoll(buf, nullptr, 10)) : 0;
}

void Delay() {
  static const char* path = std::getenv("HMPMD_SLOW_DISK_FILE");
  if (path == nullptr) return;
  const int64_t now = NowNs();
  if (now - g_read_at_ns.load(std::memory_order_relaxed) > 20'000'000) {
    g_read_at_ns.store(now, std::memory_order_relaxed);
    g_delay_us.store(ReadDelayUs(path), std::memory_order_relaxed);
  }
  const int64_t us = g_delay_us.load(std::memory_order_relaxed);
  if (us <= 0) return;
  timespec d{static_cast<time_t>(us / 1'000'000), static_cast<long>(us % 1'000'000) * 1000};
  while (nanosleep(&d, &d) != 0) {
  }
}

template <typename F>
F Next(const char* name) {
  return reinterpret_cast<F>(dlsym(RTLD_NEXT, name));
}

}  // namespace

extern "C" {

ssize_t pwrite64(int fd, const void* buf, size_t count, off64_t offset) {
  static const auto real = Next<ssize_t (*)(int, const void*, size_t, off64_t)>("pwrite64");
  Delay();
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

}  // extern "C"
