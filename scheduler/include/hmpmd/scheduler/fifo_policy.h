// FifoPolicy: the baseline.
// 1. Ready tasks run in the order they became ready.
// 2. A task goes to the first core of its kind with capacity, except that a
//    sub-model that keeps state between its tasks (DeviceShare rule 0: kinds
//    actor, reward and learner, and a driver session's actors) with
//    `devices` = N runs only on a set of N devices laid out at admission:
//    its later tasks find the state earlier ones stored there. The sets are
//    static (FixedSetOptions()): no device moves between
//    them, apart from replacing a dead one, so the baseline stays simple.
// Thread-safety: not thread-safe; owned by the scheduler's thread.
#pragma once

#include "hmpmd/scheduler/device_share.h"
#include "hmpmd/scheduler/policy.h"

namespace hmpmd {

class FifoPolicy final : public Policy {
 public:
  FifoPolicy() : share_(FixedSetOptions()) {}

  std::string_view Name() const override { return "fifo"; }
  double Priority(const TaskView& task) const override;
  Placement Place(const TaskView& task, const ResourcePool& pool, TimeUs now) override;
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
  // Tasks of one set, core kind and kernel wait together (as in hmpmd).
  uint64_t WaitClass(const TaskView& task) const override;

  // The stateful sub-models' device sets.
  const DeviceShare& share() const { return share_; }

 private:
  DeviceShare share_;
};

}  // namespace hmpmd
