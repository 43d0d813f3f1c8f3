// PeerFetch: the client side of the data plane's fetch protocol, on a
// caller-supplied ZeroMQ context (the worker's lanes share the worker's).
//
// FetchFromPeer opens a connection for one fetch. PeerConnections keeps
// connections to each producer open after a fetch and hands them to later
// fetches of any thread, so a fetch does not pay for a TCP connection, a
// ZeroMQ handshake and a monitor each time. Only a connection whose
// exchange ended cleanly (the whole reply read, nothing else pending) goes
// back; one that failed, timed out or saw its peer disconnect is closed.
// A peer that dies between fetches is noticed when its connection is taken
// again (its disconnect event is pending): it is closed and a fresh one
// tried, which fails within the connect timeout, as a first fetch would.
//
// Thread-safety: FetchFromPeer is safe from any thread (its own socket).
// PeerConnections is thread-safe: a connection is used by one fetch at a
// time and passes between threads under the mutex (a full fence, as
// ZeroMQ requires for moving a socket between threads).
#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>
#include <memory>
#include <string>
#include <string_view>
#include <zmq.hpp>

#include "data_tokens.h"
#include "hmpmd/protocol/status.h"
#include "mutex.h"
#include "object_store.h"

namespace hmpmd::worker {

// The request carries `token`; a producer that refuses it fails the fetch
// with PermissionDenied.
Result<BufferList> FetchFromPeer(zmq::context_t* ctx, const std::string& endpoint,
                                 const DataToken& token, JobId job, uint32_t run,
                                 int64_t timeout_us);

class PeerConnections {
 public:
  // Idle connections kept, over all producers; the oldest go first.
  static constexpr size_t kDefaultMaxIdle = 32;

  // `ctx` and `tokens` must outlive this object; every request carries
  // tokens->current() at the time it is sent.
  PeerConnections(zmq::context_t* ctx, const DataTokens* tokens, size_t max_idle = kDefaultMaxIdle);
  ~PeerConnections();
  PeerConnections(const PeerConnections&) = delete;
  PeerConnections& operator=(const PeerConnections&) = delete;

  // As FetchFromPeer, over a kept connection to `endpoint` when there is
  // one. `peek`: the producer counts no read (DataOp::kFetchPeek); the
  // caller takes it with TakeRead once it has used the outputs.
  // `job_token`: with the job's own token (JobDataToken), which a driver's
  // put server takes, not the cluster's.
  Result<BufferList> Fetch(const std::string& endpoint, JobId job, uint32_t run, int64_t timeout_us,
                           bool peek = false, bool job_token = false) EXCLUDES(mu_);
  // The state of `submodel` of `job` kept by the worker at `endpoint`
  // (DataOp::kFetchState), as ActorState::Export wrote it. NotFound when
  // that worker keeps none.
  Result<BufferList> FetchState(const std::string& endpoint, JobId job, std::string_view submodel,
                                int64_t timeout_us) EXCLUDES(mu_);
  // Takes one read of (job, run) from the producer at `endpoint`
  // (DataOp::kTakeRead; no reply): after a peek. Never waits: it goes on a
  // socket per producer kept for these requests alone (queued there until
  // the connection is up; the fetch connections stay free for fetches).
  // Unavailable when ZeroMQ refused to queue it (a producer that has been
  // unreachable for a thousand requests).
  Status TakeRead(const std::string& endpoint, JobId job, uint32_t run) EXCLUDES(mu_);

  struct Stats {
    uint64_t opened = 0;  // connections made
    uint64_t reused = 0;  // fetches over a kept connection
    uint64_t closed = 0;  // connections closed after a failure or a disconnect
    size_t idle = 0;      // kept now
  };
  Stats stats() const EXCLUDES(mu_);

  // Closes every kept connection.
  void Clear() EXCLUDES(mu_);

  struct Connection;  // a DEALER and its disconnect monitor (peer_fetch.cc)
  struct Request;     // what one exchange asks for (peer_fetch.cc)

 private:
  // A kept connection to `endpoint` let in with `token`, if any.
  std::unique_ptr<Connection> Take(const std::string& endpoint, const DataToken& token)
      EXCLUDES(mu_);
  void Keep(std::unique_ptr<Connection> c) EXCLUDES(mu_);
  // One exchange over a kept connection to `endpoint`, or a new one.
  Result<BufferList> Send(const std::string& endpoint, const DataToken& token, const Request& req,
                          int64_t timeout_us) EXCLUDES(mu_);

  zmq::context_t* const ctx_;
  const DataTokens* const tokens_;
  const size_t max_idle_;
  mutable Mutex mu_;
  std::deque<std::unique_ptr<Connection>> idle_ GUARDED_BY(mu_);  // oldest first
  // TakeRead's sockets by producer endpoint, the least recently used first
  // (at most max_idle_), each with the token it connects with.
  struct Reader {
    std::string endpoint;
    DataToken token;
    zmq::socket_t socket;
  };
  std::deque<Reader> readers_ GUARDED_BY(mu_);
  Stats stats_ GUARDED_BY(mu_);
};

}  // namespace hmpmd::worker
