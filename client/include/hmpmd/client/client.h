// Client: a single-controller driver. One program connects to the
// controller, opens a session and drives every model from there: it submits
// tasks one by one or as sub-graphs, passes Futures as inputs of later
// tasks, waits on one or any of several Futures, cancels, and reads
// results straight from the workers.
//
// A session is an open-ended job of the controller, named after the
// session (listed by `hmpmd status` and REST like any job), to which every
// Submit appends tasks. Close() ends it: the job succeeds when all its
// tasks ended OK and fails otherwise; its outputs are freed on the workers.
//
// Calls are asynchronous: Submit() checks the call, returns a Future and
// queues the task; the client's I/O thread sends everything queued in one
// message, so a driver can keep thousands of tasks in flight.
//
// Thread-safety: every method is safe from any thread. Futures and Actors
// are handles that stay usable (and fail with kUnavailable) after the
// Client is destroyed.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "hmpmd/client/actor.h"
#include "hmpmd/client/call.h"
#include "hmpmd/client/fetch.h"
#include "hmpmd/client/future.h"
#include "hmpmd/protocol/status.h"
#include "hmpmd/protocol/types.h"

namespace hmpmd::client {

struct ClientOptions {
  /// The controller's ZeroMQ endpoint, as given to `hmpmd controller
  /// --listen` (with a host instead of '*'); or a primary's and its
  /// standbys' (`hmpmd controller --standby`) separated by commas: Connect()
  /// opens the session with whichever completes a handshake, giving each
  /// a second in turn, and resumes it there when its controller is lost
  /// (resume_timeout_ms). Default: tcp://127.0.0.1:5555.
  std::string controller = "tcp://127.0.0.1:5555";
  /// The controller's token; empty reads a local controller's token file.
  std::string token;
  /// The session's name: the job name in `hmpmd status` and REST.
  /// Default: "driver".
  std::string session = "driver";
  /// Share of the pool against other jobs (a job spec's `weight`). Default: 1.
  uint32_t weight = 1;
  /// How long Connect() waits for the controller to open the session.
  /// Default: 10000.
  int64_t connect_timeout_ms = 10000;
  /// How long a fetch from a worker may take (Future::Get also stops at its
  /// own timeout). Default: 30000.
  int64_t fetch_timeout_ms = 30000;
  /// How long Close() waits for the controller to confirm. Default: 30000.
  int64_t close_timeout_ms = 30000;
  /// How often the client tells the controller it is alive; a session not
  /// heard from in 10 periods is failed with "driver session lost". The
  /// controller answers each, and a controller silent for 10 periods (killed,
  /// unreachable) fails every future still pending with "driver session
  /// lost: the controller at ... did not answer" instead of leaving Wait()
  /// blocked. At most 60000 (kMaxHeartbeatMs).
  /// Default: 1000.
  uint32_t heartbeat_ms = 1000;
  static constexpr uint32_t kMaxHeartbeatMs = 60'000;
  /// How long the client tries to take its session up again after losing
  /// the controller (10 periods of silence, or the connection broke): a
  /// controller restarted on the same job store, or a standby that took
  /// over (give both in `controller`), resumes it, and pending Futures go
  /// on. Only past this do they fail with "driver session lost". 0: fail at
  /// once, as without a store; -1 (kForever): try without limit.
  /// Default: 30000.
  int64_t resume_timeout_ms = 30000;
  /// Most tasks per submit message. Default: 4096.
  uint32_t max_batch = 4096;
  /// Interface the driver's data socket binds (tcp://HOST:*), from which
  /// workers fetch the data of Put() and where they tell this driver of its
  /// tasks done (direct_done); it must be reachable from them. Made when
  /// the session opens (with direct_done) or at the first Put(). Default:
  /// empty, the address this host uses to reach the controller (127.0.0.1
  /// for a local one).
  std::string data_host;
  /// Whether the worker that ran a task tells this driver it is done, beside
  /// telling the controller, so that Wait() returns a hop sooner (the
  /// controller's word still comes, and where outputs move it wins). Off,
  /// or where the data socket cannot bind, only the controller tells.
  /// Default: true.
  bool direct_done = true;
  /// CurveZMQ keys (Z85; see `hmpmd keygen`), as for workers: all three set
  /// when the controller runs with --curve-keys. Default: empty, plain TCP.
  std::string curve_server_key;
  std::string curve_public_key;
  std::string curve_secret_key;
};

/// A connected driver session.
///
/// @code
///   hmpmd::client::ClientOptions o;
///   o.controller = "tcp://127.0.0.1:5555";
///   o.session = "demo";
///   auto client = hmpmd::client::Client::Connect(o).value();
///   auto x = client->Submit({.kernel = "scale", .args = {{"n", int64_t{4}}, {"factor", 2.0}}});
///   auto y = client->Submit({.kernel = "add", .inputs = {*x, *x}});
///   auto out = y->Get(10000);  // [x*2 + x*2], fetched from y's worker
///   (void)client->Close();
/// @endcode
class Client {
 public:
  /// Connects to the controller and opens a session. kUnavailable when no
  /// controller answers within connect_timeout_ms, or its job store still
  /// cannot be written then (it is asked again meanwhile),
  /// kPermissionDenied for a wrong token, kInvalidArgument for bad options.
  static Result<std::unique_ptr<Client>> Connect(ClientOptions options);
  /// Abort(), if Close() was not called: tasks not yet ended are cancelled
  /// and the job ends "cancelled: the driver closed the session".
  ~Client();
  Client(const Client&) = delete;
  Client& operator=(const Client&) = delete;

