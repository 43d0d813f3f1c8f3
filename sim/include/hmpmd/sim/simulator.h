// Simulator: a discrete-event simulation of jobs on a modelled supernode.
//
// It drives the same Scheduler engine and Policy the controller uses, in
// virtual time: each dispatch gets a duration from the task's cost hints (or
// its spin/sleep `us`) and the pool's figures, and completes at start +
// duration. A collective gang's members all end together, after the
// longest member's own kernel time (spin `us`, flops) plus, where a
// member's kernel communicates (a collective or `send`), the collective's
// time for the group size and the slowest link tier among the members
// (node when all share a node, else the fabric). Every built-in
// built-in kernel (docs/job-spec.md) is accepted. It does no I/O and reads no clock.
//
// State: a sub-model with state_bytes holds its shard's part of it on each
// device that ran one of its compute tasks (state_shards.h). A part is
// loaded over the fabric (the node tier on a one-node pool) on the
// device's load lane, one load at a time per device, beside its cores:
// - ahead of need, for each intent the policy gives after a Schedule()
//   pass (Policy::TakeStateIntents), when it fits without evicting a part
//   in use or one prefetched and not used yet (DeviceStates rule 4); else
//   it is not started;
// - on demand, when a compute task is placed on a device that does not
//   hold its part.
// A task starts its kernel when its part's load has ended: the wait (the
// exposed load) is part of its duration. The device keeps the part
// (DeviceStates) from the load's start: resident parts plus the outputs
// its store holds never exceed its memory_mb; the least recently used parts
// make room, and a part that cannot fit fails its task naming the figures.
// No device holds any state when the simulation starts, under every
// policy. Communication and gang members load nothing (they move their own
// bytes). A load's time that overlaps compute on its device is "hidden".
//
// Object stores: as on workers, each run's outputs (the size its built-in
// kernel's arguments and inputs tell; a worker's own kernel's count 0) stay
// in its device's store until their last consumer has read them, and the
// scheduler places by store room (PoolOptions::count_store), as the
// controller does. A run whose outputs do not fit its device's store
// (the pool's memory_mb) fails its job naming the sizes, as a worker's
// object store fails it.
// Thread-safety: not thread-safe; one thread runs a Simulator.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

#include "hmpmd/scheduler/scheduler.h"
#include "hmpmd/sim/device_states.h"
#include "hmpmd/sim/pool_spec.h"
#include "hmpmd/sim/schedule_metrics.h"

namespace hmpmd {

struct SimOptions {
  // Policy name, as MakePolicy() takes it. Default: "hmpmd".
  std::string policy = "hmpmd";
  PoolSpec pool;
  // Ready tasks one Schedule() call may set aside per core kind. Higher than
  // the controller's so a static policy waiting for its fixed devices never
  // starves tasks behind it. Default: 1 << 20.
  uint32_t max_deferred = 1u << 20;
  // Gives up when virtual time passes this many us. Default: one day.
  TimeUs max_time_us = 86'400'000'000LL;
  // Charge loading a stateful sub-model's state (see above). Default: true.
  bool charge_state = true;
};

class Simulator {
 public:
  // Fails on an unknown policy or a bad pool spec.
  static Result<std::unique_ptr<Simulator>> Create(SimOptions options);

  // Admits a job at the current virtual time.
  Result<JobId> Submit(std::shared_ptr<const JobGraph> graph);
  // Runs until every job has ended. Fails when no task can run while jobs
  // wait (a deadlock in the policy) or time runs past max_time_us.
  Status Run();

  // Simulated duration of `task` on `core` (gang members alone: no group).
  double TaskUs(const TaskSpec& task, CoreId core) const;
  // Its kernel's own work on `core`, without communication: a spin's or
  // sleep's `us`, else its flops (cost.flops, or a built-in kernel's
  // arguments) over the core's throughput; 0 for none.
  double KernelUs(const TaskSpec& task, CoreId core) const;

