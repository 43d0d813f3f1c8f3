// Communicator: the collectives of one gang, peer to peer over the members'
// data sockets. Each member runs the same call with its own rank; bytes go
// straight between members (DEALER -> the peer's data ROUTER -> its
// CollectiveInbox), never through the controller.
//
//   AllReduce      ring reduce-scatter + ring all-gather, float32 sum,
//                  reduced from the input straight into the output
//   ReduceScatter  ring; rank r keeps segment r of the sum
//   AllGather      ring; blocks in rank order
//   AllToAll       every pair directly; per-destination sizes
//   Broadcast      chunked chain from the root
// Large transfers go in chunks of kChunkBytes, so a receiver reduces one
// chunk while the next is on the wire. Segment i of n elements over P
// ranks is [i*n/P, (i+1)*n/P).
//
// Chunks are sent zero-copy: ZeroMQ reads them straight from the caller's
// buffers, and every call returns only once ZeroMQ has let go of all of
// them (the SendFence), so the caller may free or change its buffers
// afterwards. Within a call a buffer is changed only after the peer it
// went to has used it, which ZeroMQ cannot do before it has sent it.
//
// Thread-safety: not thread-safe; one lane thread uses it for one
// collective (its sockets belong to that thread). The fence is also
// touched by ZeroMQ's I/O thread, under its own mutex.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>
#include <zmq.hpp>

#include "collective_inbox.h"
#include "hmpmd/protocol/data_token.h"
#include "hmpmd/protocol/status.h"
#include "mutex.h"

namespace hmpmd::worker {

struct GangView {
  uint32_t rank = 0;
  std::vector<std::string> endpoints;  // data endpoints in rank order
  uint64_t tag = 0;
  DataToken token;  // what every frame carries: the peers' DataTokens accept it
};

// Counts the zero-copy frames ZeroMQ still holds. Thread-safe: ZeroMQ's
// I/O thread releases, the lane waits.
class SendFence {
 public:
  void Add() EXCLUDES(mu_);
  // The free function of a zero-copy frame; `hint` is the fence.
  static void Release(void* data, void* hint);
  // True once nothing is held; false after `timeout_us` (<0: no limit).
  bool Wait(int64_t timeout_us) EXCLUDES(mu_);

 private:
  Mutex mu_;
  CondVar cv_;
  uint64_t held_ GUARDED_BY(mu_) = 0;
};

class Communicator {
 public:
  static constexpr size_t kChunkBytes = 1 << 20;
  // Frames smaller than this are copied; larger ones go zero-copy.
  static constexpr size_t kZeroCopyBytes = 64 << 10;
  // How often a wait for a peer looks at the cancel flag.
  static constexpr int64_t kCancelPollUs = 20'000;

  // `ctx` and `inbox` (this worker's) must outlive it. A member that sends
  // nothing within `timeout_us` fails the call with Unavailable. With
  // `cancel` (the task's cancel flag; it must outlive this), a wait for a
  // peer also ends, with Cancelled, within kCancelPollUs of the flag rising:
  // a gang whose member died is stopped by the controller this way.
  Communicator(zmq::context_t* ctx, CollectiveInbox* inbox, GangView gang, int64_t timeout_us,
               const std::atomic<bool>* cancel = nullptr);
  ~Communicator();

  uint32_t rank() const { return gang_.rank; }
  uint32_t size() const { return static_cast<uint32_t>(gang_.endpoints.size()); }

  // In place: `data` becomes the element-wise sum over the ranks.
  Status AllReduce(std::span<float> data);
  // float32 bytes: `out` (as large as `in`; may be `in` itself) gets the
  // sum of every rank's `in`. `in` is read where it lies (sent from, and
  // added to what arrives), so the caller copies nothing in.
  Status AllReduce(std::span<const std::byte> in, std::span<std::byte> out);
  // `in` holds n float32 elements on every rank (as bytes); `out` gets
  // segment rank() of the sum.
  Status ReduceScatter(std::span<const std::byte> in, std::vector<std::byte>* out);
  // Every rank gives a block of the same size; `out` gets size() blocks.
  Status AllGather(std::span<const std::byte> in, std::vector<std::byte>* out);
  // `send[d]` goes to rank d; `out` gets what each rank sent here, in rank
  // order, and `recv_sizes` their sizes.
  Status AllToAll(const std::vector<std::span<const std::byte>>& send, std::vector<std::byte>* out,
                  std::vector<size_t>* recv_sizes);
  // `in` of the root (ignored elsewhere) reaches every rank's `out`
  // (resized to fit); the root sends straight from `in`.
  Status Broadcast(uint32_t root, std::span<const std::byte> in, std::vector<std::byte>* out);

 private:
  // Every public call ends here: waits for the fence and, when that or the
  // call failed, closes the sockets so ZeroMQ drops what it still holds.
  Status Finish(Status status);
  Status Send(uint32_t peer, const void* data, size_t size);
  Status SendChunks(uint32_t peer, const void* data, size_t size);
  Result<zmq::message_t> Recv(uint32_t peer);
  // Receives `size` bytes from `peer` in chunks; `sink(offset, chunk)`.
  template <typename Sink>
  Status RecvChunks(uint32_t peer, size_t size, Sink sink);
  // A ring needs the same size on every rank. Each rank tells the next its
  // byte count before its first segment (SendSize) and checks the previous
  // rank's before taking one from it (CheckSize, InvalidArgument naming
  // both); equal neighbour to neighbour is equal around the ring. Unchecked,
  // a rank with fewer bytes sends shorter segments: its neighbour took the
  // next one as the rest of the current one and waited out the time-out.
  Status SendSize(uint64_t bytes);
  Status CheckSize(std::string_view op, uint64_t bytes);
  // One ring pass over the p segments of `n` float32 elements in `out`:
  // reduce-scatter when `reduce` (the first step sends from `in`, and a
  // segment that arrives is added to `in`'s into `out`), else all-gather
  // within `out`. `shift` rotates which segment each rank starts with.
  // With `check_op` (the collective's name) sizes are checked first.
  Status RingPass(const std::byte* in, std::byte* out, size_t n, int shift, bool reduce,
                  std::string_view check_op);
  Status AllToAllSteps(const std::vector<std::span<const std::byte>>& send,
                       std::vector<std::byte>* out, std::vector<size_t>* recv_sizes);
  Status BroadcastSteps(uint32_t root, std::span<const std::byte> in, std::vector<std::byte>* out);
  uint32_t Peer(int offset) const;

  zmq::context_t* const ctx_;
  CollectiveInbox* const inbox_;
  const GangView gang_;
  const int64_t timeout_us_;
  const std::atomic<bool>* const cancel_;  // may be null
  SendFence fence_;                        // before sockets_: ZeroMQ releases into it on close
  std::vector<std::optional<zmq::socket_t>> sockets_;  // by rank, connected lazily
};

}  // namespace hmpmd::worker
