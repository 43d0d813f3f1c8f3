#include "hmpmd/api/task_table.h"

#include <algorithm>
#include <charconv>
#include <cstdint>
#include <map>

#include "hmpmd/api/request_checks.h"
#include "hmpmd/controller/job_report.h"
#include "hmpmd/protocol/json_text.h"

namespace hmpmd {
namespace {

using json = nlohmann::json;

// An integer in [lo, hi], or "query: limit: '-1' is not an integer from 1 to 10000".
Result<uint64_t> ParseCount(std::string_view field, std::string_view v, uint64_t lo, uint64_t hi) {
  uint64_t out = 0;
  auto [p, ec] = std::from_chars(v.data(), v.data() + v.size(), out);
  if (ec != std::errc() || p != v.data() + v.size() || v.empty() || out < lo || out > hi) {
    const std::string range =
        hi == UINT64_MAX ? "a non-negative integer"
                         : "an integer from " + std::to_string(lo) + " to " + std::to_string(hi);
    return Status::InvalidArgument("query: " + std::string(field) + ": '" + std::string(v) +
                                   "' is not " + range);
  }
  return out;
}

Status ParseState(std::string_view v, TaskQuery* q) {
  if (v == "queued") {
    q->state = TaskState::kRunning;
    q->queued = true;
    return Status::Ok();
  }
  for (int s = 0; s <= static_cast<int>(TaskState::kCancelled); ++s) {
    if (TaskStateName(static_cast<TaskState>(s)) == v) {
      q->state = static_cast<TaskState>(s);
      return Status::Ok();
    }
  }
  return Status::InvalidArgument("query: state: unknown task state '" + std::string(v) +
                                 "' (blocked, ready, queued, running, done, failed, cancelled)");
}

}  // namespace

Result<TaskQuery> ParseTaskQuery(const std::string& query) {
  TaskQuery q;
  ASSIGN_OR_RETURN(QueryParams params, ParseQueryParams(query, "GET /api/v1/jobs/{id}/tasks",
                                                        {"offset", "limit", "state"}));
  for (const auto& [k, v] : params) {
    if (k == "offset") {
      ASSIGN_OR_RETURN(q.offset, ParseCount(k, v, 0, UINT64_MAX));
    } else if (k == "limit") {
      ASSIGN_OR_RETURN(q.limit, ParseCount(k, v, 1, kMaxTaskPage));
    } else {
      RETURN_IF_ERROR(ParseState(v, &q));
    }
  }
  return q;
}

namespace {

// Inputs of run `r` not done yet, by task index; at most `max` of them.
std::vector<uint32_t> PendingInputs(const JobRun& job, uint32_t r, size_t max = SIZE_MAX) {
  const JobGraph& g = *job.graph;
  const uint32_t i = r % g.size();
  std::vector<uint32_t> pending;
  for (uint32_t in : g.task(i).inputs) {
    if (pending.size() == max) break;
    if (job.runs[uint64_t{r} - i + in].state != TaskState::kDone) pending.push_back(in);
  }
  return pending;
}

// The state users see. Early dispatch makes a run ready while its inputs
// still run, and sends it to their core, queued behind them: it waits for
// them, so it shows as blocked on them, not as waiting for a core nor as
// running (its lane starts it only after they end). A run dispatched
// behind another on its lane is queued there until that one ends.
struct Shown {
  TaskState state = TaskState::kBlocked;
  bool queued = false;  // running in the scheduler's terms, not started
};
Shown ShownState(const JobRun& job, uint32_t r, const LaneOrder* lanes) {
  const TaskRecord& rec = job.runs[r];
  const TaskState s = rec.state;
  if ((s == TaskState::kReady || s == TaskState::kRunning) && !PendingInputs(job, r, 1).empty()) {
    return {TaskState::kBlocked};
  }
  return {s, s == TaskState::kRunning && lanes != nullptr && lanes->Behind(rec.core, rec.lane_seq)};
}

TaskPage::Row SnapshotRow(const JobRun& job, const ResourcePool& pool, uint32_t r,
                          const JobClock* clock, const LaneOrder* lanes) {
  const JobGraph& g = *job.graph;
  const TaskRecord& rec = job.runs[r];
  const uint32_t i = r % g.size(), step = r / g.size();
  const TaskSpec& t = g.spec_task(i);
  TaskPage::Row row;
  row.run = r;
  const Shown shown = ShownState(job, r, lanes);
  row.state = shown.state;
  row.queued = shown.queued;
  row.attempt = rec.attempt;
  row.retries = rec.retries;
  if (clock != nullptr || rec.core != kNoCore) {
    RunPlaceView v = ViewRun(job, r, pool, clock);
    row.placed = v.placed;
    row.device = v.device;
    row.core_kind = v.kind;
    row.lane = v.lane;
    row.past = v.past || (rec.state == TaskState::kDone && rec.core == kNoCore);
    row.worker = std::move(v.worker);
    row.start_unix_us = v.start_unix_us;
    row.end_unix_us = v.end_unix_us;
  }
  row.start = rec.start;
  row.end = rec.end;
  if (rec.state == TaskState::kRunning) row.dispatched = rec.dispatched;
  using Wait = TaskPage::Row::Wait;
  if (row.state == TaskState::kBlocked) {
    if (step > job.step) {
      row.wait = Wait::kStep;
    } else {
      row.wait = Wait::kInputs;
      row.pending_inputs = PendingInputs(job, r);
    }
  } else if (row.state == TaskState::kReady) {
    bool supported = job.kernel_ids.size() <= i || pool.AnySupports(job.kernel_ids[i], t.core);
    row.wait = !supported ? Wait::kKernel : rec.store_wait ? Wait::kStore : Wait::kCore;
    row.alive_cores = pool.alive_cores(t.core);
  }
  return row;
}

json RenderRow(const JobGraph& g, const TaskPage::Row& row, TimeUs origin) {
  const uint32_t i = row.run % g.size(), step = row.run / g.size();
  const TaskSpec& t = g.spec_task(i);
  const std::string kind(CoreKindName(t.core));
  json e = {{"run", row.run},
            {"id", t.id},
            {"step", step},
            {"submodel", g.spec().submodels[g.task(i).submodel].name},
            {"kernel", t.kernel},
            {"core_kind", kind},
            {"state", row.queued ? std::string("queued") : std::string(TaskStateName(row.state))},
            {"attempt", row.attempt}};
  // Only where the task requires labels (its own and its sub-model's).
  if (!t.required.empty()) {
    json labels = json::object();
    for (const Label& l : t.required) labels[l.key] = l.value;
    e["requires"] = std::move(labels);
  }
  // Only where the spec asks for retries: most tasks have none.
  if (t.max_retries > 0) {
    e["max_retries"] = t.max_retries;
    e["retries"] = row.retries;
  }
  if (row.placed) {
    e["device"] = row.device;
    e["core"] = std::string(CoreKindName(row.core_kind)) + std::to_string(row.lane);
    if (!row.worker.empty()) e["worker"] = row.worker;
  }
  if (row.past) {
    e["restored"] = true;
    if (!row.placed) {
      e["history_missing"] =
          "done before a controller restart; the job store did not keep where it ran (written "
          "by an older version)";
    }
  }
  if (row.state == TaskState::kDone) {
    e["start_us"] = row.start - origin;
    e["end_us"] = row.end - origin;
    if (row.start_unix_us > 0) {
      e["start_unix_us"] = row.start_unix_us;
      e["end_unix_us"] = row.end_unix_us;
      e["start_at"] = Rfc3339(row.start_unix_us);
      e["end_at"] = Rfc3339(row.end_unix_us);
    }
  }
  if (row.state == TaskState::kRunning) {
    e["dispatched_us"] = row.dispatched - origin;
  }
  using Wait = TaskPage::Row::Wait;
  switch (row.wait) {
    case Wait::kNone:
      break;
    case Wait::kStep:
      e["waiting"] = {{"for", "step"},
                      {"reason", "waiting for step " + std::to_string(step - 1) + " to finish"}};
      break;
    case Wait::kInputs: {
      json inputs = json::array();
      std::string names;
      for (uint32_t in : row.pending_inputs) {
        inputs.push_back(g.spec_task(in).id);
        if (inputs.size() <= 5) names += (names.empty() ? "" : ", ") + g.spec_task(in).id;
      }
      if (inputs.size() > 5) names += ", ...";
      e["waiting"] = {{"for", "inputs"},
                      {"inputs", std::move(inputs)},
                      {"reason", "waiting for inputs " + names}};
      break;
    }
    case Wait::kCore:
      e["waiting"] = {{"for", "core"},
                      {"core", kind},
                      {"reason", "waiting for a free " + kind + " core (" +
                                     std::to_string(row.alive_cores) + " alive)"}};
      break;
    case Wait::kStore:
      e["waiting"] = {{"for", "store"},
                      {"core", kind},
                      {"reason",
                       "waiting for room for its outputs in the object store (--memory-mb) of a "
                       "device it may run on"}};
      break;
    case Wait::kKernel:
      e["waiting"] = {
          {"for", "kernel"},
          {"core", kind},
          {"reason", "no live worker runs kernel '" + t.kernel + "' on a " + kind + " core" +
                         (t.required.empty() ? "" : " with " + LabelsText(t.required))}};
      break;
  }
  return e;
}

}  // namespace

TaskPage SnapshotTaskPage(const JobRun& job, const ResourcePool& pool, const TaskQuery& q,
                          const JobClock* clock, const LaneOrder* lanes) {
  TaskPage page;
  // An open job's graph (a driver session) grows on the loop while the page
  // renders elsewhere: the page gets a copy of it.
  page.graph = job.open ? std::make_shared<const JobGraph>(*job.graph) : job.graph;
  page.id = job.id;
  page.offset = q.offset;
  page.limit = q.limit;
  // Times count from the job's first dispatch: known without walking the
  // runs, so a page costs the page, not the job.
  page.origin = job.started >= 0 ? job.started : job.submitted;
  const uint64_t n = job.runs.size();
  if (!q.state) {
    page.total = n;
    for (uint64_t r = q.offset; r < n && r < q.offset + q.limit; ++r) {
      page.rows.push_back(SnapshotRow(job, pool, static_cast<uint32_t>(r), clock, lanes));
    }
    return page;
  }
  for (uint64_t r = 0; r < n; ++r) {
    const Shown shown = ShownState(job, static_cast<uint32_t>(r), lanes);
    if (shown.state != *q.state || shown.queued != q.queued) continue;
    if (page.total >= q.offset && page.total < q.offset + q.limit) {
      page.rows.push_back(SnapshotRow(job, pool, static_cast<uint32_t>(r), clock, lanes));
    }
    ++page.total;
  }
  return page;
}

std::string RenderTaskPage(const TaskPage& page) {
  json tasks = json::array();
  for (const TaskPage::Row& row : page.rows)
    tasks.push_back(RenderRow(*page.graph, row, page.origin));
  json out = {{"id", page.id},       {"total", page.total},      {"offset", page.offset},
              {"limit", page.limit}, {"origin_us", page.origin}, {"count", page.rows.size()}};
  out["tasks"] = std::move(tasks);
  return JsonText(out);
}

json SubmodelDagJson(const JobRun& job, const LaneOrder* lanes) {
  const JobGraph& g = *job.graph;
  const auto& subs = g.spec().submodels;
  struct Counts {
    uint64_t tasks = 0, done = 0, queued = 0, running = 0, ready = 0, blocked = 0;
  };
  std::vector<Counts> c(subs.size());
  std::map<std::pair<uint32_t, uint32_t>, uint64_t> edges;
  const uint32_t step = std::min(job.step, g.steps() - 1);
  for (uint32_t i = 0; i < g.size(); ++i) {
    const GraphTask& t = g.task(i);
    Counts& k = c[t.submodel];
    ++k.tasks;
    const Shown shown = ShownState(job, step * g.size() + i, lanes);
    switch (shown.state) {
      case TaskState::kDone:
        ++k.done;
        break;
      case TaskState::kRunning:
        ++(shown.queued ? k.queued : k.running);
        break;
      case TaskState::kReady:
        ++k.ready;
        break;
      case TaskState::kBlocked:
        ++k.blocked;
        break;
      default:
        break;
    }
    for (uint32_t in : t.inputs) {
      uint32_t from = g.task(in).submodel;
      if (from != t.submodel) ++edges[{from, t.submodel}];
    }
  }
  // Depth of a sub-model: the smallest depth (longest path from a root in
  // the acyclic task graph) of its tasks; sub-model edges may form cycles
  // (forward and backward passes), task edges never do.
  std::vector<uint32_t> depth(g.size(), 0);
  std::vector<uint32_t> sub_depth(subs.size(), UINT32_MAX);
  for (uint32_t i : g.topo_order()) {
    for (uint32_t in : g.task(i).inputs) depth[i] = std::max(depth[i], depth[in] + 1);
    uint32_t& d = sub_depth[g.task(i).submodel];
    d = std::min(d, depth[i]);
  }
  json nodes = json::array();
  for (size_t s = 0; s < subs.size(); ++s) {
    nodes.push_back({{"name", subs[s].name},
                     {"kind", std::string(SubmodelKindName(subs[s].kind))},
                     {"depth", sub_depth[s] == UINT32_MAX ? 0 : sub_depth[s]},
                     {"tasks", c[s].tasks},
                     {"done", c[s].done},
                     {"queued", c[s].queued},
                     {"running", c[s].running},
                     {"ready", c[s].ready},
                     {"blocked", c[s].blocked}});
  }
  json e = json::array();
  for (const auto& [k, count] : edges) {
    e.push_back({{"from", subs[k.first].name}, {"to", subs[k.second].name}, {"count", count}});
  }
  return {{"id", job.id}, {"step", step}, {"submodels", std::move(nodes)}, {"edges", std::move(e)}};
}

}  // namespace hmpmd