  /// Appends one task. Fails at once (kInvalidArgument, one line naming the
  /// task and field) for an empty kernel, a duplicate or malformed label,
  /// an unknown actor, an input Future of another session or an empty one,
  /// a collective member, or a closed session. Errors the controller finds
  /// (e.g. no worker ships the kernel) fail the returned Future.
  Result<Future> Submit(Call call);
  /// Appends several tasks at once; each may take the earlier ones' Futures
  /// as inputs (returned in the same order). All members of a collective
  /// group must be in one call. All or nothing: one bad call fails them all.
  Result<std::vector<Future>> SubmitGraph(std::vector<Call> calls);

  /// Puts the driver's own data into the system: returns a Future of
  /// `data` (one or more buffers, each with its dtype and shape, see
  /// hmpmd/protocol/dtype.h) that later calls take as an input like any
  /// task's, and whose Get() returns the same buffers.
  ///
  /// The data is copied once into the driver's data socket, which serves it
  /// until the put's task has ended and the last copy of the Future is
  /// dropped, or the session ends; a
  /// task of the built-in kernel `hmpmd.put` on a `core` lane of some worker
  /// fetches it from there and keeps it as its output, so consumers read it
  /// worker to worker. If that worker dies, the task runs again elsewhere
  /// and fetches again from the driver. kInvalidArgument for a buffer the
  /// data plane cannot carry (a dtype over 64 bytes, over 32 dimensions),
  /// or when the data socket cannot bind ClientOptions::data_host.
  ///
  /// @code
  ///   hmpmd::Buffer w{bytes, {256, 256}, "f32"};
  ///   hmpmd::client::Future weights = client->Put({w}).value();
  ///   auto y = client->Submit({.kernel = "gemm", .args = {...}, .inputs = {weights, x}});
  /// @endcode
  Result<Future> Put(std::vector<Buffer> data, CoreKind core = CoreKind::kVector);

  /// Adds a named sub-model to the session (see ActorOptions).
  /// kAlreadyExists for a name in use, kInvalidArgument for a bad one.
  Result<Actor> CreateActor(ActorOptions options);

  /// Blocks until one of `futures` is ready; returns the index of the first
  /// ready one (lowest index when several are). kDeadlineExceeded on
  /// timeout, kInvalidArgument for an empty list or an empty Future.
  Result<size_t> WaitAny(std::span<const Future> futures, int64_t timeout_ms = kForever);
  /// Cancels a task not yet ended: a queued one never runs, a running one
  /// is told to stop (its kernel sees KernelArgs::cancelled()); its
  /// dependents fail with "cancelled". OK (a no-op) when it had already
  /// ended; the Future becomes ready once the controller confirms.
  Status Cancel(const Future& future);

  /// Waits for every task to end, then ends the session: OK when the job
  /// succeeded, else kAborted with the job's error. Frees the session's
  /// outputs on the workers; Futures then fail Get(). Idempotent. Past
  /// close_timeout_ms: kDeadlineExceeded, and every Future not ended fails
  /// with kUnavailable "the session was closed".
  Status Close();
  /// Ends the session without waiting for its tasks (the way out on an
  /// error or Ctrl-C): calls not yet sent are dropped, every Future not
  /// ended fails at once with kCancelled "the session was aborted", and the
  /// controller cancels what is queued or running (the job ends
  /// "cancelled"). Waits only for the controller to confirm, at most
  /// close_timeout_ms; returns what Close() would: the session's final
  /// status (kAborted when a task was cancelled), or kDeadlineExceeded.
  /// After Close() it is a no-op returning Close()'s status; during a
  /// Close() it turns that close into an abort.
  Status Abort();

  /// Close() and Abort() in steps, for a caller that must stay responsive
  /// while it waits (the Python module checks for Ctrl-C between steps):
  ///
  /// @code
  ///   client->BeginClose(Client::CloseMode::kFinish, 30000);
  ///   std::optional<hmpmd::Status> done;
  ///   while (!(done = client->PollClose(50))) {
  ///     if (interrupted) client->BeginClose(Client::CloseMode::kAbort, 0);
  ///   }
  /// @endcode
  enum class CloseMode : uint8_t {
    kFinish,  // as Close(): tasks run to their end
    kAbort,   // as Abort(): what is left is cancelled
  };
  /// Starts ending the session and returns at once: Submit fails from now
  /// on. The close gives up `timeout_ms` from now (kForever: never);
  /// called again, it sets that anew and may turn a close into an abort
  /// (not back). 0 with kAbort: the controller is told, and the first
  /// PollClose() stops waiting for its answer (the controller then fails
  /// the silent session after 10 heartbeats if the abort did not reach it).
  void BeginClose(CloseMode mode, int64_t timeout_ms);
  /// Waits at most `wait_ms` for the close begun by BeginClose():
  /// std::nullopt while the controller has not confirmed and the close has
  /// not given up; else what Close() (or Abort()) returns, at once on later
  /// calls. kInvalidArgument before BeginClose().
  std::optional<Status> PollClose(int64_t wait_ms);

  /// The session's job id (REST /api/v1/jobs/{id}, `hmpmd status`).
  JobId job() const;
  /// The controller's data token, for FetchOutputs (Future::Get uses it).
  const DataToken& data_token() const;
  /// The session's name (ClientOptions::session).
  const std::string& session() const;
  /// The options it was connected with.
  const ClientOptions& options() const;
  /// Tasks submitted and not yet ended.
  uint64_t in_flight() const;

 private:
  explicit Client(std::shared_ptr<internal::Session> session);
  std::shared_ptr<internal::Session> session_;
};

}  // namespace hmpmd::client
