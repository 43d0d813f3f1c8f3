// Renders a job for people and programs: the JSON summary of docs/cli.md's
// "Output", the per-task table, the Chrome trace, and the
// text summary `hmpmd run` prints. Live runs and simulations share it.
// Thread-safety: free functions over const state; the caller keeps that
// state still while they run (the controller calls them on its loop).
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "hmpmd/controller/job_history.h"
#include "hmpmd/scheduler/resource_pool.h"
#include "hmpmd/scheduler/scheduler.h"
#include "hmpmd/sim/schedule_metrics.h"

namespace hmpmd {

// {"id", "name", "state", "error", "tasks", "done", "running", "steps",
//  "makespan_s", "lower_bound_s", "utilisation", "masking_ratio",
//  "bubble_ratio", ...}; metrics are computed when `with_metrics`, or
//  taken from `stored` (StoredMetricsText of the job before a restart)
//  where runs reloaded without their cores cannot give them. With a
//  `clock` (live jobs; a simulation has none), also the wall-clock times
//  beside the monotonic ones: "submitted_unix_us" and "submitted_at"
//  (RFC 3339), the same for started and finished (null until then), and
//  "history_missing" (one line) where the store kept runs without their
//  place. `queued` (Scheduler::QueuedRuns): of the job's dispatched runs,
//  those waiting on their lane behind another ("queued"; "running" counts
//  the others).
nlohmann::json JobSummaryJson(const JobRun& job, const ResourcePool& pool, bool with_metrics,
                              const std::string* stored = nullptr, const JobClock* clock = nullptr,
                              uint32_t queued = 0);

// Where and when run `r` of `job` ran: on its live core, or, for a run
// reloaded as done after a restart, as its history says. `past`: from the
// history; `placed` false: not known (not placed, or an older store).
struct RunPlaceView {
  bool placed = false;
  bool past = false;
  DeviceId device = 0;
  CoreKind kind = CoreKind::kCube;
  uint32_t lane = 0;
  std::string worker;                          // the device's name
  int64_t start_unix_us = 0, end_unix_us = 0;  // 0: not known (or no clock)
};
RunPlaceView ViewRun(const JobRun& job, uint32_t r, const ResourcePool& pool,
                     const JobClock* clock);
// The figures an ended job's store record keeps (JobEndedRecord::metrics):
// MetricsJson as text, or "" when its runs cannot give them (none done, or
// some reloaded without their cores).
std::string StoredMetricsText(const JobRun& job, const ResourcePool& pool);
// Sub-models whose device sets are short of their ask (JobRun::short_sets):
// [{"submodel", "asked", "got", "shared"}], and that list as one line of text.
nlohmann::json ShortSetsJson(const JobRun& job);
std::string ShortSetsText(const nlohmann::json& sets);
nlohmann::json MetricsJson(const ScheduleMetrics& m, const ResourcePool& pool);
// Chrome trace / Perfetto JSON: one "X" event per finished run, pid the
// device, tid the core; metadata events name them. With a simulation's
// `loads`, each state load is a "load" slice (category "state_load") on
// its device's load lane (tid 2000), args.task the first run that used it.
// With a `clock` (live jobs), runs done before a controller restart appear
// on devices of their own (pids after the pool's, named "WORKER (before a
// controller restart)"), ts counts on the wall clock from the first run,
// and a "clock_sync" metadata event gives ts 0 as Unix microseconds and
// RFC 3339; runs whose place the store did not keep are counted in a
// "history_missing" metadata event.
nlohmann::json TraceJson(const JobRun& job, const ResourcePool& pool,
                         const StateLoadTimes* loads = nullptr, const JobClock* clock = nullptr);
// TraceJson's text (as its dump() gives it), written event by event: the
// memory it takes is the text's, not a document's.
std::string TraceText(const JobRun& job, const ResourcePool& pool,
                      const StateLoadTimes* loads = nullptr, const JobClock* clock = nullptr);
// The summary `hmpmd run` prints; with `loads`, a line of the state its
// workers loaded (docs/scheduling.md#live-state).
std::string TextSummary(const JobRun& job, const ScheduleMetrics& m, const ResourcePool& pool,
                        const StateLoadTimes* loads = nullptr);
// A job's live state loads: how many (state_loads), their time and bytes
// (state_load_s, state_load_bytes), what their runs waited
// (state_load_exposed_s) and the share hidden (state_load_hidden_fraction).
nlohmann::json StateLoadsJson(const StateLoadTimes& loads);

// "cube0", "vector1": a core's name inside its device.
std::string CoreName(const ResourcePool::Core& core);
// Trace thread id of a core inside its device.
int TraceTid(const ResourcePool::Core& core);

}  // namespace hmpmd
