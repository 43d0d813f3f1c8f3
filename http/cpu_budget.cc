#include "hmpmd/http/cpu_budget.h"

#include <time.h>

#include <algorithm>
#include <thread>

namespace hmpmd {

int64_t CpuBudget::ThreadCpuUs() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1'000'000 + ts.tv_nsec / 1000;
}

int64_t CpuBudget::SteadyUs() {
  return std::chrono::duration_cast<std::chrono::microseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

namespace {

CpuBudgetOptions Checked(CpuBudgetOptions o) {
  if (!(o.percent > 0)) o.percent = 1;  // never a zero rate (callers check their input)
  if (o.burst.count() < 0) o.burst = std::chrono::microseconds(0);
  if (o.max_pause.count() < 1) o.max_pause = std::chrono::microseconds(1);
  return o;
}

}  // namespace

CpuBudget::CpuBudget(CpuBudgetOptions options, NowFn now)
    : options_(Checked(options)), now_(now ? std::move(now) : NowFn(&CpuBudget::SteadyUs)) {
  balance_us_ = static_cast<double>(options_.burst.count());
  last_refill_us_ = now_();
}

std::chrono::microseconds CpuBudget::Charge(int64_t cpu_us) {
  const int64_t now = now_();
  std::lock_guard<std::mutex> lock(mu_);
  const double rate = options_.percent / 100.0;  // CPU us per wall us
  if (now > last_refill_us_) {
    balance_us_ = std::min(static_cast<double>(options_.burst.count()),
                           balance_us_ + static_cast<double>(now - last_refill_us_) * rate);
    last_refill_us_ = now;
  }
  cpu_us = std::max<int64_t>(0, cpu_us);
  balance_us_ -= static_cast<double>(cpu_us);
  stats_.charged_us += static_cast<uint64_t>(cpu_us);
  if (balance_us_ >= 0) return std::chrono::microseconds(0);
  // Wall time until the bucket refills to zero.
  const auto pause = std::chrono::microseconds(static_cast<int64_t>(-balance_us_ / rate) + 1);
  ++stats_.pauses;
  stats_.paused_us += static_cast<uint64_t>(pause.count());
  return pause;
}

CpuBudgetStats CpuBudget::stats() const {
  std::lock_guard<std::mutex> lock(mu_);
  return stats_;
}

CpuBudget::Meter::Meter(std::shared_ptr<CpuBudget> budget, std::chrono::microseconds every)
    : budget_(std::move(budget)), every_us_(std::max<int64_t>(0, every.count())) {}

std::chrono::microseconds CpuBudget::Meter::MaybeCharge(bool force,
                                                        const std::function<bool()>& keep_going) {
  if (!budget_) return std::chrono::microseconds(0);
  const int64_t wall = SteadyUs();
  if (last_cpu_us_ >= 0 && !force && wall - last_wall_us_ < every_us_) {
    return std::chrono::microseconds(0);
  }
  const int64_t cpu = ThreadCpuUs();
  const int64_t used = last_cpu_us_ < 0 ? 0 : cpu - last_cpu_us_;
  last_cpu_us_ = cpu;
  last_wall_us_ = wall;
  std::chrono::microseconds slept(0);
  auto pause = budget_->Charge(used);
  while (pause.count() > 0 && (!keep_going || keep_going())) {
    auto step = std::min(pause, budget_->options_.max_pause);
    std::this_thread::sleep_for(step);
    slept += step;
    pause -= step;
  }
  // Sleeping costs (almost) no CPU, but reading the clock again keeps what
  // the next charge measures to work done after the pause.
  if (slept.count() > 0) {
    last_cpu_us_ = ThreadCpuUs();
    last_wall_us_ = SteadyUs();
  }
  return slept;
}

}  // namespace hmpmd
