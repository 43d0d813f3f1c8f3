// TaskTable: one page of a job's per-task table for GET /api/v1/jobs/{id}/tasks,
// with, for every task that has not run yet, why it is waiting.
//
// A job may hold millions of runs, so the table is paged (offset, limit)
// and may be filtered by state; the cost of one call is the page plus one
// pass over the runs when a filter is given.
// Thread-safety: free functions over const state; call on the controller
// loop (which keeps the job still while they run).
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "hmpmd/protocol/status.h"
#include "hmpmd/scheduler/resource_pool.h"
#include "hmpmd/scheduler/scheduler.h"

namespace hmpmd {

struct TaskQuery {
  uint64_t offset = 0;  // first matching run to return. Default: 0.
  // Most runs returned. Default: 1000; at most kMaxTaskPage.
  uint64_t limit = 1000;
  std::optional<TaskState> state;  // only runs in this state; default: all
};
inline constexpr uint64_t kMaxTaskPage = 10000;

// Parses "offset=0&limit=100&state=ready"; a one-line error names the field.
Result<TaskQuery> ParseTaskQuery(const std::string& query);

// {"id", "total", "offset", "limit", "count", "origin_us", "tasks": [...]}
// (origin_us: the controller-clock time start_us/end_us count from); each task as
// TasksJson's entries plus, for blocked and ready runs, "waiting": {"for":
// "inputs"|"step"|"core"|"kernel", "inputs": [...], "core": kind, "reason":
// one line}.
nlohmann::json TaskPageJson(const JobRun& job, const ResourcePool& pool, const TaskQuery& q);

// Why run `r` of `job` has not started; empty for runs that did.
nlohmann::json WaitingReason(const JobRun& job, const ResourcePool& pool, uint32_t r);

// Sub-model DAG of a job: {"submodels": [{name, kind, depth, tasks, done,
// running, ready, blocked}], "edges": [{from, to, count}]}, over the step
// being run. depth: the least task depth in the sub-model (for layout).
nlohmann::json SubmodelDagJson(const JobRun& job);

}  // namespace hmpmd
