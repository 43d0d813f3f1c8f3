// SpmdPolicy ("spmd-1f1b"): the static SPMD pipeline users run today, the
// baseline hmpmd must beat on the same work. Its pipeline order and its
// device split are options (SpmdOptions), so the other static baselines
// (spmd-zb-h1, spmd-search) are this policy with another order or split.
//
// 1. When a job is admitted every submodel gets a fixed, contiguous device
//    set for the whole job: `devices` when the spec asks, otherwise a share
//    of the rest proportional to its estimated work (at least one device),
//    and never fewer than the most members one collective group has in the
//    submodel (capped at the pool); SpmdOptions::split replaces the hint
//    and the share by its own counts. Sets are laid out in device order and
//    wrap around, so a submodel that asks for the whole pool overlaps the
//    others (expert parallelism), and on a pool too small for the sets asked
//    they overlap as little as the pool allows. From where its turn starts,
//    a set takes first the devices that run all its tasks' kernels with the
//    labels they require, then the others (a heterogeneous pool: an
//    encoder that requires accel=910c gets 910c devices).
// 2. A task with an integer arg `shard` runs on device set[shard % size];
//    other tasks on the set's device whose core drains first. Members of one
//    collective group that would land on one device move to the next device
//    of their set no other member holds (else of the pool): a gang needs
//    distinct devices.
// 3. Submodels of kind pipeline_stage run their tasks in 1F1B order: tasks
//    with args `mb` (micro-batch) and `pass` ("f" forward, "b" backward or
//    its input gradient, "w" its weight gradient) take slots of the
//    sequence SpmdOptions::order gives their stage (stage = order among the
//    job's pipeline_stage submodels); a device starts slot k+1 only after
//    every task of slot k on it has started. 1F1B runs a micro-batch's W
//    just before its B: a fused backward sends its input gradient on only
//    when the whole backward has run. Communication of a slot (same `mb`
//    and `pass`) belongs to the slot, so it runs before the next compute.
//    Other pinned tasks with an integer arg `order` run in that program
//    order on their device, as an SPMD program would (a device runs its
//    ops one after another, collectives included). Each step of the job
//    (spec `repeat`) runs the order again.
//    A device's order lane is shared by every submodel on it (one program,
//    e.g. experts inside the dense layers' set). When that cannot be
//    followed (overlapping sets of a small pool: one submodel's slot would
//    wait on another's that waits on it), each (device, submodel) gets its
//    own lane; when even that cannot be followed (the spec's own orders
//    contradict its inputs or gangs), the job fails at its first placement,
//    at time 0, naming a task, instead of waiting forever. Admission checks
//    the same way that every task's device can run it.
// 4. Communication kernels run on the compute (cube) core of their device,
//    after the compute before them: no core-level overlap.
// 5. Sub-models a driver session (an open job) adds after admission are
//    outside the plan: its actors with `devices` get a set laid out when
//    they are added and never moved (DeviceShare, FixedSetOptions()), so
//    an actor's calls find its state; its other tasks run anywhere.
// Ready tasks are taken in critical-path order, as hmpmd does.
// Thread-safety: not thread-safe; owned by the scheduler's thread.
#pragma once

#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "hmpmd/scheduler/device_share.h"
#include "hmpmd/scheduler/policy.h"

namespace hmpmd {

// A pass of a pipeline stage's micro-batch.
enum class PipePass : uint8_t { kForward, kBackward, kWeight };  // "f", "b", "w"
struct PipeOp {
  uint32_t mb = 0;
  PipePass pass = PipePass::kForward;
};
// The order of the passes of stage `stage` of `stages` over `micro_batches`
// micro-batches: every (mb, pass) once.
using PipelineOrder = std::vector<PipeOp> (*)(uint32_t stage, uint32_t stages,
                                              uint32_t micro_batches);
// 1F1B (Narayanan et al., PipeDream-Flush, SC'21): stages - stage - 1
// warm-up forwards, then one forward one backward, then cool-down
// backwards; each backward is its W then its B (OneFOneBSlot's order with
// W before B).
std::vector<PipeOp> OneFOneBOrder(uint32_t stage, uint32_t stages, uint32_t micro_batches);

// Per job: the device count of each sub-model (index as the spec's
// submodels), over the `alive` devices, given the counts rule 1 gives
// (`planned`). A count of 0 keeps rule 1's for that sub-model.
using DeviceSplit = std::vector<uint32_t> (*)(const JobRun& job, const ResourcePool& pool,
                                              const std::vector<DeviceId>& alive,
                                              const std::vector<uint32_t>& planned);

struct SpmdOptions {
  // The policy's name, in --policy and in its errors. Default "spmd-1f1b".
  std::string_view name = "spmd-1f1b";
  // Each pipeline stage's order (rule 3). Default OneFOneBOrder.
  PipelineOrder order = OneFOneBOrder;
  // Device counts (rule 1); null: the spec's devices, else by work.
  // Default null.
  DeviceSplit split = nullptr;
};

class SpmdPolicy : public Policy {
 public:
  explicit SpmdPolicy(SpmdOptions options = {}) : options_(options), sessions_(FixedSetOptions()) {}

