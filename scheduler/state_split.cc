#include "hmpmd/scheduler/state_split.h"

#include <algorithm>
#include <queue>
#include <utility>

namespace hmpmd {
namespace {

uint32_t Rounds(uint32_t shards, uint32_t c) { return (shards + c - 1) / c; }

// The smallest count above `c` worth more devices than `c`.
uint32_t NextCount(const PartDemand& part, uint32_t c) {
  if (part.shards == 0 || c >= part.shards) return c + 1;
  const uint32_t rounds = Rounds(part.shards, c) - 1;  // one round fewer
  return (part.shards + rounds - 1) / rounds;
}

}  // namespace

double PartThroughput(const PartDemand& part, uint32_t c) {
  if (c == 0) return 0;
  if (part.shards == 0 || c >= part.shards) return c;
  return static_cast<double>(part.shards) / Rounds(part.shards, c);
}

std::vector<uint32_t> SplitByWork(const std::vector<PartDemand>& parts, uint32_t devices) {
  std::vector<uint32_t> cap(parts.size(), 1);
  int64_t left = static_cast<int64_t>(devices) - static_cast<int64_t>(parts.size());
  // (load, part): the most loaded first; ties to the lower index.
  using Entry = std::pair<double, int64_t>;
  std::priority_queue<Entry> queue;
  auto load = [&](size_t p) { return parts[p].work / PartThroughput(parts[p], cap[p]); };
  for (size_t p = 0; p < parts.size(); ++p) queue.push({load(p), -static_cast<int64_t>(p)});
  while (left > 0 && !queue.empty()) {
    const auto p = static_cast<size_t>(-queue.top().second);
    queue.pop();
    const uint32_t next = NextCount(parts[p], cap[p]);
    // Steps below the shard count only grow, so a part whose next one does
    // not fit never gets another.
    if (parts[p].work <= 0 || next > std::max(1u, parts[p].width) || next - cap[p] > left) {
      continue;  // no work to share, at its width, or the pool is short
    }
    left -= next - cap[p];
    cap[p] = next;
    queue.push({load(p), -static_cast<int64_t>(p)});
  }
  return cap;
}

}  // namespace hmpmd
