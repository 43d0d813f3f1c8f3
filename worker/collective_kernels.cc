#include "collective_kernels.h"

#include <charconv>
#include <cstring>
#include <stdexcept>
#include <string>

#include "hmpmd/protocol/tensor_bytes.h"

namespace hmpmd::worker {
namespace {

// 1 GiB of floats bounds a typo, not a real collective.
constexpr int64_t kMaxElements = int64_t{1} << 28;

Buffer ByteBufferAsF32(std::vector<std::byte> bytes) {
  Buffer b;
  b.dtype = "f32";
  b.shape = {static_cast<int64_t>(bytes.size() / sizeof(float))};
  b.data = std::move(bytes);
  return b;
}

void Check(const Status& s) {
  if (!s.ok()) throw CollectiveError(s);
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
    // A count over the element limit also keeps `total` from wrapping
    // around to n (the blocks would then run past the buffer).
    // A comma must be followed by a count ("1,3," is not a list).
    if (ec != std::errc() || v > static_cast<size_t>(kMaxElements) ||
        (next < end && next + 1 == end && *next == ',')) {
      throw std::invalid_argument(
          "alltoall: argument 'sizes' must be 'a,b,...' of counts up to 2^28");
    }
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

// Elements of a member without inputs: argument `n`, or `bytes` / 4.
size_t GeneratedCount(const KernelArgs& args) {
  // A present argument of the wrong type reads as -1 and fails below.
  int64_t n = args.Has("n")       ? args.Int("n", -1)
              : args.Has("bytes") ? args.Int("bytes", -4) / 4
                                  : 4096 / 4;
  if (n < 0 || n > kMaxElements) {
    throw std::invalid_argument("collective: argument 'n' must be in [0, 2^28]");
  }
  return static_cast<size_t>(n);
}

float Generated(size_t i, uint32_t rank) { return static_cast<float>(i % 251) * 0.5f + rank; }

}  // namespace

std::vector<float> CollectiveInput(const KernelArgs& args, std::span<const Buffer> inputs,
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
  v.resize(GeneratedCount(args));
  for (size_t i = 0; i < v.size(); ++i) v[i] = Generated(i, rank);
  return v;
}

std::span<const std::byte> CollectiveBytes(const KernelArgs& args, std::span<const Buffer> inputs,
                                           uint32_t rank, std::vector<std::byte>* scratch) {
  const Buffer* only = nullptr;
  size_t filled = 0, bytes = 0;
  for (const Buffer& b : inputs) {
    if (b.data.empty()) continue;
    only = &b;
    ++filled;
    bytes += b.data.size();
  }
  const size_t whole = bytes / sizeof(float) * sizeof(float);  // a partial float is dropped
  if (filled == 1) return std::span<const std::byte>(only->data).first(whole);
  if (!inputs.empty()) {
    SizeTensorBytesForOverwrite(scratch, bytes);
    size_t off = 0;
    for (const Buffer& b : inputs) {
      if (b.data.empty()) continue;
      std::memcpy(scratch->data() + off, b.data.data(), b.data.size());
      off += b.data.size();
    }
    scratch->resize(whole);
    return *scratch;
  }
  const size_t n = GeneratedCount(args);
  SizeTensorBytesForOverwrite(scratch, n * sizeof(float));
  for (size_t i = 0; i < n; ++i) {
    const float v = Generated(i, rank);
    std::memcpy(scratch->data() + i * sizeof(float), &v, sizeof(float));
  }
  return *scratch;
}

BufferList RunCollective(std::string_view kernel, const KernelArgs& args,
                         std::span<const Buffer> inputs, Communicator& comm) {
  // The members' data is read where it lies: a single input buffer (the
  // usual case) is sent from and reduced from in place; several are
  // joined once, and generated data is made once, into `scratch`.
  std::vector<std::byte> scratch;
  const std::span<const std::byte> bytes = CollectiveBytes(args, inputs, comm.rank(), &scratch);
  const bool in_scratch = !scratch.empty() && bytes.data() == scratch.data();
  BufferList out;
  if (kernel == "allreduce") {
    // Reduced straight into the output buffer; data of our own (scratch)
    // becomes the output and is reduced in place.
    std::vector<std::byte> sum;
    if (in_scratch) {
      sum = std::move(scratch);
    } else {
      // Every segment of the output is written by the ring (Communicator).
      SizeTensorBytesForOverwrite(&sum, bytes.size());
    }
    Check(comm.AllReduce(in_scratch ? std::span<const std::byte>(sum) : bytes, sum));
    out.push_back(ByteBufferAsF32(std::move(sum)));
  } else if (kernel == "reduce_scatter") {
    std::vector<std::byte> seg;
    Check(comm.ReduceScatter(bytes, &seg));
    out.push_back(ByteBufferAsF32(std::move(seg)));
  } else if (kernel == "allgather") {
    std::vector<std::byte> all;
    Check(comm.AllGather(bytes, &all));
    out.push_back(ByteBufferAsF32(std::move(all)));
  } else if (kernel == "alltoall") {
    const std::vector<size_t> sizes = Sizes(args, bytes.size() / sizeof(float), comm.size());
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
    const int64_t root = args.Has("root") ? args.Int("root", -1) : 0;
    if (root < 0 || root >= comm.size()) {
      throw std::invalid_argument("broadcast: argument 'root' must be a rank of the gang");
    }
    std::vector<std::byte> buf;
    Check(comm.Broadcast(static_cast<uint32_t>(root), bytes, &buf));
    out.push_back(ByteBufferAsF32(std::move(buf)));
  } else {
    throw std::invalid_argument("'" + std::string(kernel) + "' is not a collective kernel");
  }
  RecycleTensorBytes(&scratch);  // joined or generated data not moved into the output
  return out;
}

}  // namespace hmpmd::worker