  std::string_view Name() const override { return options_.name; }
  void OnJobAdded(const JobRun& job, const ResourcePool& pool) override;
  void OnJobGrown(const JobRun& job, const ResourcePool& pool) override {
    sessions_.GrowJob(job, pool);
  }
  void OnJobRemoved(JobId job) override;
  void OnReady(const TaskView& task) override { sessions_.OnReady(task); }
  double Priority(const TaskView& task) const override;
  Placement Place(const TaskView& task, const ResourcePool& pool, TimeUs now) override;
  void OnPlaced(const TaskView& task, CoreId core) override;
  // A pinned task only on its device, and only in its lane's turn.
  bool Allows(const TaskView& task, DeviceId device) const override;
  // A task waiting for its turn in its lane sleeps on its slot's key until
  // the lane reaches that slot, one pinned to a busy device on the device's
  // key until a run leaves it (or a device or job changes): not asked once
  // per pass.
  void TakeWoken(std::vector<uint64_t>* keys) override;
  void OnReleased(JobId job, uint32_t run, CoreId core, const ResourcePool& pool) override;
  void OnDeviceAdded(DeviceId device, const ResourcePool& pool) override;
  void OnDeviceRemoved(DeviceId device, const ResourcePool& pool) override;
  // The plan's state, once per (device, part) of a pinned task, in task
  // order, when a job is laid out: a static deployment loads its state
  // before it runs, as the others prefetch theirs.
  void TakeStateIntents(std::vector<StateIntent>* out) override;

  // The device set of `submodel` of `job` (empty when unknown).
  const std::vector<DeviceId>& DeviceSet(JobId job, uint32_t submodel) const;
  // Why `job` cannot run under this policy (empty: it can).
  std::string JobError(JobId job) const;
  // Whether `job`'s submodels got a lane each per device (their shared
  // program order could not be followed).
  bool SplitLanes(JobId job) const;

  struct Lane {
    int32_t next = 0;
    std::vector<uint32_t> total;   // tasks per slot on this lane
    std::vector<uint32_t> placed;  // of those, placed in this step
  };
  struct JobPlan {
    std::vector<std::vector<DeviceId>> sets;  // per submodel
    // Per submodel: its set's devices for a lookup, where the set holds
    // more than kScanSet (a scan of 100,000s per Allows() call took 20 ms).
    std::vector<std::unordered_set<DeviceId>> lookup;
    std::vector<int32_t> slot;    // per task: lane slot, -1 none
    std::vector<int64_t> device;  // per task: pinned device, -1 none
    std::vector<int32_t> lane;    // per task: index into lanes, -1 none
    std::vector<Lane> lanes;
    bool split = false;  // lanes per (device, submodel)
    // Wake key of slot s of lane i: first_key + lane_key[i] + s.
    uint64_t first_key = 0;
    std::vector<uint64_t> lane_key;
    std::string error;            // non-empty: the job cannot run (Place says why)
    const JobRun* job = nullptr;  // the job it lays out (the engine's; stable)
    // Admitted while no device was up (before the first worker joined, or
    // reloaded after a restart), or a device of its plan died: laid out
    // (again) at its next placement.
    const JobRun* waiting = nullptr;
  };

 protected:
  // The plan of `job` on the devices up now: rules 1-3 (MakeSpmdPlan). A
  // baseline that keeps this runtime but places some tasks its own way
  // (spmd-eplb) overrides it.
  virtual JobPlan Layout(const JobRun& job, const ResourcePool& pool);

 private:
  // Lays out `job` (Layout) as its plan, with its state intents.
  void MakePlan(const JobRun& job, const ResourcePool& pool);
  // Task `index` took its slot on its lane; true when the lane moved on.
  static bool TakeTurn(JobPlan& plan, uint32_t index);
  JobPlan* Plan(JobId job);
  const JobPlan* Plan(JobId job) const;
  // Wakes the key of `lane`'s next slot if a task sleeps on it.
  void WakeLane(const JobPlan& plan, int32_t lane);
  void WakeAll();

  SpmdOptions options_;
  std::unordered_map<JobId, JobPlan> jobs_;
  uint64_t next_key_ = 1;  // lane keys; device keys are kDeviceKey | device
  static constexpr uint64_t kDeviceKey = uint64_t{1} << 62;
  static constexpr size_t kScanSet = 64;
  // Whether `device` is in set `sm` of `plan`.
  static bool InSet(const JobPlan& plan, uint32_t sm, DeviceId device);
  std::unordered_set<uint64_t> asleep_;  // keys handed out in RetryWhen()
  std::vector<StateIntent> intents_;     // TakeStateIntents(), not yet taken
  std::vector<uint64_t> woken_;
  // Rule 5: the sets of open jobs' actors (closed jobs are not in it).
  DeviceShare sessions_;
};

// Builds `job`'s plan on `pool` (rules 1-3 above; spmd_plan.cc).
SpmdPolicy::JobPlan MakeSpmdPlan(const JobRun& job, const ResourcePool& pool,
                                 const SpmdOptions& options = {});
// Rule 3 alone: the slots and lanes of `plan`'s pinned tasks (plan->device),
// laid out again in `options.order`, and plan->error when they cannot be
// followed.
void SpmdLanes(const JobRun& job, SpmdPolicy::JobPlan* plan, const SpmdOptions& options = {});

// The 1F1B slot of (micro-batch `mb`, forward or backward) for stage `stage`
// of `stages` with `micro_batches`: warm-up forwards, then one forward one
// backward, then cool-down backwards.
int32_t OneFOneBSlot(uint32_t stage, uint32_t stages, uint32_t micro_batches, uint32_t mb,
                     bool forward);

}  // namespace hmpmd
