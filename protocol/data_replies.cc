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
void Release(void*, void* hint) {
  delete static_cast<std::shared_ptr<const std::vector<Buffer>>*>(hint);
}

}  // namespace

void SendFetchError(zmq::socket_t& s, uint64_t key, uint64_t run, std::string_view why) {
  s.send(HeaderFrame(DataOp::kFetchError, key, run), zmq::send_flags::sndmore);
  s.send(zmq::buffer(why.data(), why.size()), zmq::send_flags::none);
}

void SendFetchReply(zmq::socket_t& s, uint64_t key, uint64_t run,
                    const std::shared_ptr<const std::vector<Buffer>>& data) {
  s.send(HeaderFrame(DataOp::kFetchReply, key, run), zmq::send_flags::sndmore);
  const std::string meta = EncodeMeta(*data);
  s.send(zmq::buffer(meta), data->empty() ? zmq::send_flags::none : zmq::send_flags::sndmore);
  for (size_t i = 0; i < data->size(); ++i) {
    const Buffer& b = (*data)[i];
    const bool last_buffer = i + 1 == data->size();
    if (b.data.empty()) {
      s.send(zmq::message_t(), last_buffer ? zmq::send_flags::none : zmq::send_flags::sndmore);
      continue;
    }
    for (size_t off = 0; off < b.data.size(); off += kFetchChunkBytes) {
      const size_t len = std::min(kFetchChunkBytes, b.data.size() - off);
      auto* hold = new std::shared_ptr<const std::vector<Buffer>>(data);
      zmq::message_t frame(const_cast<std::byte*>(b.data.data()) + off, len, Release, hold);
      const bool last = last_buffer && off + len == b.data.size();
      s.send(frame, last ? zmq::send_flags::none : zmq::send_flags::sndmore);
    }
  }
}

}  // namespace hmpmd
