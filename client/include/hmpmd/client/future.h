// Future: the driver's handle on one task of its session.
//
// Thread-safety: a Future is a cheap, copyable handle to shared state;
// every method is safe from any thread, on copies or on one object.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "hmpmd/protocol/buffer.h"
#include "hmpmd/protocol/status.h"
#include "hmpmd/protocol/types.h"

namespace hmpmd::client {

namespace internal {
class FutureState;
class Session;
}  // namespace internal

/// Wait forever (timeouts are in milliseconds; a negative one never ends).
inline constexpr int64_t kForever = -1;

/// The eventual outputs of one submitted task (Client::Submit).
///
/// A Future is ready once its task has ended: done, failed (its kernel
/// threw, or an input failed) or cancelled. Its outputs stay in the object
/// store of the worker that ran it until the last copy of the Future is
/// dropped (the client then sends a release) or the session is closed; so
/// keep a Future as long as a later task or Get() may read its outputs.
/// Passing a Future as an input of a later Call makes that task wait for
/// it; the data then moves worker to worker, never through the driver.
///
/// @code
///   hmpmd::client::Future f = client->Submit({.kernel = "noop"}).value();
///   if (hmpmd::Status st = f.Wait(10000); !st.ok()) std::puts(st.message().c_str());
/// @endcode
class Future {
 public:
  /// An empty handle: valid() is false and every other call fails.
  Future() = default;

  /// True when this handle refers to a task.
  bool valid() const { return state_ != nullptr; }
  /// True once the task has ended (in any way). Never blocks.
  bool ready() const;
  /// Blocks until the task has ended or `timeout_ms` passed. OK when it
  /// succeeded; kAborted "task 't3' failed: <kernel message>" when it or an
  /// input failed; kCancelled "task 't3' cancelled" when cancelled;
  /// kDeadlineExceeded on timeout; kUnavailable when the session is gone.
  Status Wait(int64_t timeout_ms = kForever) const;
  /// Wait()s, then fetches the task's outputs directly from the worker that
  /// holds them (data plane; the controller only says where). Each call
  /// fetches again; the outputs stay on the worker.
  Result<std::vector<Buffer>> Get(int64_t timeout_ms = kForever) const;

  /// The task's id in its session: the Call's label, or "t<N>" if it had
  /// none. Names the task in `hmpmd status`, REST and errors.
  const std::string& label() const;
  /// The session job this task belongs to.
  JobId job() const;
  /// True for the Future of a Client::Put (its Get() returns the data put).
  bool is_put() const;
  /// Total size in bytes of its outputs; 0 until it is done.
  uint64_t output_bytes() const;

  friend bool operator==(const Future& a, const Future& b) { return a.state_ == b.state_; }

 private:
  friend class Client;
  friend class internal::FutureState;
  friend class internal::Session;
  explicit Future(std::shared_ptr<internal::FutureState> state) : state_(std::move(state)) {}
  std::shared_ptr<internal::FutureState> state_;
};

}  // namespace hmpmd::client
