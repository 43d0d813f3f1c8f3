// The frames of the data plane: what workers (and drivers fetching outputs,
// hmpmd::client) send to workers' data sockets. The controller never sees
// them.
//
//   fetch request   [DataHeader{kFetch, job, run}]
//   fetch reply     [DataHeader{kFetchReply}, meta, bytes0, bytes1, ...]
//   fetch error     [DataHeader{kFetchError}, message]
//   collective data [DataHeader{kCollective, src rank, tag}, payload]
//
// `meta` lists each buffer's dtype and shape (EncodeMeta). Headers are a
// fixed little-endian struct: both ends are this same code.
//
// Thread-safety: plain functions on values.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "hmpmd/protocol/buffer.h"
#include "hmpmd/protocol/status.h"

namespace hmpmd {

enum class DataOp : uint8_t { kFetch = 1, kFetchReply = 2, kFetchError = 3, kCollective = 4 };

struct DataHeader {
  uint8_t op = 0;
  uint8_t reserved[3] = {};
  uint32_t src = 0;  // collective: sender's rank
  uint64_t key = 0;  // fetch: job; collective: gang tag
  uint64_t run = 0;  // fetch: producer run
};
static_assert(sizeof(DataHeader) == 24);

// Reads a header frame; Corruption when it has the wrong size or op.
Result<DataHeader> ParseDataHeader(const void* data, size_t size);

// dtype and shape of each buffer, and its byte count.
std::string EncodeMeta(const std::vector<Buffer>& buffers);
// Fills `out` with one Buffer per meta entry (shape, dtype and the byte
// count each must have, returned in `sizes`). Corruption when malformed.
Status DecodeMeta(const void* data, size_t size, std::vector<Buffer>* out,
                  std::vector<uint64_t>* sizes);

// One received frame, viewed.
struct FrameView {
  const void* data;
  size_t size;
};
// The buffers of a fetch reply (header, meta, one frame per buffer), copied
// out of `frames`. NotFound for a fetch error (its message after `what`),
// Corruption for anything malformed; `what` prefixes every message.
Result<std::vector<Buffer>> DecodeFetchReply(const std::vector<FrameView>& frames,
                                             const std::string& what);

}  // namespace hmpmd
