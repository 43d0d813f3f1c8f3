// DataServer: the worker's data socket (a ROUTER) and the thread that
// serves it. Peers fetch outputs from the ObjectStore and load sub-model
// states (ActorStates) through it, and collective traffic for this
// worker's lanes lands in the CollectiveInbox.
//
// Replies to fetches are zero-copy: each buffer frame points into the
// stored outputs, which a shared_ptr keeps alive until ZeroMQ has sent it.
//
// Peers are authenticated when they connect (data_auth.h): the socket is a
// PLAIN server whose ZAP handler lets in only a peer whose password is a
// token `tokens` accepts at that moment, so a peer without one never sends
// a frame (not even one message of endless frames, which libzmq would
// buffer whole before the server reads its header). The socket and its
// handler live in a context of the server's own (one handler per context).
// As a second line, only frames whose header carries a token `tokens`
// accepts are served (a connection let in with the previous token outlives
// a further change of tokens). A fetch with another token is answered with
// a fetch error that starts with kWrongDataTokenMessage (the fetcher fails
// at once, with PermissionDenied); take-reads and collective frames with
// another token are dropped. Refused and malformed messages are counted and
// logged at the 1st, 2nd, 4th, 8th... of each, never one line per frame.
// ZeroMQ drops a connection that sends a frame over kMaxFrameBytes before
// allocating it.
//
// Thread-safety: Bind() and Stop() belong to the owner's thread; the socket
// belongs to the server thread once Bind() has started it; the ZAP
// handler's thread runs Admit() (it reads `tokens`, which is thread-safe,
// so a rotation is seen by the next connection).
#pragma once

#include <spdlog/logger.h>

#include <atomic>
#include <optional>
#include <string>
#include <thread>
#include <zmq.hpp>

#include "actor_states.h"
#include "collective_inbox.h"
#include "data_tokens.h"
#include "hmpmd/protocol/data_frames.h"
#include "hmpmd/protocol/status.h"
#include "hmpmd/protocol/zap_handler.h"
#include "object_store.h"

namespace hmpmd::worker {

class DataServer {
 public:
  // The largest frame a legitimate peer sends here (ZMQ_MAXMSGSIZE; see
  // data_server.cc for why this value).
  static constexpr int64_t kMaxFrameBytes = int64_t{2} << 20;

  // Every pointer must outlive the server.
  DataServer(ObjectStore* store, const ActorStates* states, CollectiveInbox* inbox,
             const DataTokens* tokens, spdlog::logger* log);
  ~DataServer();
  DataServer(const DataServer&) = delete;
  DataServer& operator=(const DataServer&) = delete;

  // Binds tcp://HOST:* and starts the thread. The endpoint peers should
  // use is endpoint() afterwards.
  Status Bind(const std::string& host);
  const std::string& endpoint() const { return endpoint_; }
  // Joins the thread. Idempotent.
  void Stop();

  // Connections refused for a wrong (or no) token, messages dropped or
  // answered with an error for a wrong token, and those dropped as
  // malformed (for tests and logs; any thread).
  uint64_t refused_connections() const { return zap_.refused(); }
  uint64_t refused() const { return refused_.load(std::memory_order_relaxed); }
  uint64_t malformed() const { return malformed_.load(std::memory_order_relaxed); }

 private:
  void Loop();
  void Serve();
  // Answers a state load (DataOp::kFetchState) from `peer`.
  void ServeState(zmq::socket_t& s, zmq::message_t& peer, const DataHeader& h);
  // Counts (and now and then logs) a message refused for its token, or
  // one dropped as malformed.
  void Refused(const DataHeader& h);
  // Runs on the ZAP handler's thread: true when `r` presents an accepted
  // token; logs refusals as Refused does.
  bool Admit(const ZapRequest& r);
  void Malformed(const std::string& why);

  zmq::context_t ctx_{1};  // the socket's and the ZAP handler's alone
  ObjectStore* const store_;
  const ActorStates* const states_;
  CollectiveInbox* const inbox_;
  const DataTokens* const tokens_;
  spdlog::logger* const log_;
  ZapHandler zap_;
  std::optional<zmq::socket_t> socket_;
  std::string endpoint_;
  std::atomic<bool> stop_{false};
  std::atomic<uint64_t> refused_{0};
  std::atomic<uint64_t> malformed_{0};
  std::thread thread_;
};

}  // namespace hmpmd::worker
