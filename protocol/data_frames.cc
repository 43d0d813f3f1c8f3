#include "hmpmd/protocol/data_frames.h"

#include <cstring>

#include "hmpmd/protocol/siphash.h"
#include "hmpmd/protocol/tensor_bytes.h"

namespace hmpmd {
namespace {

template <typename T>
void Put(std::string* out, T v) {
  out->append(reinterpret_cast<const char*>(&v), sizeof(v));
}

class Reader {
 public:
  Reader(const void* data, size_t size) : p_(static_cast<const char*>(data)), left_(size) {}
  template <typename T>
  bool Get(T* v) {
    if (left_ < sizeof(T)) return false;
    std::memcpy(v, p_, sizeof(T));
    p_ += sizeof(T);
    left_ -= sizeof(T);
    return true;
  }
  bool GetString(size_t n, std::string* s) {
    if (left_ < n) return false;
    s->assign(p_, n);
    p_ += n;
    left_ -= n;
    return true;
  }
  bool done() const { return left_ == 0; }

 private:
  const char* p_;
  size_t left_;
};

}  // namespace

Status CheckOutputMeta(const std::vector<Buffer>& buffers) {
  if (buffers.size() > kMaxOutputBuffers) {
    return Status::InvalidArgument(std::to_string(buffers.size()) + " output buffers, over the " +
                                   std::to_string(kMaxOutputBuffers) + " a task may return");
  }
  for (size_t i = 0; i < buffers.size(); ++i) {
    const Buffer& b = buffers[i];
    if (b.dtype.size() > kMaxDtypeBytes) {
      return Status::InvalidArgument("outputs[" + std::to_string(i) + "]: a dtype of " +
                                     std::to_string(b.dtype.size()) + " bytes, over the " +
                                     std::to_string(kMaxDtypeBytes) + " allowed");
    }
    if (b.shape.size() > kMaxRank) {
      return Status::InvalidArgument("outputs[" + std::to_string(i) + "]: a shape of " +
                                     std::to_string(b.shape.size()) + " dimensions, over the " +
                                     std::to_string(kMaxRank) + " allowed");
    }
  }
  return Status::Ok();
}

uint64_t StateKey(std::string_view submodel) {
  return SipHash24(0x68'6d'70'6d'64'2d'73'74ull, 0x61'74'65'2d'6b'65'79'00ull, submodel);
}

Result<DataHeader> ParseDataHeader(const void* data, size_t size) {
  DataHeader h;
  if (size != sizeof(h)) {
    return Status::Corruption("data frame header: " + std::to_string(size) + " bytes, want " +
                              std::to_string(sizeof(h)));
  }
  std::memcpy(&h, data, sizeof(h));
  if (h.op < 1 || h.op > static_cast<uint8_t>(DataOp::kFetchState)) {
    return Status::Corruption("data frame header: unknown op " + std::to_string(h.op));
  }
  return h;
}

namespace {
constexpr size_t kRunDoneBytes = sizeof(uint32_t) + sizeof(uint64_t) + sizeof(uint32_t);
}  // namespace

std::string EncodeRunDone(const RunDoneNotice& notice) {
  std::string out;
  out.reserve(sizeof(uint32_t) + notice.runs.size() * kRunDoneBytes + notice.endpoint.size());
  Put<uint32_t>(&out, static_cast<uint32_t>(notice.runs.size()));
  for (const RunDone& d : notice.runs) {
    Put<uint32_t>(&out, d.run);
    Put<uint64_t>(&out, d.bytes);
    Put<uint32_t>(&out, d.buffers);
  }
  out += notice.endpoint;
  return out;
}

Result<RunDoneNotice> DecodeRunDone(const void* data, size_t size) {
  const auto bad = [size] {
    return Status::Corruption("run-done notice: " + std::to_string(size) + " bytes, malformed");
  };
  Reader r(data, size);
  RunDoneNotice n;
  uint32_t count = 0;
  if (!r.Get(&count) || count == 0 || count > kMaxNoticeRuns) return bad();
  const size_t fixed = sizeof(count) + size_t{count} * kRunDoneBytes;
  if (size < fixed || size - fixed > kMaxNoticeEndpoint) return bad();
  n.runs.resize(count);
  for (RunDone& d : n.runs) {
    if (!r.Get(&d.run) || !r.Get(&d.bytes) || !r.Get(&d.buffers) || d.buffers > kMaxOutputBuffers) {
      return bad();
    }
  }
  if (!r.GetString(size - fixed, &n.endpoint)) return bad();
  return n;
}

namespace {

template <typename At>
std::string EncodeMetaOf(size_t n, const At& at) {
  std::string out;
  Put<uint32_t>(&out, static_cast<uint32_t>(n));
  for (size_t i = 0; i < n; ++i) {
    const Buffer& b = at(i);
    Put<uint32_t>(&out, static_cast<uint32_t>(b.dtype.size()));
    out += b.dtype;
    Put<uint32_t>(&out, static_cast<uint32_t>(b.shape.size()));
    for (int64_t d : b.shape) Put<int64_t>(&out, d);
    Put<uint64_t>(&out, b.data.size());
  }
  return out;
}

}  // namespace

std::string EncodeMeta(const std::vector<Buffer>& buffers) {
  return EncodeMetaOf(buffers.size(), [&](size_t i) -> const Buffer& { return buffers[i]; });
}

std::string EncodeMeta(const std::vector<std::shared_ptr<const Buffer>>& buffers) {
  return EncodeMetaOf(buffers.size(), [&](size_t i) -> const Buffer& { return *buffers[i]; });
}

Status DecodeMeta(const void* data, size_t size, std::vector<Buffer>* out,
                  std::vector<uint64_t>* sizes) {
  Reader r(data, size);
  uint32_t n = 0;
  if (!r.Get(&n) || n > kMaxOutputBuffers) return Status::Corruption("data meta: bad buffer count");
  out->assign(n, Buffer{});
  sizes->assign(n, 0);
  for (uint32_t i = 0; i < n; ++i) {
    uint32_t len = 0, rank = 0;
    if (!r.Get(&len) || len > kMaxDtypeBytes || !r.GetString(len, &(*out)[i].dtype) ||
        !r.Get(&rank) || rank > kMaxRank) {
      return Status::Corruption("data meta: bad dtype or rank of buffer " + std::to_string(i));
    }
    (*out)[i].shape.resize(rank);
    for (uint32_t d = 0; d < rank; ++d) {
      if (!r.Get(&(*out)[i].shape[d])) return Status::Corruption("data meta: truncated shape");
    }
    if (!r.Get(&(*sizes)[i])) return Status::Corruption("data meta: truncated size");
  }
  if (!r.done()) return Status::Corruption("data meta: trailing bytes");
  return Status::Ok();
}

Result<std::vector<Buffer>> DecodeFetchReply(const std::vector<FrameView>& frames,
                                             const std::string& what) {
  if (frames.empty()) return Status::Corruption(what + ": empty reply");
  ASSIGN_OR_RETURN(DataHeader reply, ParseDataHeader(frames[0].data, frames[0].size));
  if (reply.op == static_cast<uint8_t>(DataOp::kFetchError) && frames.size() == 2) {
    const std::string why(static_cast<const char*>(frames[1].data), frames[1].size);
    if (why.starts_with(kWrongDataTokenMessage)) return Status::PermissionDenied(what + ": " + why);
    if (why.starts_with(kStateNotCopyableMessage))
      return Status::InvalidArgument(what + ": " + why);
    return Status::NotFound(what + ": " + why);
  }
  if (reply.op != static_cast<uint8_t>(DataOp::kFetchReply) || frames.size() < 2) {
    return Status::Corruption(what + ": unexpected reply");
  }
  std::vector<Buffer> out;
  std::vector<uint64_t> sizes;
  RETURN_IF_ERROR(DecodeMeta(frames[1].data, frames[1].size, &out, &sizes));
  size_t next = 2;  // the frame to read
  for (size_t i = 0; i < out.size(); ++i) {
    if (sizes[i] == 0) {  // one empty frame
      if (next >= frames.size() || frames[next].size != 0) {
        return Status::Corruption(what + ": buffer " + std::to_string(i) + " size");
      }
      ++next;
      continue;
    }
    // Every byte is copied in: a recycled buffer serves (no zeroing).
    SizeTensorBytesForOverwrite(&out[i].data, sizes[i]);
    for (uint64_t got = 0; got < sizes[i]; ++next) {
      if (next >= frames.size()) return Status::Corruption(what + ": frame count");
      const FrameView& f = frames[next];
      if (f.size == 0 || f.size > sizes[i] - got) {
        return Status::Corruption(what + ": buffer " + std::to_string(i) + " size");
      }
      std::memcpy(out[i].data.data() + got, f.data, f.size);
      got += f.size;
    }
  }
  if (next != frames.size()) return Status::Corruption(what + ": frame count");
  return out;
}

}  // namespace hmpmd
