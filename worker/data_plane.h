// DataPlane: everything a worker needs to keep outputs and move tensors:
// the object store, the actor states, the data socket (DataServer), the
// collective inbox and the ZeroMQ context that lanes open their peer
// sockets on.
//
// The I/O thread starts fetching a task's remote inputs when it pushes the
// task (PrefetchInputs: every producer at once, ahead of the task while it
// waits in its lane's queue; see InputFetcher). A lane then gathers the
// inputs (the fetched ones, and local ones read from the store, without
// copying them where it can), runs collectives through a Communicator it
// makes, and stores the outputs.
//
// Thread-safety: Start() and Stop() belong to the I/O thread; the rest is
// safe from any lane.
#pragma once

#include <spdlog/logger.h>

#include <atomic>
#include <memory>
#include <span>
#include <string>
#include <vector>
#include <zmq.hpp>

#include "actor_states.h"
#include "collective_inbox.h"
#include "communicator.h"
#include "data_server.h"
#include "data_tokens.h"
#include "hmpmd/protocol/messages.h"
#include "hmpmd/worker/kernel_args.h"
#include "input_fetcher.h"
#include "object_store.h"
#include "state_loader.h"

namespace hmpmd::worker {

struct DataPlaneOptions {
  std::string host = "127.0.0.1";  // interface the data socket binds
  // Object store cap, and the collective inbox's
  // (CollectiveInboxOptions::cap_bytes); 0: none.
  uint64_t cap_bytes = 0;
  // A fetch or collective step waits this long. A peer that died is found
  // out by the controller, which runs the work again; this only bounds how
  // long a lane stays stuck on the dead peer. Collective frames nobody
  // claims for 4x this long are dropped (CollectiveInboxOptions::expire_us).
  int64_t timeout_us = 10'000'000;
  // Most bytes of queued tasks' inputs fetched ahead (also kept under
  // cap_bytes with the stored outputs); 0: fetch when a task starts.
  uint64_t prefetch_bytes = 256ull << 20;
};

// A task's inputs as its kernel gets them: the buffers of every input run,
// in input order. A single input run read from the local store is passed
// as the stored list itself (no copy); fetched buffers are moved, and a
// local list is copied only while someone else still holds it.
class InputSet {
 public:
  InputSet() = default;
  // Buffers it owns go back to the tensor pool once the kernel is done.
  ~InputSet();
  InputSet(InputSet&&) noexcept = default;
  InputSet& operator=(InputSet&&) noexcept = default;
  InputSet(const InputSet&) = delete;
  InputSet& operator=(const InputSet&) = delete;

  std::span<const Buffer> buffers() const {
    return shared_ != nullptr ? std::span<const Buffer>(*shared_) : std::span<const Buffer>(owned_);
  }

 private:
  friend class DataPlane;
  std::shared_ptr<const BufferList> shared_;  // set: the kernel reads this list
  BufferList owned_;
};

class DataPlane {
 public:
  DataPlane(DataPlaneOptions options, spdlog::logger* log);
  ~DataPlane();

  Status Start();
  void Stop();
  const std::string& endpoint() const { return server_.endpoint(); }
  // The controller's data token (RegisterAck): what the data socket accepts
  // (with the previous one, see DataTokens) and what this worker's fetches,
  // take-reads and collective frames carry. Until the first call the data
  // socket serves nothing.
  void SetDataToken(const DataToken& token) { tokens_.Set(token); }
  const DataTokens& tokens() const { return tokens_; }
  zmq::context_t& context() { return ctx_; }
  const DataServer& server() const { return server_; }
  ObjectStore& store() { return store_; }
  ActorStates& actor_states() { return actor_states_; }
  InputFetcher& fetcher() { return fetcher_; }

  // Starts fetching the remote inputs of `task` (the I/O thread, when it
  // pushes the task to a lane). Dropping the handle abandons the fetches.
  PrefetchedInputs PrefetchInputs(const TaskAssign& task);

  // The outputs of every input run, concatenated in input order; a run
  // named twice is fetched and read once and appears twice. `ahead`
  // (may be null or empty) holds what PrefetchInputs started; fetches not
  // started yet start now. When inputs cannot be read (not in the store, no
  // location, the peer failed or did not answer), the error names the
  // first and `*lost_runs` (if given) gets all their runs, and no read of
  // the fetched ones is taken (they stay for the rerun); on success the
  // fetched inputs' reads are taken from their producers. When
  // `*cancelled` (may be null) becomes true while fetches are out, the
  // call fails with Cancelled and no lost run.
  Result<InputSet> GatherInputs(JobId job, const std::vector<InputRef>& named,
                                const PrefetchedInputs* ahead = nullptr,
                                const std::atomic<bool>* cancelled = nullptr,
                                std::vector<uint32_t>* lost_runs = nullptr);
  // Starts loading the state of `task`'s sub-model ahead (StateLoader)
  // when the task names a holder and this worker lacks the state (the I/O
  // thread, when it pushes the task).
  void PrefetchState(const TaskAssign& task);
  StateLoader& state_loader() { return state_loader_; }
  // Loads the state of (job, submodel) from the worker whose data socket
  // is `from` (DataOp::kFetchState) unless this worker has it: the bytes
  // it brought (0: had it). The error names the load (NotFound: `from`
  // holds none; Unavailable: unreachable; InvalidArgument: it holds one it
  // cannot copy).
  Result<uint64_t> LoadState(JobId job, std::string_view submodel, const std::string& from);
  // A communicator for `gang`, to be used by the calling lane only; its
  // waits for peers end when `*cancel` (the task's flag) rises.
  std::unique_ptr<Communicator> MakeCommunicator(const GangInfo& gang,
                                                 const std::atomic<bool>* cancel = nullptr);
  // Runs a driver's put (kPutKernel): fetches the put's buffers from the
  // driver's data socket (args `endpoint` and `put`, as a fetch of run
  // `put` of `job`) and returns them as the task's outputs. Throws
  // std::invalid_argument for missing arguments and std::runtime_error
  // naming the driver when the fetch fails.
  BufferList FetchPut(JobId job, const KernelArgs& args);
  // A gang member dropped before it ran (its gang starts over, its job was
  // cancelled): the peers' frames for `tag` are dropped, now and later.
  void CloseGang(uint64_t tag) { inbox_.Drop(tag); }
  // Collective frames waiting for a lane (tests and logs).
  size_t collective_frames_queued() const { return inbox_.queued(); }
  const CollectiveInbox& inbox() const { return inbox_; }

 private:
  const DataPlaneOptions options_;
  spdlog::logger* const log_;
  zmq::context_t ctx_;
  DataTokens tokens_;
  ObjectStore store_;
  ActorStates actor_states_;
  CollectiveInbox inbox_;
  DataServer server_;         // its thread uses the fields above
  InputFetcher fetcher_;      // its threads use ctx_ and store_
  StateLoader state_loader_;  // last: its thread uses fetcher_'s connections
};

}  // namespace hmpmd::worker
