// Lane: the thread of one core of the device (cube lane i or vector lane j).
//
// A lane runs the tasks pushed to it one at a time, in push order, and
// leaves each result in the CompletionQueue. Lanes of different cores run
// at the same time; that is the core-level MPMD of docs/architecture.md.
//
// A task dispatched early (InputRef::kAhead) runs only when each producer
// queued ahead of it on this lane ran here and succeeded; otherwise it
// reports those inputs lost and runs no kernel.
//
// Thread-safety: Push(), CancelJob() and Stop() belong to the I/O thread;
// the lane thread only pops its queue. The queue is guarded by mu_; ran_
// belongs to the lane thread.
#pragma once

#include <spdlog/logger.h>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <memory>
#include <span>
#include <string>
#include <thread>
#include <vector>

#include "completion_queue.h"
#include "data_plane.h"
#include "hmpmd/protocol/messages.h"
#include "hmpmd/worker/kernel_args.h"
#include "mutex.h"

namespace hmpmd::worker {

// A task bound to its kernel. The I/O thread resolves the kernel, so a lane
// never looks anything up.
struct LaneTask {
  TaskAssign assign;
  const Kernel* kernel = nullptr;  // owned by the Worker; outlives the lane
  // Its remote inputs, fetched while it waits in the queue (may be empty).
  // Dropping the task drops them.
  PrefetchedInputs inputs_ahead;
};

class Lane {
 public:
  // Starts the thread. `done`, `data` and `log` must outlive the lane.
  // `exec_log_fd` (-1: none) gets one line per successful run
  // (WorkerOptions::exec_log).
  Lane(CoreKind kind, uint32_t index, CompletionQueue* done, DataPlane* data, spdlog::logger* log,
       int exec_log_fd = -1);
  // Stops the lane (see Stop()).
  ~Lane();
  Lane(const Lane&) = delete;
  Lane& operator=(const Lane&) = delete;

  // Queues a task behind the ones already there.
  void Push(LaneTask task) EXCLUDES(mu_);

  // Drops the queued (not yet started) tasks of `job` and raises the cancel
  // flag of its running one (KernelArgs::cancelled()), whose result is then
  // not reported (CompletionQueue::PushUnwanted); returns how many queued
  // tasks it dropped.
  size_t CancelJob(JobId job) EXCLUDES(mu_);
  // The same for one run of `job`, whatever its attempt: returns 1 when it
  // was queued and is dropped, else 0.
  size_t CancelRun(JobId job, uint32_t run) EXCLUDES(mu_);

  // The run this lane has started (popped from its queue) and not finished
  // (its result not yet in the CompletionQueue): true and `*out` filled,
  // or false when idle. Any thread.
  bool Started(HeldTask* out) const EXCLUDES(mu_);

  // Drops queued tasks, lets a running kernel finish and joins the thread.
  // Returns how many queued tasks it dropped. Idempotent.
  size_t Stop() EXCLUDES(mu_);

 private:
  void Loop() EXCLUDES(mu_);
  TaskResult Execute(const LaneTask& task);
  // Loads the state of `a`'s sub-model from TaskAssign::state_from when
  // this worker lacks it, noting the load in `*r`; false (with `*r`
  // failed) when it cannot.
  bool LoadState(const TaskAssign& a, TaskResult* r) const;
  // Resolves inputs produced ahead on this lane (InputRef::kAhead) to the
  // local store, from ran_; false (and the run in `*lost`) when one did not
  // run here or failed.
  bool ResolveAhead(const TaskAssign& a, std::vector<InputRef>* inputs, uint32_t* lost) const;
  // `log` takes the kernel's KernelArgs::Log lines.
  BufferList RunKernel(const LaneTask& task, std::span<const Buffer> inputs,
                       std::shared_ptr<const void> inputs_keeper, std::shared_ptr<TaskLog> log);

  const CoreKind kind_;
  const uint32_t index_;
  const std::string name_;  // "cube0", "vector1"
  CompletionQueue* const done_;
  DataPlane* const data_;
  spdlog::logger* const log_;
  const int exec_log_fd_;

  mutable Mutex mu_;
  CondVar cv_;
  std::deque<LaneTask> queue_ GUARDED_BY(mu_);
  bool stop_ GUARDED_BY(mu_) = false;
  JobId running_job_ GUARDED_BY(mu_) = 0;  // 0: idle
  uint32_t running_run_ GUARDED_BY(mu_) = 0;
  uint32_t running_attempt_ GUARDED_BY(mu_) = 0;
  std::atomic<bool> cancel_running_{false};  // the running task's cancel flag
  // The running task was cancelled: its result goes nowhere. Dropped here,
  // by this execution, not later by (job, run, attempt): a restarted
  // controller numbers attempts from 0 again and may send this lane's
  // neighbour the same key while a cancelled collective lingers here.
  bool drop_running_ GUARDED_BY(mu_) = false;

  // The last kRanKept tasks this lane ran, oldest first: what a task
  // dispatched behind its producer checks. Lane thread only.
  struct Ran {
    JobId job = 0;
    uint32_t run = 0;
    bool ok = false;
    uint64_t bytes = 0;
    uint32_t buffers = 0;
  };
  static constexpr size_t kRanKept = 4096;  // well above a core's queue
  std::deque<Ran> ran_;

  std::thread thread_;  // last: starts after the fields above exist
};

}  // namespace hmpmd::worker
