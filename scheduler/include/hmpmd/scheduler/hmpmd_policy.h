// HmpmdPolicy: the product's dynamic list scheduler.
//
// Assumptions:
// 1. Cost hints (and, live, calibrated durations) give each task's run time.
// 2. Cores of one kind are equally fast; tasks on different core kinds of a
//    device run at the same time.
// Algorithm:
// 1. Order ready tasks by upward rank (own estimate plus the longest
//    estimated path to a sink): the critical path goes first. Members of a
//    collective gang share the longest tail among them (they end
//    together); ties go to the producers of one gang together. In a driver
//    session (an open job) ranks cover only the tasks sent so far, so
//    there a task also gains a microsecond of rank per microsecond it has
//    been ready, and later tasks cannot starve it.
// 2. Communication kernels go to vector cores (where the pool has them), so
//    they overlap compute on the cube cores; chunked MoE dispatch/combine
//    then pipelines under the experts' compute. A task whose spec names its
//    `core` keeps it (CommToVector).
// 3. A consumer goes to the device holding its largest input when a core of
//    its kind there is free now (data stays put), or while that core drains
//    no later than the earliest one plus the time the input takes to fetch
//    (at kFetchBytesPerUs); otherwise to the core of its kind that frees up
//    earliest, so the task finishes earliest. Sub-models
//    without `devices` have no fixed devices: independent ones run side by
//    side and each takes the share of the pool its ready work needs, moment
//    by moment. A stateful sub-model (actor, reward, learner, a driver
//    session's actors) with `devices` = N runs on a device set of N that
//    DeviceShare lays out at admission; elastic sets follow demand and the
//    critical path (device_share.h). Tasks waiting for one full set share
//    a wait class, so the engine retries one of them per pass, not each.
//    The elastic ones of a job whose DAG is known that declare state_bytes
//    float instead, each run on a device that holds its state unless
//    another starts it sooner by more than the state load, over at most as
//    many devices as it can use at once (StateAffinity, state_affinity.h).
//    Compute with no input bytes to fetch first looks for a free core on
//    a device whose vector core runs communication, so the two overlap.
// 4. Collectives are placed as a gang by the engine (all members or none).
// 5. Several jobs share the pool by weight, and several tenants by share:
//    while its tenant has more than one active job, a task's priority
//    drops by kFairGain x its job's virtual clock of the core kind it runs
//    on (JobShares: the core time of that kind the job holds, estimated at
//    placement and measured when the run ends, x the sum of its tenant's
//    active weights / its weight / the kind's cores, with credit bounded;
//    in steps of kFairStepUs); while more than one tenant is active, by
//    kTenantGain x kFairGain x its tenant's clock too (the same, over
//    shares). The tenant furthest behind its share goes first, and inside
//    it the job furthest behind, so each tenant's share of each kind
//    follows share / sum of shares, and each job's part of it weight /
//    sum of its tenant's weights, while all have ready work; one that has
//    none leaves its cores to the others.
// Thread-safety: not thread-safe; owned by the scheduler's thread.
#pragma once

#include <set>

#include "hmpmd/scheduler/device_set_policy.h"
#include "hmpmd/scheduler/job_shares.h"
#include "hmpmd/scheduler/state_affinity.h"

namespace hmpmd {

class HmpmdPolicy final : public DeviceSetPolicy {
 public:
  // Peer-to-peer fetch bandwidth the locality rule assumes: 1 GB/s.
  static constexpr double kFetchBytesPerUs = 1000.0;
  // Cores running communication that Place() looks beside for a free core.
  static constexpr int kOverlapLook = 16;
  // Microseconds of rank (and of waiting) that one microsecond of a job's
  // virtual clock outweighs: large, so the job furthest behind its share
  // goes first across jobs and rank orders work inside a job, yet small
  // enough that a clock of hours keeps the priority's sub-microsecond
  // tie-breaks (clocks restart when the pool has no job).
  static constexpr double kFairGain = 64;
  // Steps of a job's clock the priority sees: jobs within one step of each
  // other are ordered by rank. 1 ms of fair-share time (built-in mixes on
  // 64 devices: cube shares within 2.6 points of continuous clocks, and
  // simulated 1.5-3x faster: fewer stale entries in the engine's heap).
  static constexpr double kFairStepUs = 1000;
  // Steps of a job's clock that one step of its tenant's outweighs: over
  // three times the default lag bound's 20 (JobShares::Options), so the
  // tenant behind goes first unless its jobs' clocks are further apart
  // than that (tasks over 32 ms widen the bound); small enough that a
  // tenant's clock of days keeps whole microseconds of priority exact in
  // a double.
  static constexpr double kTenantGain = 64;

  HmpmdPolicy() : DeviceSetPolicy(FloatingDagOptions()) {}

  std::string_view Name() const override { return "hmpmd"; }
  double Priority(const TaskView& task) const override;
  Placement Place(const TaskView& task, const ResourcePool& pool, TimeUs now) override;
  void OnJobAdded(const JobRun& job, const ResourcePool& pool) override;
  void OnJobRemoved(JobId job) override;
  void OnPlaced(const TaskView& task, CoreId core) override;
  void OnReady(const TaskView& task) override {
    DeviceSetPolicy::OnReady(task);
    affinity_.OnReady(task);
  }
  void OnReleased(JobId job, uint32_t run, CoreId core, const ResourcePool& pool) override {
    DeviceSetPolicy::OnReleased(job, run, core, pool);
    affinity_.OnReleased(job, run);
  }
  void OnRunDone(JobId job, uint32_t run, CoreId core, double est_us, double ran_us) override;
  void OnDeviceAdded(DeviceId device, const ResourcePool& pool) override;
  void OnDeviceRemoved(DeviceId device, const ResourcePool& pool) override;
  bool Allows(const TaskView& task, DeviceId device) const override {
    return DeviceSetPolicy::Allows(task, device) && affinity_.Allows(task, device);
  }
  // A task on a device set or floating by state affinity (not a gang
  // member): its sub-model, core kind, kernel and whether it reads stored
  // inputs decide whether it can be placed.
  uint64_t WaitClass(const TaskView& task) const override;
  void TakeStateIntents(std::vector<StateIntent>* out) override { affinity_.TakeIntents(out); }

  // The jobs' fair-share clocks.
  const JobShares& fair() const { return fair_; }
  // Where the floating stateful sub-models' states are.
  const StateAffinity& affinity() const { return affinity_; }

 private:
  static DeviceShareOptions FloatingDagOptions() {
    DeviceShareOptions options;
    options.elastic_dag_sets = false;
    return options;
  }
  // The core kind Place() puts `task` on when that kind has capacity.
  CoreKind RunsOn(const TaskView& task) const;
  // Members of `task`'s collective gang (1 when it has none).
  static uint32_t GangSize(const TaskView& task);
  CoreId FreeCoreBesideComm(const TaskView& task, CoreKind kind, const ResourcePool& pool,
                            TimeUs now);
  // Cores communication was placed on and may still run on (pruned lazily
  // in Place).
  std::set<CoreId> comm_cores_;
  StateAffinity affinity_;
  JobShares fair_;
  const ResourcePool* pool_ = nullptr;  // the engine's, set on admission
};

}  // namespace hmpmd
