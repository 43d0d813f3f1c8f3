// Actor: the driver's handle on a named sub-model of its session.
//
// Thread-safety: a cheap, copyable handle; safe from any thread.
#pragma once

#include <memory>
#include <string>

#include "hmpmd/client/call.h"
#include "hmpmd/client/future.h"
#include "hmpmd/protocol/job_spec.h"
#include "hmpmd/protocol/status.h"

namespace hmpmd::client {

namespace internal {
class Session;
}  // namespace internal

/// A sub-model created by Client::CreateActor. Its tasks run on its device
/// set, whose workers keep the actor's state (e.g. weights) between tasks.
///
/// @code
///   auto learner = client->CreateActor({.name = "learner", .kind = hmpmd::SubmodelKind::kLearner,
///                                       .devices = 2}).value();
///   hmpmd::client::Future step = learner.Call("gemm", {.args = {{"n", int64_t{256}}}}).value();
/// @endcode
class Actor {
 public:
  Actor() = default;

  /// Submits `call` with kernel `method_kernel` on this actor (call.kernel
  /// and call.actor are overwritten). Same errors as Client::Submit.
  Result<Future> Call(std::string method_kernel, client::Call call) const;

  const std::string& name() const { return options_.name; }
  SubmodelKind kind() const { return options_.kind; }
  uint32_t devices() const { return options_.devices; }
  bool valid() const { return session_ != nullptr; }

 private:
  friend class Client;
  Actor(std::shared_ptr<internal::Session> session, ActorOptions options)
      : session_(std::move(session)), options_(std::move(options)) {}
  std::shared_ptr<internal::Session> session_;
  ActorOptions options_;
};

}  // namespace hmpmd::client