  const Scheduler& scheduler() const { return *scheduler_; }
  Scheduler& mutable_scheduler() { return *scheduler_; }
  TimeUs now() const { return now_; }
  uint64_t events() const { return events_; }
  // State loads charged so far and their total time; parts evicted to make
  // room.
  uint64_t state_loads() const { return state_loads_; }
  uint64_t state_evictions() const { return state_evictions_; }
  // The state parts resident on each device.
  const DeviceStates& states() const { return states_; }
  // The loads `job`'s runs were charged and could not avoid, for
  // ComputeMetrics' residency-aware bounds; null when it needed no state.
  const StateLoadTimes* LoadsOf(JobId job) const;
  double state_load_us() const { return state_load_us_; }
  // Of state_load_us(): the time tasks waited for their loads (exposed),
  // and the load time that overlapped compute on its device (hidden).
  // Loads on a device that neither computes nor has a task waiting count
  // in neither. Final once Run() returned.
  double state_load_exposed_us() const { return state_load_exposed_us_; }
  double state_load_hidden_us() const;
  // Loads started ahead of need (of state_loads()).
  uint64_t state_prefetches() const { return state_prefetches_; }
  // Loads charged on `device` so far (0 when out of range).
  uint64_t state_loads_on(DeviceId device) const;

 private:
  explicit Simulator(SimOptions options, std::unique_ptr<Scheduler> scheduler);
  void Start(const std::vector<Dispatch>& batch);
  // The state part task `t` of `d` needs on its device and its bytes, or
  // nothing for a task that needs none (state_shards.h).
  std::optional<std::pair<StatePart, double>> PartOf(const Dispatch& d, const TaskSpec& t) const;
  // Time `d` waits for the state part `t` needs on d.device (0 when it is
  // resident and loaded, or needs none); a part not resident is loaded on
  // demand. Sets `error` when the part cannot fit the device's memory.
  double LoadStateUs(const Dispatch& d, const TaskSpec& t, std::string* error);
  // Starts the loads of the policy's intents that fit (see above).
  void Prefetch();
  // Sizes the per-device tables to hold `device`.
  void Grow(DeviceId device);
  // A load of `bytes` over the link tier loads use, in whole us.
  TimeUs LoadUs(double bytes) const;
  // Puts a load of `part` (`bytes`) on `device`'s load lane from now;
  // returns its end.
  TimeUs QueueLoad(DeviceId device, const StatePart& part, double bytes, uint32_t run,
                   bool prefetch);

  struct Event {
    TimeUs end;
    uint64_t seq;
    Dispatch d;
    TimeUs start;
    bool operator>(const Event& o) const { return end != o.end ? end > o.end : seq > o.seq; }
  };
  // A run ends: done, its outputs kept in its device's object store, or
  // failed when they pass the store's cap (memory_mb), as a worker fails it.
  void End(const Event& ev);

  SimOptions options_;
  std::unique_ptr<Scheduler> scheduler_;
  std::vector<Event> heap_;  // min-heap on (end, seq)
  TimeUs now_ = 0;
  uint64_t seq_ = 0;
  uint64_t events_ = 0;
  DeviceStates states_;
  std::unordered_map<uint64_t, std::string> state_errors_;  // by Event::seq
  struct Recorded {
    StateLoadTimes times;
  };
  std::unordered_map<JobId, Recorded> recorded_;
  std::vector<uint64_t> loads_on_;
  struct Arriving {
    StatePart part;
    TimeUs end = 0;
    JobId job = 0;
    size_t slice = 0;  // index in its job's StateLoadTimes::slices
  };
  // Per device: the load lane's end, loads not yet ended, the parts its
  // placed runs use, and its compute intervals.
  std::vector<TimeUs> lane_free_;
  std::vector<std::vector<Arriving>> arriving_;
  std::vector<std::vector<StatePart>> in_use_;
  std::vector<std::vector<std::pair<TimeUs, TimeUs>>> compute_;
  std::vector<StateIntent> intents_;  // Prefetch() scratch
  uint64_t state_prefetches_ = 0;
  double state_load_exposed_us_ = 0;
  uint64_t state_loads_ = 0;
  uint64_t state_evictions_ = 0;
  double state_load_us_ = 0;
  std::vector<uint64_t> input_sizes_;  // End() scratch
  std::string too_long_;               // the first task that would end past max_time_us
  TimeUs too_long_start_ = 0;          // when it started
  double too_long_us_ = 0;             // how long it would take (may be inf or NaN)
};

}  // namespace hmpmd
