#include "hmpmd/scheduler/learned_outputs.h"

#include <algorithm>
#include <cmath>

namespace hmpmd {

void LearnedOutputs::Observe(uint32_t kernel, uint64_t input_bytes, uint64_t output_bytes) {
  std::vector<Seen>& seen = seen_[kernel];
  for (Seen& s : seen) {
    if (s.input == input_bytes) {
      s.output = output_bytes;  // the latest run speaks for its size
      return;
    }
  }
  if (seen.size() == kSizesKept) seen.erase(seen.begin());
  seen.push_back({input_bytes, output_bytes});
}

std::optional<uint64_t> LearnedOutputs::Guess(uint32_t kernel, uint64_t input_bytes) const {
  auto it = seen_.find(kernel);
  if (it == seen_.end() || it->second.empty()) return std::nullopt;
  const auto distance = [input_bytes](const Seen& s) {
    return s.input > input_bytes ? s.input - input_bytes : input_bytes - s.input;
  };
  const Seen& near =
      *std::min_element(it->second.begin(), it->second.end(),
                        [&](const Seen& a, const Seen& b) { return distance(a) < distance(b); });
  if (near.input == input_bytes || near.input == 0 || input_bytes == 0) return near.output;
  const long double scaled =
      static_cast<long double>(near.output) * input_bytes / static_cast<long double>(near.input);
  constexpr long double kMax = static_cast<long double>(UINT64_MAX / 2);
  return static_cast<uint64_t>(std::ceil(std::min(scaled, kMax)));
}

}  // namespace hmpmd
