#include "hmpmd/scheduler/state_shards.h"

#include <algorithm>
#include <variant>

namespace hmpmd {
int64_t ShardArgOf(const TaskSpec& t) {
  for (const auto& [k, v] : t.args) {
    if (k != "shard") continue;
    if (const auto* i = std::get_if<int64_t>(&v)) return *i >= 0 && *i < 2147483647 ? *i : -1;
    if (const auto* d = std::get_if<double>(&v)) {
      return *d >= 0 && *d < 2147483647.0 ? static_cast<int64_t>(*d) : -1;
    }
    return -1;
  }
  return -1;
}

uint32_t StatePartOf(const SubmodelSpec& sm, const TaskSpec& t) {
  const int64_t shard = ShardArgOf(t);
  return shard < 0 ? 0 : static_cast<uint32_t>(shard) % std::max(1u, sm.state_shards);
}

std::vector<double> StateBytesPerDevice(const std::vector<SubmodelSpec>& submodels) {
  std::vector<double> bytes(submodels.size(), 0);
  for (size_t s = 0; s < submodels.size(); ++s) {
    const SubmodelSpec& sm = submodels[s];
    if (sm.state_bytes > 0) bytes[s] = sm.state_bytes / std::max(1u, sm.state_shards);
  }
  return bytes;
}

}  // namespace hmpmd
