// SipHash-2-4 (Aumasson and Bernstein, "SipHash: a fast short-input PRF",
// 2012): a keyed pseudo-random function of short messages, here to derive
// a job's data token from the cluster's (JobDataToken, data_token.h)
// without a cryptography library.
//
// Thread-safety: a pure function.
#pragma once

#include <cstdint>
#include <string_view>

namespace hmpmd {

// The 64-bit SipHash-2-4 of `message` under the 128-bit key (k0, k1), each
// half read little-endian from the key's bytes as the paper does.
uint64_t SipHash24(uint64_t k0, uint64_t k1, std::string_view message);

}  // namespace hmpmd
