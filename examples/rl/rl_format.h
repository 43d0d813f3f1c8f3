// The buffers the RL kernels exchange, shared by the kernels (rl_kernels.cc)
// and the C++ driver (rl_driver.cc). The Python driver reads the same
// layouts with memoryview(buffer).tolist().
//
//   weights   f32 {P}                 the policy: outputs 0..2 of rl.init and rl.train are
//   version   i64 {1}                 weights, version (0 from rl.init, +1 per rl.train)
//   (record)                          and the record below
//   rollout   i64 {kRolloutFields}    id, weights version used, busy us, tokens
//             f32 {tokens}            the trajectory
//   scored    i64 {kRolloutFields}    the rollout's fields, passed on by rl.reward
//             f32 {1}                 its reward
//   record    i64 {3 + 3 * B}         new version, busy us, B, then (id, version, busy us)
//                                     per rollout (rl.init: version 0, 0, 0)
//
// Thread-safety: plain functions of their arguments.
#pragma once

#include <cstdint>
#include <cstring>
#include <stdexcept>
#include <string>
#include <vector>

#include "hmpmd/protocol/buffer.h"

namespace rl {

inline constexpr size_t kRolloutFields = 4;  // id, version, busy_us, tokens
inline constexpr size_t kRecordHeader = 3;   // version, busy_us, batch
inline constexpr size_t kRecordFields = 3;   // per rollout: id, version, busy_us

inline hmpmd::Buffer I64(const std::vector<int64_t>& v) {
  hmpmd::Buffer b;
  b.dtype = "i64";
  b.shape = {static_cast<int64_t>(v.size())};
  b.data.resize(v.size() * sizeof(int64_t));
  if (!v.empty()) std::memcpy(b.data.data(), v.data(), b.data.size());
  return b;
}

inline hmpmd::Buffer F32(const std::vector<float>& v) {
  hmpmd::Buffer b;
  b.dtype = "f32";
  b.shape = {static_cast<int64_t>(v.size())};
  b.data.resize(v.size() * sizeof(float));
  if (!v.empty()) std::memcpy(b.data.data(), v.data(), b.data.size());
  return b;
}

// The elements of an i64 buffer; throws std::invalid_argument naming `what`
// for another dtype.
inline std::vector<int64_t> ReadI64(const hmpmd::Buffer& b, const std::string& what) {
  if (b.dtype != "i64" || b.data.size() % sizeof(int64_t) != 0) {
    throw std::invalid_argument(what + ": expected an i64 buffer, got dtype '" + b.dtype + "'");
  }
  std::vector<int64_t> v(b.data.size() / sizeof(int64_t));
  if (!v.empty()) std::memcpy(v.data(), b.data.data(), b.data.size());
  return v;
}

inline std::vector<float> ReadF32(const hmpmd::Buffer& b, const std::string& what) {
  if (b.dtype != "f32" || b.data.size() % sizeof(float) != 0) {
    throw std::invalid_argument(what + ": expected an f32 buffer, got dtype '" + b.dtype + "'");
  }
  std::vector<float> v(b.data.size() / sizeof(float));
  if (!v.empty()) std::memcpy(v.data(), b.data.data(), b.data.size());
  return v;
}

}  // namespace rl
