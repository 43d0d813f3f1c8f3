// Session: the state behind a Client, its Futures and Actors: the DEALER to
// the controller, the I/O thread that owns it, and every task's state.
//
// Thread-safety: public methods are safe from any thread; `mu_` guards the
// task state, the socket belongs to the I/O thread after Start().
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <thread>
#include <unordered_map>
#include <vector>
#include <zmq.hpp>

#include "hmpmd/client/client.h"
#include "hmpmd/protocol/codec.h"
#include "hmpmd/protocol/messages.h"
#include "put_server.h"

namespace hmpmd::client::internal {

inline int64_t NowUs() {
  return std::chrono::duration_cast<std::chrono::microseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

// A deadline `timeout_ms` from now; a negative timeout: none. Saturated: a
// timeout past the clock's range (about 9.2e12 ms) wrapped it and expired
// at once.
inline std::chrono::steady_clock::time_point Deadline(int64_t timeout_ms) {
  using Clock = std::chrono::steady_clock;
  const Clock::time_point now = Clock::now();
  if (timeout_ms < 0 ||
      std::chrono::milliseconds(timeout_ms) >=
          std::chrono::duration_cast<std::chrono::milliseconds>(Clock::time_point::max() - now)) {
    return Clock::time_point::max();
  }
  return now + std::chrono::milliseconds(timeout_ms);
}

// What the controller's decoder takes (it drops a whole message over one of
// these, without a reply): Submit refuses a call over a per-task limit and
// Flush keeps every message under them.
inline constexpr DecodeLimits kWireLimits{};

// InvalidArgument "FIELD: N bytes, over the 1 MiB a string may hold" for a
// string longer than the decoder takes.
Status CheckWireString(const std::string& field, std::string_view text);
// Bytes a SessionSubmit takes around its groups (each EncodedSize()), at
// most: its array's head, the job id, the groups' array head and `notify`.
inline constexpr size_t kSubmitHeadBytes = 1 + 9 + 5 + 3 + kMaxNoticeEndpoint;
// How long opening or resuming a session gives each of several endpoints
// to complete a handshake.
inline constexpr int64_t kTryEachMs = 1000;

class Session;

// One task's state; Futures share it. Its destructor (the last Future
// dropped) releases the task's outputs.
class FutureState {
 public:
  enum class Phase : uint8_t { kPending, kDone, kFailed, kCancelled, kRejected, kLost };
  FutureState(std::shared_ptr<Session> owner, std::string id)
      : session(std::move(owner)), label(std::move(id)) {}
  ~FutureState();
  FutureState(const FutureState&) = delete;
  FutureState& operator=(const FutureState&) = delete;

  const std::shared_ptr<Session> session;
  const std::string label;
  // Guarded by the session's mutex.
  int64_t index = -1;  // the task's index in the session job, once acked
  Phase phase = Phase::kPending;
  std::string error;     // why, unless done
  std::string endpoint;  // done: the worker holding its outputs
  uint64_t bytes = 0;
  uint32_t buffers = 0;  // how many it kept (empty ones count)
  // Cancel() asked the controller to cancel it: a worker's word that it is
  // done is ignored, and the controller's (done, or cancelled) ends it.
  // Mutable: Cancel() takes the state as the Future gives it, const.
  mutable bool cancelling = false;
  // A put's id on the session's PutServer; -1 for a task. Set by Put()
  // before the Future is handed out, never changed after.
  int64_t put = -1;
};

class Session : public std::enable_shared_from_this<Session> {
 public:
  explicit Session(ClientOptions options);
  ~Session();

  // Connects, opens the session and starts the I/O thread.
  Status Start();
  // Client::BeginClose and Client::PollClose; Close() and Abort() are the
  // two in a row.
  void BeginClose(bool abort, int64_t timeout_ms);
  std::optional<Status> PollClose(int64_t wait_ms);

  Result<std::vector<Future>> Submit(std::vector<Call> calls);
  // Client::Put: keeps `data` on the PutServer (started at the first put)
  // and submits the task that copies it to a worker.
  Result<Future> Put(std::vector<Buffer> data, CoreKind core);
  Status AddActor(const ActorOptions& options);
  Status Cancel(const FutureState& f);
  Result<size_t> WaitAny(std::span<const Future> futures, int64_t timeout_ms);
  Status Wait(const FutureState& f, int64_t timeout_ms);
  bool Ready(const FutureState& f);
  // Status of `f` and, when done, where its outputs are.
  Status Outcome(const FutureState& f, std::string* endpoint, uint64_t* bytes,
                 uint32_t* buffers = nullptr);
  void Dropped(FutureState& f);

  JobId job() const { return job_; }
  // The controller's data token (SessionAck): what output fetches carry.
  const DataToken& data_token() const { return data_token_; }
  const ClientOptions& options() const { return options_; }
  uint64_t in_flight();

  // For Future::Get: the state of one Future (a friend's accessor).
  static FutureState* StateOf(const Future& f);

 private:
  void Loop();
  // Sets `s`'s options and credentials before it connects.
  void Configure(zmq::socket_t& s);
  // After the controller was lost (`lost`: how): opens a new connection,
  // to the same controller or another of options_.controller, that takes
  // the session up again (SessionOpen.resume) within resume_timeout_ms.
  // True once it did; socket_ is then the new one. Else `why` says why not.
  bool Resume(const std::string& lost, std::string* why);
  // After Resume: what the controller may have lost goes again (groups it
  // did not store, releases, the close), before what is queued.
  void Replay(uint64_t resumed_seq);
  void Wake();
  void HandleUpdate(SessionUpdate& u);
  // The data socket (puts, run-done notices), started once; null when it
  // cannot bind. Locks puts_mu_.
  Result<PutServer*> DataServer();
  // A worker says these runs are done (the PutServer's thread): their
  // Futures resolve now; the controller's update confirms them later. A
  // run ahead of its group's ack waits for it (early_done_).
  void OnRunDone(RunDoneNotice notice);
  // Ends the Future of `done.run` done, its outputs at `endpoint`, counted
  // ended. Needs mu_.
  void ApplyRunDone(const RunDone& done, const std::string& endpoint,
                    std::vector<std::shared_ptr<FutureState>>* keep);
  // Moves the pinned puts whose task has ended into `keep` (destroyed by
  // the caller once mu_ is let go). Needs mu_.
  void UnpinEndedPuts(std::vector<std::shared_ptr<FutureState>>* keep);
  // Sends what is queued; true when something was sent.
  bool Flush(int64_t now_us);
  bool SendMessage(const Message& m);
  // Sends `submit` and keeps its groups (unstored_) until the controller
  // has stored them, when sessions resume; clears it.
  void SendSubmit(SessionSubmit& submit);
  static Status StatusOf(const FutureState& f);
  // Ends every Future not ended with `phase` and `why`, those not sent or
  // not yet acknowledged too (nothing else would end them), and forgets
  // what is not sent. Their states go to `keep`, to be destroyed unlocked.
  // REQUIRES: mu_ held.
  void EndPending(FutureState::Phase phase, const std::string& why,
                  std::vector<std::shared_ptr<FutureState>>* keep);
  bool Ended(const FutureState& f) const { return f.phase != FutureState::Phase::kPending; }

  const ClientOptions options_;
  std::string token_;  // the token the session was opened with (Start)
  zmq::context_t ctx_{1};
  zmq::socket_t socket_;
  int wake_fd_ = -1;
  std::thread io_;
  std::atomic<bool> stop_{false};
  JobId job_ = 0;
  DataToken data_token_;  // set with job_, before the I/O thread starts
  // The endpoint of the controller that opened the session (one of
  // options_.controller's); set with job_.
  std::string controller_;

  std::mutex mu_;
  std::condition_variable cv_;
  // Queued for the I/O thread.
  std::vector<SubmitGroup> outbox_;
  std::vector<uint32_t> release_, cancel_;
  // Puts whose task has not ended: held here so that dropping the Future
  // does not free the data before a worker fetched it (a cycle through
  // FutureState::session, broken when the task ends or the session does).
  std::vector<std::shared_ptr<FutureState>> pinned_puts_;
  uint8_t close_ = SessionControl::kKeepOpen;
  // Groups sent and not yet acknowledged: seq -> its tasks' states.
  std::map<uint64_t, std::vector<std::weak_ptr<FutureState>>> unacked_;
  uint64_t next_seq_ = 1;
  std::vector<std::weak_ptr<FutureState>> tasks_;  // by task index
  // By task index: whether it ended (counted in ended_), so that a resume,
  // which tells every end again, does not count one twice.
  std::vector<bool> ended_at_;
  // Groups sent that the controller has not stored yet (I/O thread only):
  // a resume sends those it lost again. `first`: their first task once
  // acknowledged, -1 before, kRefused for a group the controller refused
  // (its Futures ended so, and it is not sent again).
  struct Unstored {
    static constexpr int64_t kRefused = -2;
    SubmitGroup group;
    int64_t first = -1;
  };
  std::map<uint64_t, Unstored> unstored_;
  std::set<std::string> labels_;
  std::set<std::string> actors_;
  std::map<uint64_t, std::string> actor_seq_;             // unacked CreateActor by seq
  std::unordered_map<std::string, std::string> refused_;  // actor -> why the controller refused it
  uint64_t submitted_ = 0, ended_ = 0;
  bool closed_ = false;    // the controller ended the session
  bool closing_ = false;   // BeginClose() was called
  bool aborted_ = false;   // with abort
  bool stopping_ = false;  // a PollClose() is stopping the I/O thread
  bool stopped_ = false;   // and has joined it
  Status final_;           // once closed
  std::string lost_;       // the link failed: why
  std::string end_why_;    // closed_ without Close(): why (lost, cancelled...)
  // Set by BeginClose(): when the close gives up, and how far that was.
  std::chrono::steady_clock::time_point close_deadline_;
  int64_t close_timeout_ms_ = 0;

  // Run-done notices of runs not yet acknowledged, by index (guarded by
  // mu_; at most kMaxEarlyDone).
  std::map<uint32_t, std::pair<RunDone, std::string>> early_done_;
  static constexpr size_t kMaxEarlyDone = 4096;
  // The data socket, made when the session opens (DataServer); guarded by
  // puts_mu_ until made, then read-only. `notify_`: its endpoint, which
  // each SessionSubmit gives the controller (empty: none); set before the
  // I/O thread starts.
  std::mutex puts_mu_;
  std::unique_ptr<PutServer> puts_;
  std::string notify_;
};

// Submit() and Actor::Call() send one call: a collective member there
// would run as a gang of one (an allreduce of its own data). Its group
// goes whole in one SubmitGraph().
Status RefuseLoneMember(const Call& call);

}  // namespace hmpmd::client::internal
