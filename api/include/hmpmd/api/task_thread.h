// TaskThread: one named thread that runs posted functions in order, at a
// lower priority, charging each to a CpuBudget (the REST API's formatting
// and spec-parsing threads: heavy work kept off the loop and off the
// threads that answer requests).
// Thread-safety: Post() is thread-safe; the functions run on the thread.
#pragma once

#include <atomic>
#include <condition_variable>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "hmpmd/http/cpu_budget.h"

namespace hmpmd {

struct TaskThreadOptions {
  std::string name;   // thread name (at most 15 characters show)
  int nice = 10;      // Linux nice value of the thread
  bool idle = false;  // SCHED_IDLE instead (see SetThisThreadPriority)
  // Each function's CPU is charged to it; over budget the thread pauses
  // before the next one. Null: no cap.
  std::shared_ptr<CpuBudget> budget;
};

class TaskThread {
 public:
  explicit TaskThread(TaskThreadOptions options);
  // Runs what is queued (without pausing for the budget), then joins.
  ~TaskThread();
  TaskThread(const TaskThread&) = delete;
  TaskThread& operator=(const TaskThread&) = delete;

  void Post(std::function<void()> fn);

 private:
  void Loop();

  const TaskThreadOptions options_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::function<void()>> queue_;  // guarded by mu_
  std::atomic<bool> stop_{false};
  std::thread thread_;  // last: starts after the fields above
};

}  // namespace hmpmd
