// Simulator: a discrete-event simulation of jobs on a modelled supernode.
//
// It drives the same Scheduler engine and Policy the controller uses, in
// virtual time: each dispatch gets a duration from the task's cost hints (or
// its spin/sleep `us`) and the pool's figures, and completes at start +
// duration. A collective gang's members all end together, after the
// collective's time for the group size and the slowest link tier among the
// members (node when all share a node, else the fabric). Every built-in
// kernel of DESIGN.md is accepted. It does no I/O and reads no clock.
// Thread-safety: not thread-safe; one thread runs a Simulator.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "hmpmd/scheduler/pool_spec.h"
#include "hmpmd/scheduler/schedule_metrics.h"
#include "hmpmd/scheduler/scheduler.h"

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

  const Scheduler& scheduler() const { return *scheduler_; }
  Scheduler& mutable_scheduler() { return *scheduler_; }
  TimeUs now() const { return now_; }
  uint64_t events() const { return events_; }

 private:
  explicit Simulator(SimOptions options, std::unique_ptr<Scheduler> scheduler);
  void Start(const std::vector<Dispatch>& batch);

  struct Event {
    TimeUs end;
    uint64_t seq;
    Dispatch d;
    TimeUs start;
    bool operator>(const Event& o) const { return end != o.end ? end > o.end : seq > o.seq; }
  };

  SimOptions options_;
  std::unique_ptr<Scheduler> scheduler_;
  std::vector<Event> heap_;  // min-heap on (end, seq)
  TimeUs now_ = 0;
  uint64_t seq_ = 0;
  uint64_t events_ = 0;
};

}  // namespace hmpmd
