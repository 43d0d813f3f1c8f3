// Policy: the one interface every scheduling policy implements, baselines
// included. A policy decides order (Priority) and placement (Place) from a
// const view of the pool; it never allocates: the Scheduler applies its
// decisions to the ResourcePool.
#pragma once

#include <algorithm>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "hmpmd/protocol/status.h"
#include "hmpmd/scheduler/job_graph.h"
#include "hmpmd/scheduler/resource_pool.h"

namespace hmpmd {

// A ready task as a policy sees it.
struct TaskView {
  JobId job = 0;
  uint32_t run = 0;    // run index inside the job (step * size + index)
  uint32_t index = 0;  // task index inside the step
  uint32_t step = 0;
  const JobGraph* graph = nullptr;
  const TaskSpec* spec = nullptr;
  const GraphTask* task = nullptr;
  double rank_us = 0;      // upward rank: est + longest path to a sink
  double est_us = 0;       // estimated run time on its core kind, now
  uint32_t kernel_id = 0;  // pool kernel id
  uint32_t weight = 1;     // the job's share of the pool
  uint64_t ready_seq = 0;  // order in which tasks became ready
  TimeUs ready_at = 0;     // when it became ready (set for Priority())
  // Ready while inputs still run on one core, to be placed there behind
  // them (early dispatch).
  bool early = false;
  // The device holding the task's largest input (UINT32_MAX: none known)
  // and that input's size: placing the task there saves fetching it.
  DeviceId input_device = UINT32_MAX;
  uint64_t input_bytes = 0;
  // That input's last read is this task's (reading it frees it there).
  bool input_last_read = false;
  // The bytes of outputs it will store, where the kernel is built in and
  // its arguments and inputs tell, or earlier runs of a worker's own kernel
  // do (output_known); set for placement when the pool counts stores
  // (PoolOptions::count_store).
  bool output_known = false;
  uint64_t output_bytes = 0;
};

struct JobRun;

// A sub-model whose device set holds fewer devices of its own than it asked
// for (the pool had too few for the job's sets to be disjoint): it got
// `got` (< `asked`), or `shared` of them with the job's other sets.
struct SetShortfall {
  uint32_t submodel = 0;
  uint32_t asked = 0;
  uint32_t got = 0;
  uint32_t shared = 0;
};

inline constexpr uint32_t kNoRun = UINT32_MAX;

// Whether the hmpmd policy runs `task` on a vector core instead of the kind
// its spec has (where the pool has enough vector cores): a communication
// kernel whose spec did not name a core, so that it overlaps compute on the
// cube cores. A compute kernel in a gang (`collective` on a spin) computes.
inline bool CommToVector(const GraphTask& task, const TaskSpec& spec) {
  return task.is_comm && !spec.core_given && IsCommKernel(spec.kernel);
}

// A part of a sub-model's state (state_shards.h) that a policy foresees
// `device` will run a task of.
struct StateIntent {
  DeviceId device = 0;
  JobId job = 0;
  uint32_t submodel = 0;
  uint32_t part = 0;
};

// The outcome of one placement attempt: a value, not an error.
struct Placement {
  enum class Kind { kPlaced, kRetryLater, kInfeasible };
  Kind kind = Kind::kRetryLater;
  CoreId core = 0;
  std::string reason;  // why, for kInfeasible
  // With kRetryLater, nonzero: asking again is pointless until the policy
  // reports this key from TakeWoken() (a task waiting for its turn in a
  // program order); the engine sets the task aside unasked until then.
  uint64_t wake = 0;
  // With kInfeasible: `reason` is about the whole job and names the task
  // at fault itself (no task of a gang is put before it).
  bool job_wide = false;

