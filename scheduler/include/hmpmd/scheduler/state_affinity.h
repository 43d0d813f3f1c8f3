// StateAffinity: where the hmpmd policy runs the elastic sub-models that
// declare state_bytes (of any kind), of a job whose whole DAG it knows. A driver session's actors,
// sets pinned by
// `"elastic": false` and sub-models without state_bytes (their state is
// whatever kernels stored, kept in one place) keep their device sets
// (device_share.h); fifo and spmd-1f1b keep sets too.
//
// Such a sub-model floats over the pool, but its state (each part of it,
// state_shards.h, tracked apart: the rules below are per part) must be on a
// device before its compute runs there: its first run on a device loads it
// (the simulator charges JobRun::state_load_us; a worker makes its
// ActorState), and the device keeps it while its memory holds it
// (memory_mb; beyond, the least recently used state goes first, as the
// simulator does). Floating lets a
// device hold several sub-models' states and run whichever is critical,
// so one device's communication hides under another sub-model's compute
// (RL: the learner's last gradient all-reduce under a rollout).
//  1. Earliest start: a run goes to the holder of its state whose core of
//     its kind with room frees first, unless a core elsewhere starts it
//     sooner by more than the state load; with no holder's core free, to a
//     free core elsewhere (waiting for a busy holder kept the sub-model on
//     the devices it started on: RL took 7x as long).
//  2. Spread cap: the state goes to at most `width` devices, the most
//     compute runs of the sub-model that can run at once (a lower bound of
//     it: its runs at one depth of the DAG, its runs overlapping in time
//     when each starts as soon as its inputs are done, or its runs ready or
//     running at one moment, whichever is largest): more holders only add
//     loads, and a sub-model whose runs form a chain keeps one device, so
//     one state. Once `width` devices hold it, its runs wait for a holder,
//     unless no alive holder can run the task at all (core kind, kernel,
//     store cap).
//  3. Worth: the spread cap is at most the part's estimated compute over
//     its state load (at least 1): a new holder pays a load, so it must
//     have at least that much work to take. A MoE expert's hot replicas
//     follow its routing this way (EPLB's rule, from the DAG): a cold
//     expert keeps one device, a hot one as many as its tokens pay for.
//     When the job's caps add up to fewer devices than are live, they grow
//     in proportion until they fill the pool: a load on a device that
//     would stay idle displaces no work. When every part's cap is set by
//     its load rather than its width (large states: a pipeline's stages,
//     MoE's dense part), whether the caps fill the pool or not, they split
//     the pool in
//     proportion to each part's work instead: the loads all run at once
//     from time 0 (rule 5), so a part's load no longer decides how many
//     devices pay it, and the critical path's work gets its share
//     (SplitByWork, state_split.h: a part's data-parallel shards make
//     only holder counts that cut its rounds worth their devices).
//  4. A dead device holds nothing.
//  5. Prefetch at admission (PlaceInitial): each part gets its cap of
//     holders at once, on devices that hold nothing of the job yet, the
//     sub-models whose runs can start earliest first (needed first),
//     until the pool runs out; each holder is an intent
//     (Policy::TakeStateIntents), so the simulator loads every part from
//     time 0 in parallel, under the work before its first run, instead
//     of when that run arrives. Parts left with fewer holders than their
//     cap spread on demand as above. Holders are laid out replica by
//     replica (parts 0..P-1 of one on consecutive devices: one node where
//     P divides a node's devices).
//  6. Gangs on one node: the producers of one collective gang (a
//     tensor-parallel all-reduce's shards: one producer per member, no
//     more members than the node has devices) follow the first one placed
//     to its node: a holder there that no other producer of the gang took
//     wins while it starts no later than the earliest holder plus the
//     task's own time (a gang on the node tier takes about half the time
//     of one on the fabric; it starts when its last member is ready).
// Cost: admission O(tasks); a placement O(holders) up to kScanHolders
// holders, beyond a scan of the kind's available cores, plus O(holders)
// for a gang's producer (rule 6); a placement on a device O(states it
// holds).
// Thread-safety: not thread-safe; owned by the policy (scheduler thread).
#pragma once

#include <cstdint>
#include <memory>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "hmpmd/scheduler/policy.h"

namespace hmpmd {

class StateAffinity {
 public:
  // Holders a placement looks at one by one; with more, it scans the
  // pool's available cores for the first holder instead.
  static constexpr size_t kScanHolders = 64;

  // Whether `job`'s sub-model `sm` floats here rather than on a device set.
  static bool Floats(const JobRun& job, uint32_t sm);

  // `devices`: the live devices the job may spread over (rule 3; 0: none
  // counted).
  void AddJob(const JobRun& job, uint32_t devices = 0);
  // Rule 5, after AddJob.
  void PlaceInitial(const JobRun& job, const ResourcePool& pool);
  // Appends the holders rule 5 chose since the last call and forgets them.
  void TakeIntents(std::vector<StateIntent>* out);
  void RemoveJob(JobId job);
  void OnDeviceRemoved(DeviceId device);

