// What a data server answers a fetch with (the frames in data_frames.h),
// after the peer's routing frame: a worker's data socket and a driver's put
// server send the same replies.
// Thread-safety: as the socket, used by its one thread.
#pragma once

#include <cstdint>
#include <memory>
#include <string_view>
#include <vector>
#include <zmq.hpp>

#include "hmpmd/protocol/buffer.h"

namespace hmpmd {

// [DataHeader{kFetchError, key, run}, why].
void SendFetchError(zmq::socket_t& s, uint64_t key, uint64_t run, std::string_view why);

// [DataHeader{kFetchReply, key, run}, meta, bytes...]: each buffer in
// frames of at most kFetchChunkBytes that point into `data` (no copy) and
// keep it alive until ZeroMQ has sent them.
void SendFetchReply(zmq::socket_t& s, uint64_t key, uint64_t run,
                    const std::shared_ptr<const std::vector<Buffer>>& data);
// The same from buffers each kept alive by its own pointer (an actor
// state's immutable snapshots, sent without a copy).
void SendFetchReply(zmq::socket_t& s, uint64_t key, uint64_t run,
                    const std::vector<std::shared_ptr<const Buffer>>& buffers);

}  // namespace hmpmd
