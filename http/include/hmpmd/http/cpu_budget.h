// CpuBudget: caps the CPU that a group of threads takes together at a share
// of one core. The controller puts its HTTP side under one (the server
// threads and the formatting thread: `hmpmd controller --http-cpu-percent`),
// so that however fast clients send, the scheduler loop and local workers
// keep the rest of the machine.
//
// A token bucket of CPU time: it fills at `percent`% of wall time, up to
// `burst`; the threads charge the CPU they used (each from its own CPU
// clock, through a Meter) between units of work. A charge that leaves the
// bucket in debt pauses the charging thread until the bucket is back at
// zero. While it pauses, its work waits (requests stay queued in the
// sockets); nothing is refused or dropped.
//
// Thread-safety: Charge(), stats() and percent() are thread-safe. A Meter
// belongs to one thread.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>

namespace hmpmd {

struct CpuBudgetOptions {
  // Share of one core the group may use over time, in percent (> 0; above
  // 100 lets several threads use more than one core). The controller's
  // default is kDefaultHttpCpuPercent.
  double percent = 25;
  // CPU time the group may spend at once after an idle spell, before the
  // share applies. Larger: occasional heavy answers (a big trace) go at full
  // speed; smaller: a tighter cap over short windows. Default: 20 ms.
  std::chrono::microseconds burst{20'000};
  // The most a thread pauses at once before it charges again (so Stop()
  // and new work are noticed). Default: 50 ms.
  std::chrono::microseconds max_pause{50'000};
};

// The HTTP side's default share: a tenth of one core serves a few thousand
// dashboard and scraper requests per second (about 25 us of CPU each); on
// the 2-core VM 25% still cost dispatch ~15% under 200 clients (README).
inline constexpr double kDefaultHttpCpuPercent = 10;

struct CpuBudgetStats {
  uint64_t charged_us = 0;  // CPU time charged so far
  uint64_t pauses = 0;      // charges that made a thread pause
  uint64_t paused_us = 0;   // wall time those pauses asked for
};

class CpuBudget {
 public:
  // Monotonic wall time in microseconds; injectable for tests.
  using NowFn = std::function<int64_t()>;

  explicit CpuBudget(CpuBudgetOptions options, NowFn now = nullptr);

  // Charges `cpu_us` of CPU time used by one of the group's threads and
  // returns how long that thread must pause now (zero: none). It does not
  // sleep itself.
  std::chrono::microseconds Charge(int64_t cpu_us);

  double percent() const { return options_.percent; }
  CpuBudgetStats stats() const;

  // One thread's view of its CPU clock: what it used since its last charge.
  // Reading the thread CPU clock is a system call (about 1 us), so
  // MaybeCharge() reads it only once `every` of wall time has passed since
  // the last reading (the thread can have used no more CPU than that), which
  // keeps the cost per request far below the work measured.
  class Meter {
   public:
    explicit Meter(std::shared_ptr<CpuBudget> budget,
                   std::chrono::microseconds every = std::chrono::microseconds(1000));
    // Charges the calling thread's CPU since the last charge (if `every` has
    // passed, or always with `force`) and sleeps for the pause it asks,
    // in steps of at most max_pause, while `keep_going()` holds. Returns the
    // time slept. Call it from the thread that owns the Meter.
    std::chrono::microseconds MaybeCharge(bool force = false,
                                          const std::function<bool()>& keep_going = nullptr);

   private:
    std::shared_ptr<CpuBudget> budget_;
    const int64_t every_us_;
    int64_t last_wall_us_ = 0;
    int64_t last_cpu_us_ = -1;  // -1: not read yet
  };

  // The calling thread's CPU time in microseconds (CLOCK_THREAD_CPUTIME_ID).
  static int64_t ThreadCpuUs();
  // Monotonic microseconds.
  static int64_t SteadyUs();

 private:
  const CpuBudgetOptions options_;
  NowFn now_;
  mutable std::mutex mu_;
  double balance_us_;       // guarded by mu_; negative: in debt
  int64_t last_refill_us_;  // guarded by mu_
  CpuBudgetStats stats_;    // guarded by mu_
};

}  // namespace hmpmd
