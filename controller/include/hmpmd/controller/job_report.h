// Renders a job for people and programs: the JSON summary of docs/cli.md's
// "Output", the per-task table, the Chrome trace, and the
// text summary `hmpmd run` prints. Live runs and simulations share it.
// Thread-safety: free functions over const state; the caller keeps that
// state still while they run (the controller calls them on its loop).
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "hmpmd/scheduler/resource_pool.h"
#include "hmpmd/scheduler/scheduler.h"
#include "hmpmd/sim/schedule_metrics.h"

namespace hmpmd {

// {"id", "name", "state", "error", "tasks", "done", "running", "steps",
//  "makespan_s", "lower_bound_s", "utilisation", "masking_ratio",
//  "bubble_ratio", ...}; metrics are computed when `with_metrics`, or
//  taken from `stored` (StoredMetricsText of the job before a restart)
//  where runs reloaded without their cores cannot give them.
nlohmann::json JobSummaryJson(const JobRun& job, const ResourcePool& pool, bool with_metrics,
                              const std::string* stored = nullptr);
// The figures an ended job's store record keeps (JobEndedRecord::metrics):
// MetricsJson as text, or "" when its runs cannot give them (none done, or
// some reloaded without their cores).
std::string StoredMetricsText(const JobRun& job, const ResourcePool& pool);
// Sub-models whose device sets are short of their ask (JobRun::short_sets):
// [{"submodel", "asked", "got", "shared"}], and that list as one line of text.
nlohmann::json ShortSetsJson(const JobRun& job);
std::string ShortSetsText(const nlohmann::json& sets);
nlohmann::json MetricsJson(const ScheduleMetrics& m, const ResourcePool& pool);
// One entry per task run: id, step, state, attempt, device, core, start, end.
// Times are microseconds from the job's first start.
nlohmann::json TasksJson(const JobRun& job, const ResourcePool& pool);
// Chrome trace / Perfetto JSON: one "X" event per finished run, pid the
// device, tid the core; metadata events name them. With a simulation's
// `loads`, each state load is a "load" slice (category "state_load") on
// its device's load lane (tid 2000), args.task the first run that used it.
nlohmann::json TraceJson(const JobRun& job, const ResourcePool& pool,
                         const StateLoadTimes* loads = nullptr);
// TraceJson's text (as its dump() gives it), written event by event: the
// memory it takes is the text's, not a document's.
std::string TraceText(const JobRun& job, const ResourcePool& pool,
                      const StateLoadTimes* loads = nullptr);
// The summary `hmpmd run` prints.
std::string TextSummary(const JobRun& job, const ScheduleMetrics& m, const ResourcePool& pool);

// "cube0", "vector1": a core's name inside its device.
std::string CoreName(const ResourcePool::Core& core);
// Trace thread id of a core inside its device.
int TraceTid(const ResourcePool::Core& core);

}  // namespace hmpmd
