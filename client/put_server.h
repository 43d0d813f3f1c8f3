// PutServer: the driver's data socket, which serves the data of its puts
// (Client::Put) to the workers that run the puts' tasks, and where workers
// tell the driver of its runs done (DataOp::kRunDone, `on_done`).
//
// A put stays here until its task has ended and its Future is dropped (or
// the session ends): a worker fetches it when the put's task runs, and
// again, while the Future is held, if the controller
// runs that task anew because the worker that held the data died. The
// socket speaks the data plane's fetch protocol (data_frames.h) as a
// worker's does: a PLAIN server whose ZAP handler lets in only peers that
// present the session's data token, replies in frames of at most
// kFetchChunkBytes that point into the stored buffer (zero-copy; a
// shared_ptr keeps it alive until ZeroMQ has sent them).
//
// Thread-safety: Add(), Erase() and size() are safe from any thread (one
// mutex guards the puts); Start() and the destructor belong to the owner;
// the socket belongs to the server's thread.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>
#include <zmq.hpp>

#include "hmpmd/protocol/buffer.h"
#include "hmpmd/protocol/data_frames.h"
#include "hmpmd/protocol/data_token.h"
#include "hmpmd/protocol/status.h"
#include "hmpmd/protocol/types.h"
#include "hmpmd/protocol/zap_handler.h"

namespace hmpmd::client::internal {

class PutServer {
 public:
  // Called on the server's thread for each run-done notice of `job`.
  using OnDone = std::function<void(RunDoneNotice notice)>;
  // Serves fetches of (job, put id) that carry `token`, and passes the
  // notices that carry it to `on_done` (may be empty: they are dropped).
  PutServer(JobId job, DataToken token, OnDone on_done = {});
  // Stops the thread; what is stored is freed.
  ~PutServer();
  // Stops the thread (no `on_done` call runs after this returns); the
  // socket stays bound. Idempotent; not from the server's own thread.
  void Stop();
  PutServer(const PutServer&) = delete;
  PutServer& operator=(const PutServer&) = delete;

  // Binds tcp://HOST:* and starts the thread. InvalidArgument when the
  // address cannot be bound.
  Status Start(const std::string& host);
  // tcp://HOST:PORT, once started.
  const std::string& endpoint() const { return endpoint_; }

  // Keeps `data` and returns its id, which a fetch names as its run.
  uint32_t Add(std::vector<Buffer> data);
  // Frees put `id`; a later fetch of it gets a fetch error.
  void Erase(uint32_t id);
  // Puts held, and their bytes.
  size_t size() const;
  uint64_t bytes() const;

 private:
  void Loop();
  void Serve(zmq::socket_t& s);

  const JobId job_;
  const DataToken token_;
  const OnDone on_done_;
  zmq::context_t ctx_{1};  // the socket's and its ZAP handler's alone
  ZapHandler zap_;
  std::optional<zmq::socket_t> socket_;
  std::string endpoint_;
  std::atomic<bool> stop_{false};
  std::thread thread_;

  mutable std::mutex mu_;
  std::map<uint32_t, std::shared_ptr<const std::vector<Buffer>>> puts_;  // guarded by mu_
  uint32_t next_id_ = 0;                                                 // guarded by mu_
  uint64_t bytes_ = 0;                                                   // guarded by mu_
};

}  // namespace hmpmd::client::internal
