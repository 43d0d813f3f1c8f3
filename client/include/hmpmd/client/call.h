// Call and ActorOptions: what a driver asks its session to run.
//
// Thread-safety: plain values.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "hmpmd/client/future.h"
#include "hmpmd/protocol/job_spec.h"
#include "hmpmd/protocol/types.h"

namespace hmpmd::client {

/// One task to append to the session: the same fields as a task of a job
/// spec (docs/job-spec.md), with Futures for inputs.
///
/// @code
///   hmpmd::client::Call c;
///   c.kernel = "scale";
///   c.args = {{"factor", 2.0}};
///   c.inputs = {x};  // a Future of the same session
/// @endcode
struct Call {
  /// Kernel name; a worker of the pool must ship it. Required.
  std::string kernel;
  /// Kernel arguments, in order (KernelArgs on the worker).
  Args args;
  /// Core kind it runs on. Default: cube.
  CoreKind core = CoreKind::kCube;
  /// Hints for the cost model (flops on its core, bytes moved). Default: none.
  CostHint cost;
  /// Tasks whose outputs it reads, in order: Futures of this session. The
  /// task starts when all of them are done and fails when one fails.
  std::vector<Future> inputs;
  /// The actor (sub-model, Client::CreateActor) it runs on. Default: empty,
  /// the session's "default" sub-model (any device).
  std::string actor;
  /// Its id in the session, unique; must not contain '/'. Default: empty,
  /// "t<N>" with N the session's submit count.
  std::string label;
  /// Member of a collective gang; all members of one group must be in one
  /// SubmitGraph() call. Default: none.
  std::optional<CollectiveSpec> collective;
  /// Times it runs again after its kernel fails with an error that
  /// contains one of `retry_on` (any error when `retry_on` is empty); the
  /// kernel sees the run number as KernelArgs::task()->attempt. At most 100.
  /// Default: 0 (a kernel error fails it at once).
  uint32_t max_retries = 0;
  /// Substrings of the one-line error to retry on, e.g. a Python exception
  /// type ("ValueError") or a word of the message ("timeout"). Default:
  /// empty, any kernel error.
  std::vector<std::string> retry_on;
  /// Labels a device must have to run it, e.g. {{"accel", "910c"}}
  /// (docs/scheduling.md, "Labels"); its actor's are added. A task nothing
  /// alive could run is rejected naming the label. Default: none.
  std::map<std::string, std::string> required;
};

/// A named, long-lived sub-model of the session (an actor in Ray's sense).
struct ActorOptions {
  /// Unique in the session; must not be "default". Required.
  std::string name;
  /// What it is (actor, reward, learner, ...); the policy may weigh it.
  /// Default: actor.
  SubmodelKind kind = SubmodelKind::kActor;
  /// Devices it holds; its tasks run only on them and its workers keep its
  /// state between tasks. The scheduler may move devices between actors of
  /// the session as demand shifts. 0: any device. Default: 1.
  uint32_t devices = 1;
  /// Whether the scheduler may move its devices to other actors as demand
  /// shifts (job spec `elastic`); false pins the set it got. Default: true.
  bool elastic = true;
  /// Labels every device running its tasks must have (a job spec
  /// sub-model's "requires"). Default: none.
  std::map<std::string, std::string> required;
};

}  // namespace hmpmd::client
