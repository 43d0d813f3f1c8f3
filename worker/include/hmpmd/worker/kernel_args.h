// KernelArgs and Kernel: what a kernel receives and what it is.
//
// Thread-safety: KernelArgs is a read-only view; it may be read from any
// thread while the Args it views stays alive and unchanged.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "hmpmd/protocol/buffer.h"
#include "hmpmd/protocol/types.h"
#include "hmpmd/worker/export.h"
#include "hmpmd/worker/task_log.h"

namespace hmpmd::worker {

class ActorState;

/// Where KernelArgs::state() finds its task's ActorState. A Worker
/// provides one per task run and looks the state up only when a kernel
/// asks; a test may provide its own.
class HMPMD_WORKER_EXPORT ActorStateProvider {
 public:
  /// The state of the task's (job, sub-model); it must stay valid while
  /// the kernel runs. May throw (the task then fails).
  virtual ActorState& Get() const = 0;

 protected:
  ~ActorStateProvider() = default;
};

/// Which task run a kernel serves: what a Worker knows of it. The views
/// stay valid while the kernel runs.
struct TaskInfo {
  JobId job = 0;
  uint32_t run = 0;          // the run's index in its job (TaskAssign::task)
  uint32_t attempt = 0;      // TaskAssign::attempt: a rerun counts up
  std::string_view task_id;  // its id in the job spec (a driver's label)
  std::string_view kernel;
  std::string_view submodel;  // the key of its actor state, with `job`
  CoreKind core = CoreKind::kCube;
  uint32_t lane = 0;
};

/// Read-only, typed access to a task's arguments (the `args` object of the
/// job spec).
///
/// Each accessor returns `fallback` when the argument is absent or has a
/// type that does not convert; so a kernel that needs a value must check
/// Has() or validate what it got.
///
/// @code
///   hmpmd::Args raw = {{"us", int64_t{250}}, {"mode", std::string("fast")}};
///   hmpmd::worker::KernelArgs args(raw);
///   int64_t us = args.Int("us", 0);              // 250
///   std::string mode = args.String("mode", "");  // "fast"
///   bool warm = args.Bool("warm", false);        // false: absent
/// @endcode
class HMPMD_WORKER_EXPORT KernelArgs {
 public:
  /// Views `args`, which must outlive this object.
  explicit KernelArgs(const Args& args) : args_(&args) {}
  /// Also sees the task's cancel flag (set by another thread when its job
  /// is cancelled), which must outlive this object.
  KernelArgs(const Args& args, const std::atomic<bool>* cancel) : args_(&args), cancel_(cancel) {}
  /// Also reaches the task's actor state through `state`, which must
  /// outlive this object.
  KernelArgs(const Args& args, const std::atomic<bool>* cancel, const ActorStateProvider* state)
      : args_(&args), cancel_(cancel), state_(state) {}

  /// As above, run by a Worker: also knows its task run, and `inputs_keeper`
  /// owns the input buffers the kernel gets (see inputs_keeper()).
  /// `log` (may be null) takes the lines of Log().
  KernelArgs(const Args& args, const std::atomic<bool>* cancel, const ActorStateProvider* state,
             const TaskInfo* task, std::shared_ptr<const void> inputs_keeper,
             std::shared_ptr<TaskLog> log = nullptr)
      : args_(&args),
        cancel_(cancel),
        state_(state),
        task_(task),
        inputs_keeper_(std::move(inputs_keeper)),
        log_(std::move(log)) {}

  /// The task run this kernel serves, or nullptr when the KernelArgs was made
  /// without one (a kernel called directly, not by a Worker).
  const TaskInfo* task() const { return task_; }

  /// Owns the buffers of the kernel's `inputs`: a kernel that hands views of
  /// them to something that outlives the call (the Python worker's NumPy
  /// arrays) keeps a copy of this pointer with each view, and the buffers
  /// stay valid, unchanged, until the last copy is dropped. nullptr when the
  /// KernelArgs was made without one; the inputs then live only during the
  /// call.
  const std::shared_ptr<const void>& inputs_keeper() const { return inputs_keeper_; }

  /// True once the task's job has been cancelled. A long kernel should poll
  /// it and return or throw soon after; its result is ignored anyway.
  /// Thread-safe.
  /// @code
  ///   while (work_left()) { if (args.cancelled()) throw std::runtime_error("cancelled"); step(); }
  /// @endcode
  bool cancelled() const { return cancel_ != nullptr && cancel_->load(std::memory_order_relaxed); }

  /// The state this task's sub-model keeps on this worker between tasks
  /// (see actor_state.h): what earlier tasks of the same job and sub-model
  /// stored here, and what later ones will find. Thread-safe. Throws
  /// std::logic_error when the KernelArgs was made without a provider
  /// (a kernel called directly, not by a Worker).
  /// @code
  ///   std::shared_ptr<const hmpmd::Buffer> w = args.state().Get("weights");
  /// @endcode
  ActorState& state() const;

  /// Adds a line to the task's log: the controller keeps it with the task
  /// (REST `GET /api/v1/jobs/{id}/tasks/{task}/logs`, the dashboard), up
  /// to TaskLog's bounds per run. Thread-safe; a no-op when the KernelArgs
  /// was made without a log (a kernel called directly, not by a Worker).
  /// @code
  ///   args.Log("loaded " + std::to_string(n) + " rows");
  /// @endcode
  void Log(std::string_view line) const {
    if (log_) log_->Add(line);
  }
  /// The task's log, shared (a Python kernel's ctx.log writes to it);
  /// nullptr when made without one.
  const std::shared_ptr<TaskLog>& log() const { return log_; }

  /// True when an argument called `name` is present, whatever its type.
  bool Has(std::string_view name) const;
  /// An integer argument. A float argument converts only when it holds an
  /// integral value in range (2000.0 gives 2000; 1.5 gives `fallback`).
  int64_t Int(std::string_view name, int64_t fallback) const;
  /// An integer or float argument as a double.
  double Number(std::string_view name, double fallback) const;
  /// A string argument.
  std::string String(std::string_view name, std::string_view fallback) const;
  /// A bool argument.
  bool Bool(std::string_view name, bool fallback) const;

  /// The arguments as they came off the wire, in the order the spec gave.
  const Args& args() const { return *args_; }

 private:
  const ArgValue* Find(std::string_view name) const;

  const Args* args_;
  const std::atomic<bool>* cancel_ = nullptr;
  const ActorStateProvider* state_ = nullptr;
  const TaskInfo* task_ = nullptr;
  std::shared_ptr<const void> inputs_keeper_;
  std::shared_ptr<TaskLog> log_;
};

/// A kernel: runs one task on one core lane and returns its outputs.
///
/// `inputs` are the outputs of the task's producers, in the order of the
/// task's `inputs` (each producer's outputs in its order). A kernel reports failure by throwing;
/// the worker catches the exception, reports the task failed with `e.what()` and keeps serving. A
/// kernel may run on several lanes at once, so it must be safe to call concurrently with itself.
using Kernel =
    std::function<std::vector<Buffer>(const KernelArgs& args, std::span<const Buffer> inputs)>;

}  // namespace hmpmd::worker
