#include "collective_kernels.h"

#include <charconv>
#include <cstring>
#include <stdexcept>
#include <string>

namespace hmpmd::worker {
namespace {

// 1 GiB of floats bounds a typo, not a real collective.
constexpr int64_t kMaxElements = int64_t{1} << 28;

Buffer F32Buffer(std::span<const float> v) {
  Buffer b;
  b.dtype = "f32";
  b.shape = {static_cast<int64_t>(v.size())};
  b.data.resize(v.size_bytes());
  if (!v.empty()) std::memcpy(b.data.data(), v.data(), v.size_bytes());
  return b;
}

Buffer ByteBufferAsF32(std::vector<std::byte> bytes) {
  Buffer b;
  b.dtype = "f32";
  b.shape = {static_cast<int64_t>(bytes.size() / sizeof(float))};
  b.data = std::move(bytes);
  return b;
}

void Check(const Status& s) {
  if (!s.ok()) throw std::runtime_error(s.ToString());
}

std::vector<size_t> Sizes(const KernelArgs& args, size_t n, uint32_t p) {
  std::vector<size_t> sizes;
  const std::string text = args.String("sizes", "");
  if (text.empty()) {
    for (uint32_t i = 0; i < p; ++i) sizes.push_back(n * (i + 1) / p - n * i / p);
    return sizes;
  }
  size_t total = 0;
  const char* c = text.data();
  const char* end = c + text.size();
  while (c < end) {
    size_t v = 0;
    auto [next, ec] = std::from_chars(c, end, v);
    if (ec != std::errc())
      throw std::invalid_argument("alltoall: argument 'sizes' must be 'a,b,...'");
    sizes.push_back(v);
    total += v;
    c = next;
    if (c < end && *c == ',') ++c;
  }
  if (sizes.size() != p || total != n) {
    throw std::invalid_argument("alltoall: argument 'sizes' needs " + std::to_string(p) +
                                " counts summing to the " + std::to_string(n) + " elements");
  }
  return sizes;
}

}  // namespace

std::vector<float> CollectiveInput(const KernelArgs& args, const BufferList& inputs,
                                   uint32_t rank) {
  std::vector<float> v;
  if (!inputs.empty()) {
    size_t bytes = 0;
    for (const Buffer& b : inputs) bytes += b.data.size();
    v.resize(bytes / sizeof(float));
    size_t off = 0;
    for (const Buffer& b : inputs) {
      if (b.data.empty()) continue;
      std::memcpy(reinterpret_cast<std::byte*>(v.data()) + off, b.data.data(),
                  std::min(b.data.size(), v.size() * sizeof(float) - off));
      off += b.data.size();
    }
    return v;
  }
  int64_t n = args.Int("n", -1);
  if (n < 0) n = args.Int("bytes", 4096) / 4;
  if (n < 0 || n > kMaxElements) {
    throw std::invalid_argument("collective: argument 'n' must be in [0, 2^28]");
  }
  v.resize(static_cast<size_t>(n));
  for (size_t i = 0; i < v.size(); ++i) v[i] = static_cast<float>(i % 251) * 0.5f + rank;
  return v;
}

BufferList RunCollective(std::string_view kernel, const KernelArgs& args, const BufferList& inputs,
                         Communicator& comm) {
  std::vector<float> data = CollectiveInput(args, inputs, comm.rank());
  const std::span<const std::byte> bytes = std::as_bytes(std::span<const float>(data));
  BufferList out;
  if (kernel == "allreduce") {
    Check(comm.AllReduce(data));
    out.push_back(F32Buffer(data));
  } else if (kernel == "reduce_scatter") {
    std::vector<float> seg;
    Check(comm.ReduceScatter(data, &seg));
    out.push_back(F32Buffer(seg));
  } else if (kernel == "allgather") {
    std::vector<std::byte> all;
    Check(comm.AllGather(bytes, &all));
    out.push_back(ByteBufferAsF32(std::move(all)));
  } else if (kernel == "alltoall") {
    const std::vector<size_t> sizes = Sizes(args, data.size(), comm.size());
    std::vector<std::span<const std::byte>> blocks;
    size_t off = 0;
    for (size_t s : sizes) {
      blocks.push_back(bytes.subspan(off * sizeof(float), s * sizeof(float)));
      off += s;
    }
    std::vector<std::byte> got;
    std::vector<size_t> recv_sizes;
    Check(comm.AllToAll(blocks, &got, &recv_sizes));
    out.push_back(ByteBufferAsF32(std::move(got)));
  } else if (kernel == "broadcast") {
    const int64_t root = args.Int("root", 0);
    if (root < 0 || root >= comm.size()) {
      throw std::invalid_argument("broadcast: argument 'root' must be a rank of the gang");
    }
    std::vector<std::byte> buf(bytes.begin(), bytes.end());
    Check(comm.Broadcast(static_cast<uint32_t>(root), &buf));
    out.push_back(ByteBufferAsF32(std::move(buf)));
  } else {
    throw std::invalid_argument("'" + std::string(kernel) + "' is not a collective kernel");
  }
  return out;
}

}  // namespace hmpmd::worker