  // True when `task` is compute of a floating stateful sub-model.
  bool Handles(const TaskView& task) const;
  // Places a task Handles() on a core of `kind` (rules 1 and 2).
  Placement Place(const TaskView& task, CoreKind kind, const ResourcePool& pool, TimeUs now) const;
  // False for a device not holding the task's state once the spread cap is
  // reached; true otherwise.
  bool Allows(const TaskView& task, DeviceId device) const;
  // The task became ready. Its sub-model's runs ready or running at once
  // can run at once, so a width below their count is raised to it.
  void OnReady(const TaskView& task);
  // Run `run` of `job` left its core (done, failed or taken back).
  void OnReleased(JobId job, uint32_t run);
  // The task went to `device`: the device holds (or keeps) its state.
  void OnPlaced(const TaskView& task, DeviceId device, const ResourcePool& pool);

  // --- queries (tests, reports) ---
  // Devices holding part `part` of the state of `job`'s sub-model `sm` now.
  std::vector<DeviceId> Holders(JobId job, uint32_t sm, uint32_t part = 0) const;
  // The spread cap of that part (0: it does not float).
  uint32_t Width(JobId job, uint32_t sm, uint32_t part = 0) const;

 private:
  struct Holding {
    uint32_t width = 0;           // 0: not floating here
    uint32_t in_flight = 0;       // its runs ready or running
    uint32_t worth = UINT32_MAX;  // rule 3: holders its work pays the loads of
    double load_us = 0;
    double bytes = 0;
    double first_start_us = 0;  // its earliest run's start, unlimited devices
    std::vector<DeviceId> holders;
    std::unordered_set<DeviceId> has;
  };
  struct Held {
    JobId job = 0;
    uint32_t slot = 0;
    double bytes = 0;
  };
  // Rule 6: where a gang's producers went so far.
  struct GangSpot {
    uint32_t node = 0;
    std::vector<DeviceId> devices;
  };
  struct JobHoldings {
    std::shared_ptr<const JobGraph> graph;
    std::vector<uint32_t> first_slot;  // per sub-model: its part 0's slot, or kNoSlot
    std::vector<Holding> slots;        // per part of a floating sub-model's state
    // By (step, gang): freed when the gang's last producer is placed.
    std::unordered_map<uint64_t, GangSpot> gangs;
  };
  static constexpr uint32_t kNoSlot = UINT32_MAX;
  static uint64_t RunKey(JobId job, uint32_t run);
  // The slot of task `index`'s state part, or kNoSlot.
  static uint32_t SlotOf(const JobHoldings& jh, uint32_t index);
  uint32_t SlotOf(const TaskView& task) const;
  uint32_t SlotOf(JobId job, uint32_t sm, uint32_t part) const;
  const Holding* Find(JobId job, uint32_t slot) const;
  void Drop(JobId job, uint32_t slot, DeviceId device);
  // The holder core of `kind` that frees first, or kNoCore.
  CoreId BestHolder(const Holding& h, const TaskView& task, CoreKind kind,
                    const ResourcePool& pool) const;
  // Rule 6: the key of the gang `task` produces for (its first consumer
  // in a gang), or UINT64_MAX; with the gang's member count.
  static uint64_t GangKey(const TaskView& task, size_t* members = nullptr);
  // Devices of `node` in the pool (alive or not), cached per device count.
  uint32_t NodeSize(const ResourcePool& pool, uint32_t node);
  // Rule 6: the holder core of `kind` on the gang's node that frees first,
  // or kNoCore.
  CoreId GangHolder(const Holding& h, const TaskView& task, CoreKind kind,
                    const ResourcePool& pool) const;
  // Makes `device` a holder of `slot` of `job` (the most recently used).
  void Hold(JobId job, uint32_t slot, DeviceId device, const ResourcePool& pool);
  // Whether an alive holder could ever run `task` on a core of `kind`.
  static bool HolderCanRun(const Holding& h, const TaskView& task, CoreKind kind,
                           const ResourcePool& pool);

  std::unordered_map<JobId, JobHoldings> jobs_;
  std::vector<std::vector<Held>> on_device_;     // least recently used first
  std::unordered_set<uint64_t> in_flight_;       // (job, run) counted in Holding::in_flight
  std::vector<StateIntent> intents_;             // rule 5, not yet taken
  static constexpr size_t kMaxGangSpots = 4096;  // per job (rule 6)
  std::vector<uint32_t> node_size_;              // by node: its devices
  size_t node_size_devices_ = 0;                 // the pool's device count it counted
};

}  // namespace hmpmd
