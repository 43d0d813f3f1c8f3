#include "hmpmd/protocol/siphash.h"

#include <bit>
#include <cstring>

namespace hmpmd {
namespace {

struct State {
  uint64_t v0, v1, v2, v3;
  void Round() {
    v0 += v1;
    v1 = std::rotl(v1, 13) ^ v0;
    v0 = std::rotl(v0, 32);
    v2 += v3;
    v3 = std::rotl(v3, 16) ^ v2;
    v0 += v3;
    v3 = std::rotl(v3, 21) ^ v0;
    v2 += v1;
    v1 = std::rotl(v1, 17) ^ v2;
    v2 = std::rotl(v2, 32);
  }
  void Absorb(uint64_t m) {
    v3 ^= m;
    Round();
    Round();
    v0 ^= m;
  }
};

// Little-endian, whatever the host's order.
uint64_t ReadLe(const unsigned char* p, size_t n) {
  uint64_t v = 0;
  for (size_t i = 0; i < n; ++i) v |= uint64_t{p[i]} << (8 * i);
  return v;
}

}  // namespace

uint64_t SipHash24(uint64_t k0, uint64_t k1, std::string_view message) {
  State s{k0 ^ 0x736f6d6570736575ULL, k1 ^ 0x646f72616e646f6dULL, k0 ^ 0x6c7967656e657261ULL,
          k1 ^ 0x7465646279746573ULL};
  const auto* p = reinterpret_cast<const unsigned char*>(message.data());
  const size_t n = message.size();
  size_t i = 0;
  for (; i + 8 <= n; i += 8) s.Absorb(ReadLe(p + i, 8));
  // The last block: the bytes left, and the length's low byte on top.
  s.Absorb(ReadLe(p + i, n - i) | (uint64_t{n & 0xff} << 56));
  s.v2 ^= 0xff;
  for (int r = 0; r < 4; ++r) s.Round();
  return s.v0 ^ s.v1 ^ s.v2 ^ s.v3;
}

}  // namespace hmpmd
