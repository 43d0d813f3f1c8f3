#include "hmpmd/protocol/data_replies.h"

#include <algorithm>
#include <string>

#include "hmpmd/protocol/data_frames.h"

namespace hmpmd {
namespace {

zmq::message_t HeaderFrame(DataOp op, uint64_t key, uint64_t run) {
  DataHeader h;
  h.op = static_cast<uint8_t>(op);
  h.key = key;
  h.run = run;
  return zmq::message_t(&h, sizeof(h));
}

// Frees the reference a zero-copy frame held on the buffers it points into.
void Release(void*, void* hint) { delete static_cast<std::shared_ptr<const void>*>(hint); }

// The reply's frames after its header: `meta`, then each of the `n`
// buffers at(i) in frames that point into it, each holding keeper(i).
template <typename At, typename Keeper>
void SendBuffers(zmq::socket_t& s, const std::string& meta, size_t n, const At& at,
                 const Keeper& keeper) {
  s.send(zmq::buffer(meta), n == 0 ? zmq::send_flags::none : zmq::send_flags::sndmore);
  for (size_t i = 0; i < n; ++i) {
    const Buffer& b = at(i);
    const bool last_buffer = i + 1 == n;
    if (b.data.empty()) {
      s.send(zmq::message_t(), last_buffer ? zmq::send_flags::none : zmq::send_flags::sndmore);
      continue;
    }
    for (size_t off = 0; off < b.data.size(); off += kFetchChunkBytes) {
      const size_t len = std::min(kFetchChunkBytes, b.data.size() - off);
      auto* hold = new std::shared_ptr<const void>(keeper(i));
      zmq::message_t frame(const_cast<std::byte*>(b.data.data()) + off, len, Release, hold);
      const bool last = last_buffer && off + len == b.data.size();
      s.send(frame, last ? zmq::send_flags::none : zmq::send_flags::sndmore);
    }
  }
}

}  // namespace

void SendFetchError(zmq::socket_t& s, uint64_t key, uint64_t run, std::string_view why) {
  s.send(HeaderFrame(DataOp::kFetchError, key, run), zmq::send_flags::sndmore);
  s.send(zmq::buffer(why.data(), why.size()), zmq::send_flags::none);
}

void SendFetchReply(zmq::socket_t& s, uint64_t key, uint64_t run,
                    const std::shared_ptr<const std::vector<Buffer>>& data) {
  s.send(HeaderFrame(DataOp::kFetchReply, key, run), zmq::send_flags::sndmore);
  SendBuffers(
      s, EncodeMeta(*data), data->size(), [&](size_t i) -> const Buffer& { return (*data)[i]; },
      [&](size_t) { return std::shared_ptr<const void>(data); });
}

void SendFetchReply(zmq::socket_t& s, uint64_t key, uint64_t run,
                    const std::vector<std::shared_ptr<const Buffer>>& buffers) {
  s.send(HeaderFrame(DataOp::kFetchReply, key, run), zmq::send_flags::sndmore);
  SendBuffers(
      s, EncodeMeta(buffers), buffers.size(),
      [&](size_t i) -> const Buffer& { return *buffers[i]; },
      [&](size_t i) { return std::shared_ptr<const void>(buffers[i]); });
}

}  // namespace hmpmd
