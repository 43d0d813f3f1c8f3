// ScheduleMetrics: what a finished (or running) schedule achieved, from the
// recorded start and end of every task run. The same code scores live runs
// and simulations (docs/simulation.md, "Schedule metrics").
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "hmpmd/scheduler/resource_pool.h"
#include "hmpmd/scheduler/scheduler.h"

namespace hmpmd {

struct CriticalPathEntry {
  std::string task;
  uint32_t step = 0;
  DeviceId device = 0;
  CoreKind kind = CoreKind::kCube;
  double duration_us = 0;
};

struct DeviceUtilisation {
  DeviceId device = 0;
  std::string name;
  double utilisation = 0;
};

struct ScheduleMetrics {
  uint64_t tasks = 0;     // runs that finished
  double makespan_s = 0;  // first start to last end
  // max(critical path, busiest core kind's work / its cores).
  double lower_bound_s = 0;
  double critical_path_s = 0;  // longest dependent chain of measured durations
  // A tighter bound, also valid for the measured durations (>= the one
  // above): per step, steps in sequence, the largest of its critical path
  // and, over head/tail thresholds t1, t2 and core kinds, t1 + t2 + the
  // work of the kind's runs that cannot start before t1 (their chain of
  // inputs) and leave at least t2 after their end (their chain of
  // consumers) / the kind's cores. Reported beside lower_bound_s.
  double tight_bound_s = 0;
  double utilisation = 0;  // busy core-time / (cores * makespan)
  std::array<double, kNumCoreKinds> utilisation_by_kind{};
  std::vector<DeviceUtilisation> utilisation_by_device;
  double comm_s = 0;  // total time of communication tasks
  // Communication time that overlaps compute on the same device / comm_s;
  // 0 when the job has no communication.
  double masking_ratio = 0;
  // Idle device-time inside steps / (devices * step spans).
  double bubble_ratio = 0;
  // The chain critical_path_s measures (its runs' durations add up to it),
  // step after step, first task first; among inputs of equal chains, the
  // one that ended last.
  std::vector<CriticalPathEntry> critical_path;
};

// The state loads a simulation charged one job (Simulator::LoadsOf), so the
// bounds can count what residency makes unavoidable instead of what one
// policy happened to pay.
struct StateLoadTimes {
  std::vector<double> run_us;   // per run: the time it waited for its load (in its duration)
  std::vector<double> part_us;  // per run: a load of its state part (0: stateless)
  // Each load on its device's load lane, for traces.
  struct Slice {
    DeviceId device = 0;
    TimeUs start = 0;
    TimeUs end = 0;
    uint32_t submodel = 0;
    uint32_t run = kNoRun;  // the first run that waited for or used it
    bool prefetch = false;  // started before any task needed it
    uint64_t bytes = 0;     // live loads: what it brought (the simulator's: 0)
    TimeUs waited = 0;      // live loads: how long its run waited for it
  };
  std::vector<Slice> slices;
};

// Devices counted are those alive now plus those that ran a task of the job.
// With `loads`, lower_bound_s, tight_bound_s and critical_path_s are
// residency-aware rather than counting the loads one policy chose to pay:
// runs count their durations less the time they waited for their loads;
// a stateful run starts no earlier than one load of its part (no device
// holds state at the start). Loads run on a lane of their own, so they add
// no core work.
ScheduleMetrics ComputeMetrics(const JobRun& job, const ResourcePool& pool,
                               const StateLoadTimes* loads = nullptr);
// Turns `job` (a copy of a running job) into its current step so far, for
// ComputeMetrics: the step's done runs, and on each core the run executing
// there now (the earliest dispatched of the step's runs queued on it),
// done over [when the core's last done run of the step ended, or its
// dispatch if later; `now`). Every other run is left out, as are runs
// with no core (restored after a restart). Live figures count running
// work as busy, not as idle.
void StepSoFar(JobRun* job, TimeUs now);
// ComputeMetrics' makespan_s alone: the first done run's start to the last
// one's end (at least 1 us), in seconds; 0 when no run is done.
double MakespanS(const JobRun& job);

}  // namespace hmpmd
