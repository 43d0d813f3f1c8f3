#include "peer_fetch.h"

#include <algorithm>
#include <atomic>
#include <cstring>
#include <iterator>
#include <optional>
#include <utility>
#include <vector>
#include <zmq_addon.hpp>

#include "hmpmd/protocol/data_auth.h"
#include "hmpmd/protocol/data_frames.h"
#include "hmpmd/worker/fetch.h"

namespace hmpmd::worker {

// One request of the fetch protocol: an output's fetch (key `run`), or a
// sub-model state's (key StateKey); `what` begins its errors.
struct PeerConnections::Request {
  DataOp op = DataOp::kFetch;
  JobId job = 0;
  uint64_t run = 0;
  std::string what;
};

struct PeerConnections::Connection {
  ~Connection() { StopMonitor(socket, events); }
  std::string endpoint;
  DataToken token;       // the one it was let in with
  zmq::socket_t socket;  // DEALER to the producer's data socket
  zmq::socket_t events;  // its monitor: disconnects
};

namespace {

using Connection = PeerConnections::Connection;
using Request = PeerConnections::Request;

// How long a fetch waits to connect to the peer (loopback or LAN: far less).
constexpr int64_t kConnectTimeoutMs = 3000;

std::string What(const std::string& endpoint, JobId job, uint32_t run) {
  return "fetch of job " + std::to_string(job) + " run " + std::to_string(run) + " from " +
         endpoint;
}

// A DEALER connected to `endpoint` with `token`, its handshake done, with a
// monitor of its disconnects. PermissionDenied when the peer refuses the
// token, Unavailable when no handshake is done within the connect timeout
// (or `timeout_us`, the sooner). Throws zmq::error_t.
Result<std::unique_ptr<Connection>> Open(zmq::context_t* ctx, const std::string& endpoint,
                                         const DataToken& token, int64_t timeout_us, JobId job,
                                         const std::string& what) {
  auto c = std::make_unique<Connection>();
  c->endpoint = endpoint;
  c->token = token;
  c->socket = zmq::socket_t(*ctx, zmq::socket_type::dealer);
  c->socket.set(zmq::sockopt::linger, 0);
  c->socket.set(zmq::sockopt::rcvhwm, 0);
  // For the job: `token` may be the job's own (a driver's put server
  // knows no other), and a worker's data server checks it knowing the job.
  SetDataCredentials(c->socket, token, job);
  // A request waits for the handshake, not for the whole timeout: a dead
  // peer (connection refused, retried forever by ZeroMQ) fails the fetch
  // within kConnectTimeoutMs, and the controller rebuilds the input; one
  // that refuses the token fails it at once (ZeroMQ alone would retry
  // silently).
  c->socket.set(zmq::sockopt::immediate, 1);
  // A peer that dies after taking the request closes the connection: the
  // monitor reports it, and the fetch fails then instead of at the timeout.
  c->events = MonitorHandshakes(*ctx, c->socket, ZMQ_EVENT_DISCONNECTED);
  c->socket.connect(endpoint);
  RETURN_IF_ERROR(AwaitDataHandshake(
      c->events, std::min<int64_t>(kConnectTimeoutMs, (timeout_us + 999) / 1000), what));
  return c;
}

// False when the monitor has reported a disconnect since the last look.
bool StillConnected(Connection& c) {
  zmq::message_t event;
  return !c.events.recv(event, zmq::recv_flags::dontwait);
}

// One request and its whole reply over `c`. `*clean` becomes true when the
// exchange ended as the protocol says (the reply to this request read in
// full, the peer still connected): only then may `c` carry another.
// Throws zmq::error_t.
Result<BufferList> Exchange(Connection& c, const DataToken& token, const Request& req,
                            int64_t timeout_us, bool* clean) {
  *clean = false;
  const std::string& what = req.what;
  zmq::socket_t& s = c.socket;
  s.set(zmq::sockopt::sndtimeo,
        static_cast<int>(std::min<int64_t>(kConnectTimeoutMs, (timeout_us + 999) / 1000)));
  DataHeader h;
  h.op = static_cast<uint8_t>(req.op);
  h.key = req.job;
  h.run = req.run;
  h.token = token;
  if (!s.send(zmq::buffer(&h, sizeof(h)), zmq::send_flags::none)) {
    return Status::Unavailable(what + ": cannot connect within " +
                               std::to_string(kConnectTimeoutMs) + " ms");
  }
  zmq::pollitem_t items[] = {{s.handle(), 0, ZMQ_POLLIN, 0}, {c.events.handle(), 0, ZMQ_POLLIN, 0}};
  if (zmq::poll(items, 2, std::chrono::milliseconds((timeout_us + 999) / 1000)) == 0) {
    return Status::Unavailable(what + ": no answer within " + std::to_string(timeout_us / 1000) +
                               " ms");
  }
  if (!(items[0].revents & ZMQ_POLLIN)) {
    return Status::Unavailable(what + ": the peer closed the connection");
  }
  std::vector<zmq::message_t> parts;
  (void)zmq::recv_multipart(s, std::back_inserter(parts));
  std::vector<FrameView> frames;
  frames.reserve(parts.size());
  for (const zmq::message_t& m : parts) frames.push_back({m.data(), m.size()});
  Result<BufferList> out = DecodeFetchReply(frames, what);
  if (!out.ok() && out.status().code() != StatusCode::kNotFound) return out;
  // One exchange at a time per connection: the reply names this request.
  Result<DataHeader> reply = ParseDataHeader(frames[0].data, frames[0].size);
  if (!reply.ok() || reply->key != req.job || reply->run != req.run) {
    return Status::Corruption(what + ": the reply names another output");
  }
  *clean = !(items[1].revents & ZMQ_POLLIN);
  return out;
}

}  // namespace

Result<BufferList> FetchFromPeer(zmq::context_t* ctx, const std::string& endpoint,
                                 const DataToken& token, JobId job, uint32_t run,
                                 int64_t timeout_us) {
  try {
    const Request req{DataOp::kFetch, job, run, What(endpoint, job, run)};
    ASSIGN_OR_RETURN(std::unique_ptr<Connection> c,
                     Open(ctx, endpoint, token, timeout_us, job, req.what));
    bool clean = false;
    return Exchange(*c, token, req, timeout_us, &clean);
  } catch (const zmq::error_t& e) {
    return Status::Unavailable(What(endpoint, job, run) + ": " + e.what());
  }
}

PeerConnections::PeerConnections(zmq::context_t* ctx, const DataTokens* tokens, size_t max_idle)
    : ctx_(ctx), tokens_(tokens), max_idle_(max_idle) {}

PeerConnections::~PeerConnections() { Clear(); }

std::unique_ptr<Connection> PeerConnections::Take(const std::string& endpoint,
                                                  const DataToken& token) {
  for (;;) {
    std::unique_ptr<Connection> c;
    {
      MutexLock lock(&mu_);
      // The most recently kept first: the likeliest to be warm.
      for (auto it = idle_.rbegin(); it != idle_.rend(); ++it) {
        if ((*it)->endpoint != endpoint) continue;
        c = std::move(*it);
        idle_.erase(std::next(it).base());
        break;
      }
      if (c == nullptr) return nullptr;
    }
    // One let in with an older token would be refused if ZeroMQ ever
    // reconnected it, and its requests carry the current one: closed.
    if (c->token == token && StillConnected(*c)) {
      MutexLock lock(&mu_);
      ++stats_.reused;
      return c;
    }
    c.reset();  // the peer went away since: closed, and the next one looked at
    MutexLock lock(&mu_);
    ++stats_.closed;
  }
}

void PeerConnections::Keep(std::unique_ptr<Connection> c) {
  std::unique_ptr<Connection> evicted;  // closed outside the lock
  MutexLock lock(&mu_);
  idle_.push_back(std::move(c));
  if (idle_.size() > max_idle_) {
    evicted = std::move(idle_.front());
    idle_.pop_front();
  }
}

Result<BufferList> PeerConnections::Fetch(const std::string& endpoint, JobId job, uint32_t run,
                                          int64_t timeout_us, bool peek, bool job_token) {
  const DataToken token = job_token ? JobDataToken(tokens_->current(), job) : tokens_->current();
  return Send(endpoint, token,
              {peek ? DataOp::kFetchPeek : DataOp::kFetch, job, run, What(endpoint, job, run)},
              timeout_us);
}

Result<BufferList> PeerConnections::FetchState(const std::string& endpoint, JobId job,
                                               std::string_view submodel, int64_t timeout_us) {
  return Send(endpoint, tokens_->current(),
              {DataOp::kFetchState, job, StateKey(submodel),
               "load of the state of sub-model '" + std::string(submodel) + "' from " + endpoint},
              timeout_us);
}

Result<BufferList> PeerConnections::Send(const std::string& endpoint, const DataToken& token,
                                         const Request& req, int64_t timeout_us) {
  try {
    std::unique_ptr<Connection> c = Take(endpoint, token);
    if (c == nullptr) {
      Result<std::unique_ptr<Connection>> opened =
          Open(ctx_, endpoint, token, timeout_us, req.job, req.what);
      MutexLock lock(&mu_);
      if (!opened.ok()) {
        ++stats_.closed;
        return opened.status();
      }
      c = std::move(*opened);
      ++stats_.opened;
    }
    bool clean = false;
    Result<BufferList> out = Exchange(*c, token, req, timeout_us, &clean);
    if (clean) {
      Keep(std::move(c));
    } else {
      c.reset();
      MutexLock lock(&mu_);
      ++stats_.closed;
    }
    return out;
  } catch (const zmq::error_t& e) {
    MutexLock lock(&mu_);
    ++stats_.closed;
    return Status::Unavailable(req.what + ": " + e.what());
  }
}

Status PeerConnections::TakeRead(const std::string& endpoint, JobId job, uint32_t run) {
  const std::string what =
      "read of job " + std::to_string(job) + " run " + std::to_string(run) + " from " + endpoint;
  DataHeader h;
  h.op = static_cast<uint8_t>(DataOp::kTakeRead);
  h.key = job;
  h.run = run;
  h.token = tokens_->current();
  std::optional<zmq::socket_t> evicted;  // closed outside the lock
  MutexLock lock(&mu_);
  try {
    auto it = std::find_if(readers_.begin(), readers_.end(),
                           [&](const Reader& r) { return r.endpoint == endpoint; });
    if (it != readers_.end() && it->token != h.token) {
      // Let in with an older token: one with the current one replaces it.
      evicted.emplace(std::move(it->socket));
      readers_.erase(it);
      it = readers_.end();
    }
    if (it != readers_.end()) {
      // The most recently used last.
      std::rotate(it, it + 1, readers_.end());
    } else {
      zmq::socket_t s(*ctx_, zmq::socket_type::dealer);
      s.set(zmq::sockopt::linger, 100);  // a stopping worker waits no longer
      SetDataCredentials(s, h.token);
      s.connect(endpoint);
      readers_.push_back(Reader{endpoint, h.token, std::move(s)});
      if (readers_.size() > max_idle_) {
        if (!evicted) evicted.emplace(std::move(readers_.front().socket));
        readers_.pop_front();
      }
    }
    if (!readers_.back().socket.send(zmq::buffer(&h, sizeof(h)), zmq::send_flags::dontwait)) {
      return Status::Unavailable(what + ": too many requests queued for an unreachable peer");
    }
    return Status::Ok();
  } catch (const zmq::error_t& e) {
    return Status::Unavailable(what + ": " + e.what());
  }
}

PeerConnections::Stats PeerConnections::stats() const {
  MutexLock lock(&mu_);
  Stats s = stats_;
  s.idle = idle_.size();
  return s;
}

void PeerConnections::Clear() {
  std::deque<std::unique_ptr<Connection>> closing;
  std::deque<Reader> readers;
  MutexLock lock(&mu_);
  closing.swap(idle_);
  readers.swap(readers_);
}

Result<std::vector<Buffer>> FetchOutputs(const std::string& endpoint, const DataToken& token,
                                         JobId job, uint32_t run, int64_t timeout_ms) {
  zmq::context_t ctx(1);
  return FetchFromPeer(&ctx, endpoint, token, job, run, timeout_ms * 1000);
}

}  // namespace hmpmd::worker
