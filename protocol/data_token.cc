#include "hmpmd/protocol/data_token.h"

#include <sys/random.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "hmpmd/protocol/siphash.h"

namespace hmpmd {
namespace {

// Fills `out` from getrandom(2), which blocks only until the kernel's pool
// is first seeded (early boot). No fallback to a weaker source: a token
// anyone could guess protects nothing.
void FillRandom(void* out, size_t size) {
  auto* p = static_cast<unsigned char*>(out);
  while (size > 0) {
    const ssize_t got = getrandom(p, size, 0);
    if (got < 0) {
      if (errno == EINTR) continue;
      // ENOSYS on a kernel before 3.17: nothing sensible is left to do.
      std::fprintf(stderr, "hmpmd: getrandom failed: %s\n", std::strerror(errno));
      std::abort();
    }
    p += got;
    size -= static_cast<size_t>(got);
  }
}

int HexDigit(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

}  // namespace

DataToken NewDataToken() {
  DataToken t;
  while (t.empty()) {
    uint64_t words[2];
    FillRandom(words, sizeof(words));
    t.hi = words[0];
    t.lo = words[1];
  }
  return t;
}

bool SameDataToken(const DataToken& a, const DataToken& b) {
  // Every bit is looked at whatever differs first: the time of a refusal
  // tells nothing of how much of a guess was right.
  const uint64_t diff = (a.hi ^ b.hi) | (a.lo ^ b.lo);
  const uint64_t set = a.hi | a.lo;
  return static_cast<int>(diff == 0) & static_cast<int>(set != 0);
}

DataToken JobDataToken(const DataToken& cluster, JobId job) {
  if (cluster.empty()) return {};
  // Two 64-bit outputs, told apart by their last byte; the job's id in
  // little-endian order, so every host derives the same token.
  std::string message = "hmpmd-job-data";
  for (int i = 0; i < 4; ++i) message += static_cast<char>((job >> (8 * i)) & 0xff);
  DataToken t;
  t.hi = SipHash24(cluster.hi, cluster.lo, message + '\x01');
  t.lo = SipHash24(cluster.hi, cluster.lo, message + '\x02');
  if (t.empty()) t.lo = 1;  // 2^-128: "no token" stays unambiguous
  return t;
}

std::string DataTokenHex(const DataToken& t) {
  static constexpr char kDigits[] = "0123456789abcdef";
  std::string out(32, '0');
  for (int i = 0; i < 16; ++i) {
    out[15 - i] = kDigits[(t.hi >> (4 * i)) & 0xf];
    out[31 - i] = kDigits[(t.lo >> (4 * i)) & 0xf];
  }
  return out;
}

Result<DataToken> ParseDataToken(std::string_view hex) {
  if (hex.size() != 32) {
    return Status::InvalidArgument("data token: " + std::to_string(hex.size()) +
                                   " characters, want 32 hex digits");
  }
  DataToken t;
  for (size_t i = 0; i < 32; ++i) {
    const int d = HexDigit(hex[i]);
    if (d < 0) {
      return Status::InvalidArgument("data token: character " + std::to_string(i + 1) +
                                     " is not a hex digit");
    }
    uint64_t& word = i < 16 ? t.hi : t.lo;
    word = (word << 4) | static_cast<uint64_t>(d);
  }
  if (t.empty()) return Status::InvalidArgument("data token: all zero");
  return t;
}

}  // namespace hmpmd
