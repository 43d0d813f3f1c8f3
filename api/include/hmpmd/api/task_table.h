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

#include "hmpmd/controller/job_history.h"
#include "hmpmd/protocol/status.h"
#include "hmpmd/scheduler/resource_pool.h"
#include "hmpmd/scheduler/scheduler.h"

namespace hmpmd {

struct TaskQuery {
  uint64_t offset = 0;  // first matching run to return. Default: 0.
  // Most runs returned. Default: 1000; at most kMaxTaskPage.
  uint64_t limit = 1000;
  std::optional<TaskState> state;  // only runs in this state; default: all
  // With state kRunning: only runs queued on their lane (true) or only
  // those it runs (false), as users see them ("queued", "running").
  bool queued = false;
};
inline constexpr uint64_t kMaxTaskPage = 10000;

// Parses "offset=0&limit=100&state=ready"; a one-line error names the field.
Result<TaskQuery> ParseTaskQuery(const std::string& query);

// One page of the task table, copied out of the loop's state so that the
// JSON is built on another thread (formatting is what costs; the copy is a
// few words per run). Holds the immutable graph for names.
struct TaskPage {
  struct Row {
    uint32_t run = 0;
    TaskState state = TaskState::kBlocked;
    bool queued = false;  // kRunning, waiting behind another run on its lane
    uint32_t attempt = 0;
    uint32_t retries = 0;  // TaskRecord::retries
    bool placed = false;
    DeviceId device = 0;
    CoreKind core_kind = CoreKind::kCube;
    uint32_t lane = 0;
    TimeUs start = 0, end = 0;
    TimeUs dispatched = 0;  // TaskRecord::dispatched, for running and queued runs
    // With a clock: the wall clock of start and end (0: not known), and
    // for a run done before a controller restart, where it ran then
    // (`past`; its worker's name) or that the store did not keep it.
    int64_t start_unix_us = 0, end_unix_us = 0;
    bool past = false;
    std::string worker;
    // Why a blocked or ready run waits.
    enum class Wait : uint8_t { kNone, kInputs, kStep, kCore, kKernel, kStore } wait = Wait::kNone;
    std::vector<uint32_t> pending_inputs;  // task indices, for kInputs
    uint32_t alive_cores = 0;              // of its kind, for kCore
  };
  std::shared_ptr<const JobGraph> graph;
  JobId id = 0;
  uint64_t total = 0, offset = 0, limit = 0;
  TimeUs origin = 0;
  std::vector<Row> rows;
};

// Copies the page `q` asks for. Loop thread (reads the job and pool). Costs
// the page, plus one pass over the runs when `q.state` filters. `clock`
// (Controller::ClockOf) adds wall-clock times and the places of runs done
// before a restart; null: neither. `lanes` (Scheduler::lane_order()) tells
// queued runs from running ones; null: all running (an ended job has none).
TaskPage SnapshotTaskPage(const JobRun& job, const ResourcePool& pool, const TaskQuery& q,
                          const JobClock* clock = nullptr, const LaneOrder* lanes = nullptr);

// {"id", "total", "offset", "limit", "count", "origin_us", "tasks": [...]}
// (origin_us: the job's first dispatch on the controller clock, which
// start_us/end_us count from); each task: run, id, step, submodel, kernel,
// core_kind, state, attempt, max_retries and retries where the spec asks for
// retries, device, core and worker once placed, start_us and end_us
// once done (with start_unix_us, end_unix_us, start_at and end_at, RFC
// 3339, where the wall clock is known), dispatched_us while running or
// queued (so a page opened mid-run can draw the runs out), "restored": true for a run done
// before a controller restart (its device is that controller's number),
// "history_missing": one line where the store did not keep its place, and for blocked and ready
// runs "waiting": {"for": "inputs"|"step"|"core"|"kernel"|"store", "inputs": [...], "core": kind,
// "reason": one line} ("store": its last placement try found no room for
// its outputs in the stores of the devices it may use). Any thread.
std::string RenderTaskPage(const TaskPage& page);

// Sub-model DAG of a job: {"submodels": [{name, kind, depth, tasks, done,
// queued, running, ready, blocked}], "edges": [{from, to, count}]}, over the
// step being run. depth: the least task depth in the sub-model (for
// layout). `lanes` as for SnapshotTaskPage.
nlohmann::json SubmodelDagJson(const JobRun& job, const LaneOrder* lanes = nullptr);

}  // namespace hmpmd
