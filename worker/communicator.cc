#include "communicator.h"

#include <algorithm>
#include <cstring>
#include <memory>

#include "clock.h"
#include "hmpmd/protocol/data_auth.h"
#include "hmpmd/protocol/data_frames.h"
#include "hmpmd/protocol/tensor_bytes.h"

namespace hmpmd::worker {
namespace {

size_t SegBegin(size_t n, uint32_t p, uint32_t i) { return n * i / p; }

uint32_t Mod(int64_t v, uint32_t p) { return static_cast<uint32_t>(((v % p) + p) % p); }

// dst[i] = a[i] + b[i] over float32 bytes, any alignment; dst may be a.
void AddInto(std::byte* dst, const std::byte* a, const void* b, size_t count) {
  const auto* s = static_cast<const std::byte*>(b);
  for (size_t i = 0; i < count; ++i) {
    float x, y;
    std::memcpy(&x, a + i * sizeof(float), sizeof(float));
    std::memcpy(&y, s + i * sizeof(float), sizeof(float));
    x += y;
    std::memcpy(dst + i * sizeof(float), &x, sizeof(float));
  }
}

// How long ZeroMQ may keep sending a closed socket's frames.
constexpr int kLingerMs = 1000;

}  // namespace

void SendFence::Add() {
  MutexLock lock(&mu_);
  ++held_;
}

void SendFence::Release(void*, void* hint) {
  auto* fence = static_cast<SendFence*>(hint);
  {
    MutexLock lock(&fence->mu_);
    if (--fence->held_ > 0) return;
  }
  fence->cv_.SignalAll();
}

bool SendFence::Wait(int64_t timeout_us) {
  const int64_t deadline = timeout_us < 0 ? INT64_MAX : NowUs() + timeout_us;
  MutexLock lock(&mu_);
  while (held_ > 0) {
    const int64_t left = deadline - NowUs();
    if (left <= 0) return false;
    cv_.WaitForUs(&mu_, std::min<int64_t>(left, 1'000'000));
  }
  return true;
}

Communicator::Communicator(zmq::context_t* ctx, CollectiveInbox* inbox, GangView gang,
                           int64_t timeout_us, const std::atomic<bool>* cancel)
    : ctx_(ctx), inbox_(inbox), gang_(std::move(gang)), timeout_us_(timeout_us), cancel_(cancel) {
  sockets_.resize(gang_.endpoints.size());
}

Communicator::~Communicator() {
  // Closed sockets drop their frames within the linger time; the fence
  // must outlive those releases.
  sockets_.clear();
  fence_.Wait(-1);
  // Whatever a failed collective left queued for us is of no further use.
  inbox_->Drop(gang_.tag);
}

Status Communicator::Finish(Status status) {
  if (status.ok() && fence_.Wait(timeout_us_)) return status;
  // A failed call, or a peer that stopped reading: ZeroMQ may still hold
  // the caller's buffers. Closing the sockets makes it drop them after the
  // linger time, which bounds this wait.
  for (auto& socket : sockets_) socket.reset();
  fence_.Wait(-1);
  if (!status.ok()) return status;
  return Status::Unavailable("collective: peers did not take this rank's data within " +
                             std::to_string(timeout_us_ / 1000) + " ms");
}

uint32_t Communicator::Peer(int offset) const { return Mod(int64_t{gang_.rank} + offset, size()); }

Status Communicator::Send(uint32_t peer, const void* data, size_t size) {
  try {
    auto& s = sockets_[peer];
    if (!s) {
      s.emplace(*ctx_, zmq::socket_type::dealer);
      s->set(zmq::sockopt::linger, kLingerMs);
      s->set(zmq::sockopt::sndhwm, 0);
      SetDataCredentials(*s, gang_.token);
      s->connect(gang_.endpoints[peer]);
    }
    DataHeader h;
    h.op = static_cast<uint8_t>(DataOp::kCollective);
    h.src = gang_.rank;
    h.key = gang_.tag;
    h.token = gang_.token;
    s->send(zmq::buffer(&h, sizeof(h)), zmq::send_flags::sndmore);
    if (size < kZeroCopyBytes) {
      s->send(zmq::message_t(data, size), zmq::send_flags::none);
    } else {
      fence_.Add();
      zmq::message_t m(const_cast<void*>(data), size, &SendFence::Release, &fence_);
      s->send(m, zmq::send_flags::none);
    }
  } catch (const zmq::error_t& e) {
    return Status::Unavailable("collective: send to rank " + std::to_string(peer) + " (" +
                               gang_.endpoints[peer] + "): " + e.what());
  }
  return Status::Ok();
}

Status Communicator::SendChunks(uint32_t peer, const void* data, size_t size) {
  const auto* p = static_cast<const std::byte*>(data);
  size_t off = 0;
  do {
    const size_t n = std::min(kChunkBytes, size - off);
    RETURN_IF_ERROR(Send(peer, p + off, n));
    off += n;
  } while (off < size);
  return Status::Ok();
}

Result<zmq::message_t> Communicator::Recv(uint32_t peer) {
  std::optional<zmq::message_t> m;
  const int64_t deadline = NowUs() + timeout_us_;
  for (;;) {
    const int64_t left = deadline - NowUs();
    m = inbox_->Take(gang_.tag, peer, cancel_ == nullptr ? left : std::min(left, kCancelPollUs));
    if (m || left <= 0) break;
    if (inbox_->Closed(gang_.tag)) {
      return Status::Unavailable("collective: a frame from rank " + std::to_string(peer) + " (" +
                                 gang_.endpoints[peer] +
                                 ") was dropped: this worker's collective inbox was full "
                                 "(--memory-mb)");
    }
    if (cancel_ != nullptr && cancel_->load(std::memory_order_relaxed)) {
      return Status::Cancelled("collective: cancelled while waiting for rank " +
                               std::to_string(peer) + " (" + gang_.endpoints[peer] + ")");
    }
  }
  if (!m) {
    return Status::Unavailable("collective: nothing from rank " + std::to_string(peer) + " (" +
                               gang_.endpoints[peer] + ") within " +
                               std::to_string(timeout_us_ / 1000) + " ms");
  }
  return std::move(*m);
}

template <typename Sink>
Status Communicator::RecvChunks(uint32_t peer, size_t size, Sink sink) {
  size_t off = 0;
  do {
    ASSIGN_OR_RETURN(zmq::message_t m, Recv(peer));
    if (m.size() > size - off || (m.size() == 0 && size > 0)) {
      return Status::Corruption("collective: rank " + std::to_string(peer) + " sent " +
                                std::to_string(m.size()) + " bytes where " +
                                std::to_string(size - off) + " were left");
    }
    sink(off, m);
    off += m.size();
  } while (off < size);
  return Status::Ok();
}

Status Communicator::SendSize(uint64_t bytes) { return Send(Peer(1), &bytes, sizeof(bytes)); }

Status Communicator::CheckSize(std::string_view op, uint64_t bytes) {
  const uint32_t prev = Peer(-1);
  ASSIGN_OR_RETURN(zmq::message_t head, Recv(prev));
  uint64_t theirs = 0;
  if (head.size() != sizeof(theirs))
    return Status::Corruption(std::string(op) + ": bad size frame");
  std::memcpy(&theirs, head.data(), sizeof(theirs));
  if (theirs == bytes) return Status::Ok();
  return Status::InvalidArgument(std::string(op) + ": rank " + std::to_string(prev) + " gave " +
                                 std::to_string(theirs) + " bytes, rank " +
                                 std::to_string(gang_.rank) + " " + std::to_string(bytes) +
                                 "; every member must give the same size");
}

// One ring pass: p-1 steps, each sending one segment to the next rank and
// receiving one from the previous; `reduce` adds what arrives to `in`'s
// segment into `out` (reduce-scatter), otherwise it replaces `out`'s
// segment (all-gather). In a reduce pass the segment sent at step s > 0 is
// the one received at step s-1, so only step 0 sends from `in`.
Status Communicator::RingPass(const std::byte* in, std::byte* out, size_t n, int shift, bool reduce,
                              std::string_view check_op) {
  const uint32_t p = size();
  constexpr size_t kF = sizeof(float);
  if (!check_op.empty()) RETURN_IF_ERROR(SendSize(n * kF));
  for (uint32_t step = 0; step + 1 < p; ++step) {
    const uint32_t send_seg = Mod(int64_t{gang_.rank} - step + shift, p);
    const uint32_t recv_seg = Mod(int64_t{gang_.rank} - step - 1 + shift, p);
    const size_t sb = SegBegin(n, p, send_seg), se = SegBegin(n, p, send_seg + 1);
    const std::byte* from = reduce && step == 0 ? in : out;
    RETURN_IF_ERROR(SendChunks(Peer(1), from + sb * kF, (se - sb) * kF));
    // Checked after our first segment is on its way, so the check costs no
    // round trip.
    if (step == 0 && !check_op.empty()) RETURN_IF_ERROR(CheckSize(check_op, n * kF));
    const size_t rb = SegBegin(n, p, recv_seg), re = SegBegin(n, p, recv_seg + 1);
    std::byte* base = out + rb * kF;
    const std::byte* mine = in + rb * kF;
    RETURN_IF_ERROR(RecvChunks(Peer(-1), (re - rb) * kF, [&](size_t off, const zmq::message_t& m) {
      if (reduce) {
        AddInto(base + off, mine + off, m.data(), m.size() / kF);
      } else {
        std::memcpy(base + off, m.data(), m.size());
      }
    }));
  }
  return Status::Ok();
}

Status Communicator::AllReduce(std::span<float> data) {
  return AllReduce(std::as_bytes(data), std::as_writable_bytes(data));
}

Status Communicator::AllReduce(std::span<const std::byte> in, std::span<std::byte> out) {
  if (in.size() != out.size() || in.size() % sizeof(float) != 0) {
    return Status::InvalidArgument("allreduce: " + std::to_string(in.size()) + " bytes in, " +
                                   std::to_string(out.size()) + " out (float32, equal sizes)");
  }
  if (size() < 2) {
    if (out.data() != in.data() && !in.empty()) std::memcpy(out.data(), in.data(), in.size());
    return Status::Ok();
  }
  const size_t n = in.size() / sizeof(float);
  return Finish([&]() -> Status {
    // After the reduce-scatter rank r holds the sum of segment r + 1 in
    // `out`; segment r it sent from `in` and never wrote. The all-gather
    // overwrites a segment only after the sum it fed has come round the
    // ring, so ZeroMQ has long sent that segment; every segment of `out`
    // but r + 1 is written by it, segment r + 1 by the reduce-scatter.
    RETURN_IF_ERROR(RingPass(in.data(), out.data(), n, 0, /*reduce=*/true, "allreduce"));
    return RingPass(in.data(), out.data(), n, 1, /*reduce=*/false, {});
  }());
}

Status Communicator::ReduceScatter(std::span<const std::byte> in, std::vector<std::byte>* out) {
  const uint32_t p = size();
  const size_t n = in.size() / sizeof(float);
  const size_t b = SegBegin(n, p, gang_.rank), e = SegBegin(n, p, gang_.rank + 1);
  if (p < 2) {
    out->assign(in.begin(), in.begin() + static_cast<ptrdiff_t>(n * sizeof(float)));
    return Status::Ok();
  }
  // Partial sums land in `work` (no copy of `in` first). Shifted by one so that rank r ends with
  // segment r.
  // A reduce pass reads only segments it wrote, so `work` may hold stale bytes.
  std::vector<std::byte> work;
  SizeTensorBytesForOverwrite(&work, in.size());
  const Status s =
      Finish(RingPass(in.data(), work.data(), n, -1, /*reduce=*/true, "reduce_scatter"));
  if (s.ok()) out->assign(work.data() + b * sizeof(float), work.data() + e * sizeof(float));
  RecycleTensorBytes(&work);
  return s;
}

Status Communicator::AllGather(std::span<const std::byte> in, std::vector<std::byte>* out) {
  const uint32_t p = size();
  const size_t block = in.size();
  SizeTensorBytesForOverwrite(out, block * p);  // every block is written below
  std::memcpy(out->data() + block * gang_.rank, in.data(), block);
  return Finish([&]() -> Status {
    if (p > 1) RETURN_IF_ERROR(SendSize(block));
    for (uint32_t step = 0; step + 1 < p; ++step) {
      const uint32_t send_blk = Mod(int64_t{gang_.rank} - step, p);
      const uint32_t recv_blk = Mod(int64_t{gang_.rank} - step - 1, p);
      // Step 0 sends this rank's block straight from `in`.
      const std::byte* from = step == 0 ? in.data() : out->data() + block * send_blk;
      RETURN_IF_ERROR(SendChunks(Peer(1), from, block));
      if (step == 0) RETURN_IF_ERROR(CheckSize("allgather", block));
      std::byte* base = out->data() + block * recv_blk;
      RETURN_IF_ERROR(RecvChunks(Peer(-1), block, [&](size_t off, const zmq::message_t& m) {
        std::memcpy(base + off, m.data(), m.size());
      }));
    }
    return Status::Ok();
  }());
}

Status Communicator::AllToAll(const std::vector<std::span<const std::byte>>& send,
                              std::vector<std::byte>* out, std::vector<size_t>* recv_sizes) {
  const uint32_t p = size();
  if (send.size() != p) {
    return Status::InvalidArgument("alltoall: " + std::to_string(send.size()) +
                                   " blocks for a gang of " + std::to_string(p));
  }
  return Finish(AllToAllSteps(send, out, recv_sizes));
}

Status Communicator::AllToAllSteps(const std::vector<std::span<const std::byte>>& send,
                                   std::vector<std::byte>* out, std::vector<size_t>* recv_sizes) {
  const uint32_t p = size();
  // Sizes first (one small frame per peer), then the blocks in chunks, all
  // queued at once (zero-copy, so at no cost); peers are visited in a
  // rotating order so no rank is everyone's first.
  for (uint32_t i = 1; i < p; ++i) {
    const uint32_t d = Peer(static_cast<int>(i));
    const uint64_t n = send[d].size();
    RETURN_IF_ERROR(Send(d, &n, sizeof(n)));
    if (n > 0) RETURN_IF_ERROR(SendChunks(d, send[d].data(), n));
  }
  // Every sender's size frame comes first on its FIFO: read them all, size
  // `out` once, then land each sender's chunks straight in its place.
  recv_sizes->assign(p, 0);
  (*recv_sizes)[gang_.rank] = send[gang_.rank].size();
  for (uint32_t i = 1; i < p; ++i) {
    const uint32_t s = Peer(-static_cast<int>(i));
    ASSIGN_OR_RETURN(zmq::message_t head, Recv(s));
    uint64_t n = 0;
    if (head.size() != sizeof(n)) return Status::Corruption("alltoall: bad size frame");
    std::memcpy(&n, head.data(), sizeof(n));
    (*recv_sizes)[s] = n;
  }
  std::vector<size_t> offset(p + 1, 0);
  for (uint32_t s = 0; s < p; ++s) offset[s + 1] = offset[s] + (*recv_sizes)[s];
  // Every byte is written below: our own block and each sender's chunks.
  SizeTensorBytesForOverwrite(out, offset[p]);
  if (!send[gang_.rank].empty()) {
    std::memcpy(out->data() + offset[gang_.rank], send[gang_.rank].data(), send[gang_.rank].size());
  }
  for (uint32_t i = 1; i < p; ++i) {
    const uint32_t s = Peer(-static_cast<int>(i));
    if ((*recv_sizes)[s] == 0) continue;
    std::byte* base = out->data() + offset[s];
    RETURN_IF_ERROR(RecvChunks(s, (*recv_sizes)[s], [&](size_t off, const zmq::message_t& m) {
      std::memcpy(base + off, m.data(), m.size());
    }));
  }
  return Status::Ok();
}

Status Communicator::Broadcast(uint32_t root, std::span<const std::byte> in,
                               std::vector<std::byte>* out) {
  const uint32_t p = size();
  if (root >= p)
    return Status::InvalidArgument("broadcast: root " + std::to_string(root) + " >= gang size");
  return Finish(BroadcastSteps(root, in, out));
}

Status Communicator::BroadcastSteps(uint32_t root, std::span<const std::byte> in,
                                    std::vector<std::byte>* data) {
  const uint32_t p = size();
  const uint32_t pos = Mod(int64_t{gang_.rank} - root, p);
  const bool last = pos + 1 == p;
  if (pos == 0) {
    const uint64_t n = in.size();
    if (p > 1) {
      RETURN_IF_ERROR(Send(Peer(1), &n, sizeof(n)));
      if (n > 0) RETURN_IF_ERROR(SendChunks(Peer(1), in.data(), n));
    }
    // The root's own copy, made while its chunks are on the wire.
    data->clear();
    SizeTensorBytesForOverwrite(data, in.size());
    if (!in.empty()) std::memcpy(data->data(), in.data(), in.size());
    return Status::Ok();
  }
  ASSIGN_OR_RETURN(zmq::message_t head, Recv(Peer(-1)));
  uint64_t n = 0;
  if (head.size() != sizeof(n)) return Status::Corruption("broadcast: bad size frame");
  std::memcpy(&n, head.data(), sizeof(n));
  if (!last) RETURN_IF_ERROR(Send(Peer(1), &n, sizeof(n)));
  SizeTensorBytesForOverwrite(data, n);  // every chunk is copied in
  if (n == 0) return Status::Ok();
  Status forward;
  RETURN_IF_ERROR(RecvChunks(Peer(-1), n, [&](size_t off, const zmq::message_t& m) {
    std::memcpy(data->data() + off, m.data(), m.size());
    // Pass each chunk on at once (from `data`, which outlives the send):
    // the chain is a pipeline.
    if (!last && forward.ok()) forward = Send(Peer(1), data->data() + off, m.size());
  }));
  return forward;
}

}  // namespace hmpmd::worker