  static Placement Placed(CoreId c) { return {Kind::kPlaced, c, {}}; }
  static Placement RetryLater() { return {Kind::kRetryLater, 0, {}}; }
  static Placement RetryWhen(uint64_t key) { return {Kind::kRetryLater, 0, {}, key}; }
  static Placement Infeasible(std::string why) { return {Kind::kInfeasible, 0, std::move(why)}; }
  static Placement JobInfeasible(std::string why) {
    return {Kind::kInfeasible, 0, std::move(why), 0, true};
  }
};

class Policy {
 public:
  virtual ~Policy() = default;
  virtual std::string_view Name() const = 0;
  // A job was admitted (its graph, rank_us and est_us are set); static
  // policies fix its device sets here.
  virtual void OnJobAdded(const JobRun& /*job*/, const ResourcePool& /*pool*/) {}
  virtual void OnJobRemoved(JobId /*job*/) {}
  // An open job (a driver session) got new sub-models or tasks
  // (Scheduler::AppendTasks); its tables cover them already.
  virtual void OnJobGrown(const JobRun& job, const ResourcePool& pool) {
    (void)job;
    (void)pool;
  }
  // Ready tasks run in decreasing priority.
  virtual double Priority(const TaskView& task) const = 0;
  // Picks a core with capacity for `task`, or says why not. The core may
  // be of another kind than task.spec->core (spmd-1f1b runs communication on
  // the compute core); the engine then estimates for the core's kind.
  virtual Placement Place(const TaskView& task, const ResourcePool& pool, TimeUs now) = 0;
  // The engine committed a placement Place() proposed (a gang's members are
  // proposed one by one and may be taken back before this).
  virtual void OnPlaced(const TaskView& /*task*/, CoreId /*core*/) {}
  // A run became ready (each gang member on its own; a retry again).
  virtual void OnReady(const TaskView& /*task*/) {}
  // Run `run` of `job` left `core` (done, failed, cancelled); kNoRun: a
  // gang member proposed and taken back before OnPlaced.
  virtual void OnReleased(JobId /*job*/, uint32_t /*run*/, CoreId /*core*/,
                          const ResourcePool& /*pool*/) {}
  // Run `run` of `job` ended on `core` (done) after running `ran_us` (its
  // worker's measure, end - start); OnPlaced() was told `est_us`.
  virtual void OnRunDone(JobId /*job*/, uint32_t /*run*/, CoreId /*core*/, double /*est_us*/,
                         double /*ran_us*/) {}
  // A device joined the pool or died (after the pool counts it).
  virtual void OnDeviceAdded(DeviceId /*device*/, const ResourcePool& /*pool*/) {}
  virtual void OnDeviceRemoved(DeviceId /*device*/, const ResourcePool& /*pool*/) {}
  // Whether `task` may run on `device`: the engine asks when it moves a gang
  // member off a device another member took.
  virtual bool Allows(const TaskView& /*task*/, DeviceId /*device*/) const { return true; }
  // Tasks with the same nonzero wait class are, at any one moment, all
  // placeable or none is: after Place() told one of them RetryLater, the
  // engine sets the others aside unasked until it is placed, retrying the
  // class's best task once per Schedule() pass (decision cost per waiting
  // task O(log n), not O(n) per pass). 0: no class, each task is asked.
  virtual uint64_t WaitClass(const TaskView& /*task*/) const { return 0; }
  // Appends the keys of RetryWhen() placements that may succeed now (and
  // forgets them). The engine asks at each Schedule() pass and after each
  // placement; waking a key too often only costs a Place() call. Used for
  // tasks without a wait class.
  virtual void TakeWoken(std::vector<uint64_t>* keys) { (void)keys; }
  // Sub-models of `job` whose device sets are short of their ask (policies
  // with sets; the engine copies it to JobRun::short_sets).
  virtual std::vector<SetShortfall> ShortSets(JobId /*job*/) const { return {}; }
  // Devices moved between `job`'s device sets so far (policies whose sets
  // follow demand); reported beside a schedule's figures.
  virtual uint64_t DeviceMoves(JobId /*job*/) const { return 0; }
  // Appends what the policy foresees a device will run next and forgets
  // it: "device d will run a task of part p", so the state load can start
  // before the task is placed (the simulator runs it on the device's load
  // lane, docs/simulation.md#prefetch). An intent is advice: the task
  // still loads on demand where the part is not resident.
  virtual void TakeStateIntents(std::vector<StateIntent>* out) { (void)out; }
};

// The policies of policy_registry.cc: adding one is a file of its own and
// one line in that table.
// Names MakePolicy() accepts, the default first.
std::vector<std::string> PolicyNames();
// The policy registered as `name`; NotFound otherwise, naming the known ones.
Result<std::unique_ptr<Policy>> MakePolicy(std::string_view name);

// Whether `device`'s object store takes the task's outputs
// (ResourcePool::StoreTakes).
inline bool StoreTakes(const TaskView& task, DeviceId device, const ResourcePool& pool) {
  const uint64_t freed = device == task.input_device && task.input_last_read ? task.input_bytes : 0;
  return pool.StoreTakes(device, task.spec->core, task.output_known, task.output_bytes, freed,
                         task.input_bytes > 0);
}

// What placing `task` does to its device's store (ResourcePool::Assign):
// the outputs it will add, in whole KiB, and whether it reads stored inputs.
inline StoreUse StoreUseOf(const TaskView& task) {
  const uint64_t kib =
      task.output_known ? std::min<uint64_t>((task.output_bytes + 1023) >> 10, UINT32_MAX) : 0;
  return {kib << 10, task.input_bytes > 0};
}

// Whether `task` may run on device `d` at all: alive, runs its kernel, and
// its store takes the task's outputs.
inline bool Usable(const TaskView& task, DeviceId d, const ResourcePool& pool) {
  return pool.device(d).alive && pool.Supports(d, task.kernel_id) && StoreTakes(task, d, pool);
}

// Of `devices` (a set, a state's holders), the core of `kind` with room that
// frees first on a device Usable() for `task`; RetryLater when none has one.
template <typename Devices>
Placement EarliestCoreOn(const TaskView& task, CoreKind kind, const ResourcePool& pool,
                         const Devices& devices) {
  CoreId best = UINT32_MAX;
  for (DeviceId d : devices) {
    if (!Usable(task, d, pool)) continue;
    for (CoreId c : pool.device(d).cores) {
      if (pool.core(c).kind != kind || !pool.HasCapacity(c)) continue;
      if (best == UINT32_MAX || pool.core(c).busy_until < pool.core(best).busy_until) best = c;
    }
  }
  return best == UINT32_MAX ? Placement::RetryLater() : Placement::Placed(best);
}

// The earliest-draining core of `kind` that runs the task's kernel and that
// `allowed` accepts (nullptr: any). Shared by policies that place by
// earliest finish time. Only devices whose object store takes the task's
// outputs (StoreTakes).
template <typename Pred>
Placement EarliestCore(const TaskView& task, CoreKind kind, const ResourcePool& pool,
                       Pred&& allowed) {
  for (const auto& [busy_until, core] : pool.available(kind)) {
    DeviceId dev = pool.core(core).device;
    if (!StoreTakes(task, dev, pool)) continue;
    if (pool.Supports(dev, task.kernel_id) && allowed(dev)) return Placement::Placed(core);
  }
  return Placement::RetryLater();
}

}  // namespace hmpmd
