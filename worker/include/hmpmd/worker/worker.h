// Worker: serves one controller, running kernels on per-core lanes.
//
// Thread-safety: RegisterKernel() and Run() belong to one thread; Stop() is
// safe from any thread and from a signal handler.
#pragma once

#include <memory>
#include <string>

#include "hmpmd/protocol/status.h"
#include "hmpmd/worker/export.h"
#include "hmpmd/worker/kernel_args.h"
#include "hmpmd/worker/worker_options.h"

namespace hmpmd::worker {

/// A worker process's engine: registers with the controller, takes the
/// tasks it assigns, runs each on the core lane it names and reports the
/// results.
///
/// Every core (cube lanes 0..cube_cores-1, vector lanes
/// 0..vector_cores-1) has its own thread, so tasks on different cores run
/// at the same time. One more thread, the one that calls Run(), owns the
/// connection to the controller, and one serves the data socket: a task's
/// outputs stay in this worker's object store (capped at memory_mb) until
/// their consumers, here or on other workers, have fetched them, and
/// collectives exchange data peer to peer through it. The built-in kernels
/// (see builtin_kernels.h) are registered from the start.
///
/// @code
///   #include "hmpmd/worker/worker.h"
///
///   hmpmd::worker::WorkerOptions options;
///   options.controller_endpoint = "tcp://127.0.0.1:5555";
///   options.vector_cores = 2;
///   hmpmd::worker::Worker worker(options);
///   worker.RegisterKernel("relu", [](const hmpmd::worker::KernelArgs& args,
///                                    std::span<const hmpmd::Buffer> inputs) {
///     if (inputs.empty()) throw std::invalid_argument("relu: needs one input");
///     std::vector<hmpmd::Buffer> out(1, inputs[0]);
///     // ... clamp out[0] at zero ...
///     return out;
///   });
///   hmpmd::Status status = worker.Run();  // until Shutdown or Stop()
///   if (!status.ok()) std::fprintf(stderr, "%s\n", status.ToString().c_str());
/// @endcode
class HMPMD_WORKER_EXPORT Worker {
 public:
  explicit Worker(WorkerOptions options);
  ~Worker();
  Worker(const Worker&) = delete;
  Worker& operator=(const Worker&) = delete;

  /// Adds a kernel, or replaces the one of that name (built-ins included).
  /// REQUIRES: Run() has not started. A call while Run() is active, an
  /// empty name or an empty function is logged and ignored.
  void RegisterKernel(std::string name, Kernel kernel);

  /// Connects, registers and serves until the controller sends Shutdown or
  /// Stop() is called; then stops the lanes (queued tasks are dropped,
  /// running kernels finish) and returns OK. Returns InvalidArgument for
  /// bad options, PermissionDenied when the controller refuses the
  /// registration for good, and Internal for a transport failure.
  /// Call it once.
  Status Run();

  /// Makes Run() return soon. Safe from any thread and from a signal
  /// handler (it only stores a flag and writes an eventfd). Before Run() it
  /// makes Run() return at once.
  void Stop();

 private:
  class Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace hmpmd::worker
