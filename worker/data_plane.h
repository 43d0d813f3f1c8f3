// DataPlane: everything a worker needs to keep outputs and move tensors:
// the object store, the actor states, the data socket (DataServer), the
// collective inbox and the ZeroMQ context that lanes open their peer
// sockets on.
//
// A lane asks it for a task's inputs (read locally, or fetched from the
// producing worker), runs collectives through a Communicator it makes, and
// stores the outputs.
//
// Thread-safety: Start() and Stop() belong to the I/O thread; the rest is
// safe from any lane.
#pragma once

#include <spdlog/logger.h>

#include <memory>
#include <string>
#include <vector>
#include <zmq.hpp>

#include "actor_states.h"
#include "collective_inbox.h"
#include "communicator.h"
#include "data_server.h"
#include "hmpmd/protocol/messages.h"
#include "object_store.h"

namespace hmpmd::worker {

struct DataPlaneOptions {
  std::string host = "127.0.0.1";  // interface the data socket binds
  uint64_t cap_bytes = 0;          // object store cap; 0: none
  // A fetch or collective step waits this long. A peer that died is found
  // out by the controller, which runs the work again; this only bounds how
  // long a lane stays stuck on the dead peer.
  int64_t timeout_us = 10'000'000;
};

class DataPlane {
 public:
  DataPlane(DataPlaneOptions options, spdlog::logger* log);
  ~DataPlane();

  Status Start();
  void Stop();
  const std::string& endpoint() const { return server_.endpoint(); }
  ObjectStore& store() { return store_; }
  ActorStates& actor_states() { return actor_states_; }

  // The outputs of every input run, concatenated in input order. When one
  // cannot be read (not in the store, no location, the peer failed or did
  // not answer), the error names it and `*lost_run` (if given) is its run.
  Result<BufferList> GatherInputs(JobId job, const std::vector<InputRef>& inputs,
                                  uint32_t* lost_run = nullptr);
  // A communicator for `gang`, to be used by the calling lane only.
  std::unique_ptr<Communicator> MakeCommunicator(const GangInfo& gang);

 private:
  const DataPlaneOptions options_;
  spdlog::logger* const log_;
  zmq::context_t ctx_;
  ObjectStore store_;
  ActorStates actor_states_;
  CollectiveInbox inbox_;
  DataServer server_;  // last: its thread uses the fields above
};

}  // namespace hmpmd::worker
