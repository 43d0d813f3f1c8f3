#include "hmpmd/api/task_thread.h"

#include <pthread.h>

#include <utility>

#include "hmpmd/http/thread_priority.h"

namespace hmpmd {

TaskThread::TaskThread(TaskThreadOptions options)
    : options_(std::move(options)), thread_([this] {
        pthread_setname_np(pthread_self(), options_.name.substr(0, 15).c_str());
        (void)SetThisThreadPriority(options_.nice, options_.idle);
        Loop();
      }) {}

TaskThread::~TaskThread() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  thread_.join();
}

void TaskThread::Post(std::function<void()> fn) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    queue_.push_back(std::move(fn));
  }
  cv_.notify_one();
}

void TaskThread::Loop() {
  CpuBudget::Meter meter(options_.budget, std::chrono::microseconds(0));
  (void)meter.MaybeCharge(true);  // the first reading: the first item's CPU is charged too
  std::unique_lock<std::mutex> lock(mu_);
  for (;;) {
    cv_.wait(lock, [this] { return stop_ || !queue_.empty(); });
    if (queue_.empty()) return;  // stopping, and nothing left
    auto fn = std::move(queue_.front());
    queue_.pop_front();
    lock.unlock();
    fn();
    // The work is few and large items: charge each (a pause here delays
    // the next item, never the loop or the request threads).
    (void)meter.MaybeCharge(true, [this] { return !stop_.load(); });
    lock.lock();
  }
}

}  // namespace hmpmd
