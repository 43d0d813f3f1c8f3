// DataServer: the worker's data socket (a ROUTER) and the thread that
// serves it. Peers fetch outputs from the ObjectStore through it, and
// collective traffic for this worker's lanes lands in the CollectiveInbox.
//
// Replies to fetches are zero-copy: each buffer frame points into the
// stored outputs, which a shared_ptr keeps alive until ZeroMQ has sent it.
// ZeroMQ drops a connection that sends a frame over kMaxFrameBytes before
// allocating it.
//
// Thread-safety: Bind() and Stop() belong to the owner's thread; the socket
// belongs to the server thread once Bind() has started it.
#pragma once

#include <spdlog/logger.h>

#include <atomic>
#include <optional>
#include <string>
#include <thread>
#include <zmq.hpp>

#include "collective_inbox.h"
#include "hmpmd/protocol/status.h"
#include "object_store.h"

namespace hmpmd::worker {

class DataServer {
 public:
  // The largest frame a legitimate peer sends here (ZMQ_MAXMSGSIZE; see
  // data_server.cc for why this value).
  static constexpr int64_t kMaxFrameBytes = int64_t{2} << 20;

  // Every pointer must outlive the server.
  DataServer(zmq::context_t* ctx, ObjectStore* store, CollectiveInbox* inbox, spdlog::logger* log);
  ~DataServer();
  DataServer(const DataServer&) = delete;
  DataServer& operator=(const DataServer&) = delete;

  // Binds tcp://HOST:* and starts the thread. The endpoint peers should
  // use is endpoint() afterwards.
  Status Bind(const std::string& host);
  const std::string& endpoint() const { return endpoint_; }
  // Joins the thread. Idempotent.
  void Stop();

 private:
  void Loop();
  void Serve();

  zmq::context_t* const ctx_;
  ObjectStore* const store_;
  CollectiveInbox* const inbox_;
  spdlog::logger* const log_;
  std::optional<zmq::socket_t> socket_;
  std::string endpoint_;
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

}  // namespace hmpmd::worker
