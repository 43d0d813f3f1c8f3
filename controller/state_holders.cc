#include "hmpmd/controller/state_holders.h"

#include <algorithm>

namespace hmpmd {

void StateHolders::Held(JobId job, uint32_t submodel, WorkerId worker) {
  std::vector<std::vector<WorkerId>>& holders = jobs_[job].holders;
  if (holders.size() <= submodel) holders.resize(submodel + 1);
  std::vector<WorkerId>& of = holders[submodel];
  if (!of.empty() && of.back() == worker) return;
  std::erase(of, worker);
  of.push_back(worker);
}

bool StateHolders::Holds(JobId job, uint32_t submodel, WorkerId worker) const {
  auto it = jobs_.find(job);
  if (it == jobs_.end() || it->second.holders.size() <= submodel) return false;
  const std::vector<WorkerId>& of = it->second.holders[submodel];
  return std::find(of.begin(), of.end(), worker) != of.end();
}

WorkerId StateHolders::SourceFor(JobId job, uint32_t submodel, WorkerId worker) const {
  auto it = jobs_.find(job);
  if (it == jobs_.end() || it->second.holders.size() <= submodel) return kNone;
  const std::vector<WorkerId>& of = it->second.holders[submodel];
  if (of.empty() || std::find(of.begin(), of.end(), worker) != of.end()) return kNone;
  return of.back();
}

void StateHolders::Loaded(JobId job, uint32_t submodel, DeviceId device, TimeUs start, TimeUs end,
                          uint32_t run, uint64_t bytes, TimeUs waited) {
  OfJob& of = jobs_[job];
  // Copy on write: a report rendering off the loop may hold the old one.
  auto loads = of.loads == nullptr         ? std::make_shared<StateLoadTimes>()
               : of.loads.use_count() == 1 ? of.loads
                                           : std::make_shared<StateLoadTimes>(*of.loads);
  end = std::max(start, end);
  loads->slices.push_back({device, start, end, submodel, run, false, bytes,
                           std::clamp<TimeUs>(waited, 0, end - start)});
  of.loads = std::move(loads);
}

std::shared_ptr<const StateLoadTimes> StateHolders::LoadsOf(JobId job) const {
  auto it = jobs_.find(job);
  return it == jobs_.end() ? nullptr : it->second.loads;
}

void StateHolders::ForgetWorker(WorkerId worker) {
  for (auto& [job, of] : jobs_) {
    for (std::vector<WorkerId>& holders : of.holders) std::erase(holders, worker);
  }
}

void StateHolders::ForgetJob(JobId job) { jobs_.erase(job); }

}  // namespace hmpmd
