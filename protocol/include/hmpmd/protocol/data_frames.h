// The frames of the data plane: what workers (and drivers fetching outputs,
// hmpmd::client) send to workers' data sockets. The controller never sees
// them.
//
// Every header carries the data token (data_token.h): a worker serves a
// fetch only with a token it accepts, and answers a wrong one with a fetch
// error whose message starts with kWrongDataTokenMessage; other frames with a
// wrong token are dropped.
//
//   fetch request   [DataHeader{kFetch, job, run}]          counts one read
//   fetch, no read  [DataHeader{kFetchPeek, job, run}]      replied as kFetch
//   take a read     [DataHeader{kTakeRead, job, run}]       no reply
//   fetch reply     [DataHeader{kFetchReply}, meta, bytes0..., bytes1..., ...]
//   fetch error     [DataHeader{kFetchError}, message]
//   collective data [DataHeader{kCollective, src rank, tag}, payload]
//   runs done       [DataHeader{kRunDone, job}, notice]     worker -> driver,
//                                                           no reply
//   state load      [DataHeader{kFetchState, job, StateKey(sub-model)}]
//                                                           replied as kFetch
//                                                           (ActorState::Export)
//
// `meta` lists each buffer's dtype, shape and byte count (EncodeMeta). A
// buffer's bytes follow in one or more frames that add up to its count (a
// worker sends frames of at most kFetchChunkBytes; an empty buffer is one
// empty frame). Small frames keep the receiver's allocations on its heap,
// which reuses them, where one 64 MB frame would be a fresh mapping to
// fault in page by page on every fetch. Headers are a fixed little-endian
// struct: both ends are this same code.
//
// Thread-safety: plain functions on values.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "hmpmd/protocol/buffer.h"
#include "hmpmd/protocol/data_token.h"
#include "hmpmd/protocol/status.h"

namespace hmpmd {

// kFetchPeek and kTakeRead split a fetch in two: a worker fetches a task's
// inputs without counting reads, and takes them once the task runs with
// every input (so a task dropped or failed before it ran leaves the
// outputs to whoever runs it next).
enum class DataOp : uint8_t {
  kFetch = 1,
  kFetchReply = 2,
  kFetchError = 3,
  kCollective = 4,
  kFetchPeek = 5,
  kTakeRead = 6,
  kRunDone = 7,
  kFetchState = 8,
};

// What a state load's header carries in `run`: its sub-model's name,
// hashed (SipHash-2-4 under a fixed key; two names of one job colliding
// is a 1 in 2^64 chance per pair).
uint64_t StateKey(std::string_view submodel);

// The largest frame of a fetch reply that a worker sends.
inline constexpr size_t kFetchChunkBytes = size_t{1} << 20;

struct DataHeader {
  uint8_t op = 0;
  uint8_t reserved[3] = {};
  uint32_t src = 0;  // collective: sender's rank
  uint64_t key = 0;  // fetch: job; collective: gang tag
  uint64_t run = 0;  // fetch: producer run
  DataToken token;   // the controller's data token (see above)
};
static_assert(sizeof(DataHeader) == 40);

// The message of the fetch error a worker answers a wrong token with; a
// fetch that gets it fails with PermissionDenied (DecodeFetchReply).
inline constexpr std::string_view kWrongDataTokenMessage = "refused: wrong data token";
// How the fetch error of a state load begins when the holder has the state
// but cannot copy it (ActorState::Export); the load fails with
// InvalidArgument, which no other holder would answer differently.
inline constexpr std::string_view kStateNotCopyableMessage = "cannot be copied: ";

// Reads a header frame; Corruption when it has the wrong size or op.
Result<DataHeader> ParseDataHeader(const void* data, size_t size);

// What a worker tells a driver of its session's runs done (kRunDone),
// beside its DoneBatch to the controller, so that the driver's Futures
// resolve one hop sooner: each run with its outputs' size as TaskEnded
// gives it, and where they are kept. The runs of one wake-up of the
// worker go in one notice.
struct RunDone {
  uint32_t run = 0;
  uint64_t bytes = 0;
  uint32_t buffers = 0;
};
struct RunDoneNotice {
  std::string endpoint;  // the worker's data socket
  std::vector<RunDone> runs;
};
// Longest endpoint, and most runs, a notice carries.
inline constexpr size_t kMaxNoticeEndpoint = 256;
inline constexpr size_t kMaxNoticeRuns = 2048;
// A notice's largest size (a driver's data socket takes no larger frame).
inline constexpr size_t kMaxNoticeBytes =
    sizeof(uint32_t) + kMaxNoticeRuns * (sizeof(uint32_t) + sizeof(uint64_t) + sizeof(uint32_t)) +
    kMaxNoticeEndpoint;
std::string EncodeRunDone(const RunDoneNotice& notice);
// Corruption when `data` is not one EncodeRunDone made.
Result<RunDoneNotice> DecodeRunDone(const void* data, size_t size);

// Most buffers one task may output, characters of a dtype, dimensions of
// a shape: the bounds DecodeMeta holds a fetch reply to.
inline constexpr uint32_t kMaxOutputBuffers = 1 << 16;
inline constexpr uint32_t kMaxDtypeBytes = 64;
inline constexpr uint32_t kMaxRank = 32;
// InvalidArgument naming the first bound `buffers` breaks ("100000 output
// buffers, over the 65536 a task may return"), else Ok: outputs that pass
// can be fetched by any worker or driver.
Status CheckOutputMeta(const std::vector<Buffer>& buffers);
// dtype and shape of each buffer, and its byte count.
std::string EncodeMeta(const std::vector<Buffer>& buffers);
std::string EncodeMeta(const std::vector<std::shared_ptr<const Buffer>>& buffers);
// Fills `out` with one Buffer per meta entry (shape, dtype and the byte
// count each must have, returned in `sizes`). Corruption when malformed.
Status DecodeMeta(const void* data, size_t size, std::vector<Buffer>* out,
                  std::vector<uint64_t>* sizes);

// One received frame, viewed.
struct FrameView {
  const void* data;
  size_t size;
};
// The buffers of a fetch reply (header, meta, each buffer's frames), copied
// out of `frames`. NotFound for a fetch error (its message after `what`),
// PermissionDenied for one refusing the token (kWrongDataTokenMessage), Corruption
// for anything malformed, InvalidArgument for a state that cannot be copied
// (kStateNotCopyableMessage); `what` prefixes every message.
Result<std::vector<Buffer>> DecodeFetchReply(const std::vector<FrameView>& frames,
                                             const std::string& what);

}  // namespace hmpmd
