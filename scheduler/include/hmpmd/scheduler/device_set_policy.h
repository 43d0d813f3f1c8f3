// DeviceSetPolicy: the base of policies that run stateful sub-models on
// device sets (DeviceShare). It tells the sets every event the engine
// reports, answers Allows(), ShortSets() and DeviceMoves() from them, and
// leaves ordering and placement to the policy. A policy that overrides a
// hook calls this class's version where the sets must hear of it too.
// Thread-safety: not thread-safe; owned by the scheduler's thread.
#pragma once

#include <vector>

#include "hmpmd/scheduler/device_share.h"
#include "hmpmd/scheduler/policy.h"

namespace hmpmd {

class DeviceSetPolicy : public Policy {
 public:
  void OnJobAdded(const JobRun& job, const ResourcePool& pool) override {
    share_.AddJob(job, pool);
  }
  void OnJobGrown(const JobRun& job, const ResourcePool& pool) override {
    share_.GrowJob(job, pool);
  }
  void OnJobRemoved(JobId job) override { share_.RemoveJob(job); }
  void OnReady(const TaskView& task) override { share_.OnReady(task); }
  void OnPlaced(const TaskView& task, CoreId core) override { share_.OnPlaced(task, core); }
  void OnReleased(JobId job, uint32_t run, CoreId core, const ResourcePool& pool) override {
    share_.OnReleased(job, run, core, pool);
  }
  void OnDeviceAdded(DeviceId device, const ResourcePool& pool) override {
    share_.OnDeviceAdded(device, pool);
  }
  void OnDeviceRemoved(DeviceId device, const ResourcePool& pool) override {
    share_.OnDeviceRemoved(device, pool);
  }
  bool Allows(const TaskView& task, DeviceId device) const override {
    return share_.Allows(task, device);
  }
  std::vector<SetShortfall> ShortSets(JobId job) const override { return share_.Shortfalls(job); }
  uint64_t DeviceMoves(JobId job) const override { return share_.MoveCount(job); }

  // The stateful sub-models' device sets.
  const DeviceShare& share() const { return share_; }

 protected:
  explicit DeviceSetPolicy(DeviceShareOptions options) : share_(options) {}

  DeviceShare share_;
};

}  // namespace hmpmd
