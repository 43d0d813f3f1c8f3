// LearnedOutputs: the bytes a worker's own kernel stores, learned from its
// runs. The spec cannot tell them (GuessOutputBytes knows only the built-in
// kernels), and placement under a store cap needs a figure before the run.
//
// Per kernel it keeps what runs stored by the bytes of their inputs (up to
// kSizesKept input sizes; the same shapes come back every step and
// micro-batch). A guess is the output of a run with the same input bytes;
// else that of the nearest input size seen, scaled by the input bytes (a
// kernel's output grows with its input far more often than not).
// Thread-safety: not thread-safe; owned by the scheduler's single thread.
#pragma once

#include <cstdint>
#include <optional>
#include <unordered_map>
#include <vector>

namespace hmpmd {

class LearnedOutputs {
 public:
  static constexpr size_t kSizesKept = 64;

  // A run of `kernel` (an interned kernel id) with `input_bytes` of inputs
  // stored `output_bytes`.
  void Observe(uint32_t kernel, uint64_t input_bytes, uint64_t output_bytes);
  // The bytes a run with `input_bytes` of inputs would store; nullopt when
  // no run of `kernel` was seen.
  std::optional<uint64_t> Guess(uint32_t kernel, uint64_t input_bytes) const;

 private:
  struct Seen {
    uint64_t input = 0;
    uint64_t output = 0;
  };
  // Per kernel, in the order sizes were first seen; when full, the oldest
  // size gives way.
  std::unordered_map<uint32_t, std::vector<Seen>> seen_;
};

}  // namespace hmpmd
