#include "hmpmd/scheduler/lane_order.h"

#include <algorithm>

namespace hmpmd {

void LaneOrder::Add(CoreId core, uint64_t seq, JobId job) {
  if (cores_.size() <= core) cores_.resize(core + 1);
  cores_[core].push_back({seq, job});
}

void LaneOrder::Remove(CoreId core, uint64_t seq, JobId job) {
  if (core >= cores_.size()) return;
  std::vector<Entry>& runs = cores_[core];
  auto it = std::find_if(runs.begin(), runs.end(),
                         [&](const Entry& e) { return e.seq == seq && e.job == job; });
  if (it == runs.end()) return;
  *it = runs.back();
  runs.pop_back();
}

bool LaneOrder::Behind(CoreId core, uint64_t seq) const {
  if (seq == 0 || core >= cores_.size()) return false;
  const std::vector<Entry>& runs = cores_[core];
  return std::any_of(runs.begin(), runs.end(), [&](const Entry& e) { return e.seq < seq; });
}

uint32_t LaneOrder::QueuedOf(JobId job) const {
  uint32_t n = 0;
  for (size_t c = 0; c < cores_.size(); ++c) {
    for (const Entry& e : cores_[c]) n += e.job == job && Behind(static_cast<CoreId>(c), e.seq);
  }
  return n;
}

}  // namespace hmpmd
