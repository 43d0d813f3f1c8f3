#include "task_table.h"

#include <algorithm>
#include <charconv>
#include <limits>
#include <map>

#include "job_report.h"

namespace hmpmd {
namespace {

using json = nlohmann::json;

Result<uint64_t> ParseCount(std::string_view field, std::string_view v) {
  uint64_t out = 0;
  auto [p, ec] = std::from_chars(v.data(), v.data() + v.size(), out);
  if (ec != std::errc() || p != v.data() + v.size() || v.empty()) {
    return Status::InvalidArgument("query: " + std::string(field) +
                                   ": not a non-negative integer: '" + std::string(v) + "'");
  }
  return out;
}

Result<TaskState> ParseState(std::string_view v) {
  for (int s = 0; s <= static_cast<int>(TaskState::kCancelled); ++s) {
    if (TaskStateName(static_cast<TaskState>(s)) == v) return static_cast<TaskState>(s);
  }
  return Status::InvalidArgument("query: state: unknown task state '" + std::string(v) +
                                 "' (blocked, ready, running, done, failed, cancelled)");
}

TimeUs Origin(const JobRun& job) {
  TimeUs origin = std::numeric_limits<TimeUs>::max();
  for (const TaskRecord& r : job.runs) {
    if (r.state == TaskState::kDone) origin = std::min(origin, r.start);
  }
  return origin == std::numeric_limits<TimeUs>::max() ? job.started : origin;
}

json TaskEntry(const JobRun& job, const ResourcePool& pool, uint32_t r, TimeUs origin) {
  const JobGraph& g = *job.graph;
  const TaskRecord& rec = job.runs[r];
  const TaskSpec& t = g.spec_task(r % g.size());
  json e = {{"run", r},
            {"id", t.id},
            {"step", r / g.size()},
            {"submodel", g.spec().submodels[g.task(r % g.size()).submodel].name},
            {"kernel", t.kernel},
            {"core_kind", std::string(CoreKindName(t.core))},
            {"state", std::string(TaskStateName(rec.state))},
            {"attempt", rec.attempt}};
  if (rec.core != kNoCore) {
    const auto& core = pool.core(rec.core);
    e["device"] = core.device;
    e["core"] = CoreName(core);
  }
  if (rec.state == TaskState::kDone) {
    e["start_us"] = rec.start - origin;
    e["end_us"] = rec.end - origin;
  }
  if (rec.state == TaskState::kBlocked || rec.state == TaskState::kReady) {
    e["waiting"] = WaitingReason(job, pool, r);
  }
  return e;
}

}  // namespace

Result<TaskQuery> ParseTaskQuery(const std::string& query) {
  TaskQuery q;
  size_t i = 0;
  while (i < query.size()) {
    size_t amp = query.find('&', i);
    if (amp == std::string::npos) amp = query.size();
    std::string_view kv(query.data() + i, amp - i);
    i = amp + 1;
    if (kv.empty()) continue;
    size_t eq = kv.find('=');
    std::string_view k = kv.substr(0, eq), v = eq == kv.npos ? "" : kv.substr(eq + 1);
    if (k == "offset") {
      ASSIGN_OR_RETURN(q.offset, ParseCount(k, v));
    } else if (k == "limit") {
      ASSIGN_OR_RETURN(q.limit, ParseCount(k, v));
      if (q.limit == 0 || q.limit > kMaxTaskPage) {
        return Status::InvalidArgument("query: limit: must be 1 to " +
                                       std::to_string(kMaxTaskPage));
      }
    } else if (k == "state") {
      ASSIGN_OR_RETURN(q.state, ParseState(v));
    } else {
      return Status::InvalidArgument("query: unknown parameter '" + std::string(k) +
                                     "' (offset, limit, state)");
    }
  }
  return q;
}

json WaitingReason(const JobRun& job, const ResourcePool& pool, uint32_t r) {
  const JobGraph& g = *job.graph;
  const TaskRecord& rec = job.runs[r];
  const uint32_t i = r % g.size(), step = r / g.size();
  const TaskSpec& t = g.spec_task(i);
  const std::string kind(CoreKindName(t.core));
  if (rec.state == TaskState::kBlocked) {
    if (step > job.step) {
      return {{"for", "step"},
              {"reason", "waiting for step " + std::to_string(step - 1) + " to finish"}};
    }
    json inputs = json::array();
    std::string names;
    for (uint32_t in : g.task(i).inputs) {
      if (job.runs[step * g.size() + in].state == TaskState::kDone) continue;
      inputs.push_back(g.spec_task(in).id);
      if (inputs.size() <= 5) names += (names.empty() ? "" : ", ") + g.spec_task(in).id;
    }
    if (inputs.size() > 5) names += ", ...";
    return {{"for", "inputs"},
            {"inputs", std::move(inputs)},
            {"reason", "waiting for inputs " + names}};
  }
  if (rec.state == TaskState::kReady) {
    if (job.kernel_ids.size() > i && !pool.AnySupports(job.kernel_ids[i], t.core)) {
      return {{"for", "kernel"},
              {"core", kind},
              {"reason", "no live worker runs kernel '" + t.kernel + "' on a " + kind + " core"}};
    }
    return {{"for", "core"},
            {"core", kind},
            {"reason", "waiting for a free " + kind + " core (" +
                           std::to_string(pool.alive_cores(t.core)) + " alive)"}};
  }
  return json();
}

json TaskPageJson(const JobRun& job, const ResourcePool& pool, const TaskQuery& q) {
  TimeUs origin = Origin(job);
  json tasks = json::array();
  uint64_t total = 0;
  const uint64_t n = job.runs.size();
  if (!q.state) {
    total = n;
    for (uint64_t r = q.offset; r < n && r < q.offset + q.limit; ++r) {
      tasks.push_back(TaskEntry(job, pool, static_cast<uint32_t>(r), origin));
    }
  } else {
    for (uint64_t r = 0; r < n; ++r) {
      if (job.runs[r].state != *q.state) continue;
      if (total >= q.offset && total < q.offset + q.limit) {
        tasks.push_back(TaskEntry(job, pool, static_cast<uint32_t>(r), origin));
      }
      ++total;
    }
  }
  json out = {{"id", job.id}, {"total", total}, {"offset", q.offset}, {"limit", q.limit},
              {"origin_us", origin}};
  out["count"] = tasks.size();
  out["tasks"] = std::move(tasks);
  return out;
}

json SubmodelDagJson(const JobRun& job) {
  const JobGraph& g = *job.graph;
  const auto& subs = g.spec().submodels;
  struct Counts {
    uint64_t tasks = 0, done = 0, running = 0, ready = 0, blocked = 0;
  };
  std::vector<Counts> c(subs.size());
  std::map<std::pair<uint32_t, uint32_t>, uint64_t> edges;
  const uint32_t step = std::min(job.step, g.steps() - 1);
  for (uint32_t i = 0; i < g.size(); ++i) {
    const GraphTask& t = g.task(i);
    Counts& k = c[t.submodel];
    ++k.tasks;
    switch (job.runs[static_cast<uint64_t>(step) * g.size() + i].state) {
      case TaskState::kDone: ++k.done; break;
      case TaskState::kRunning: ++k.running; break;
      case TaskState::kReady: ++k.ready; break;
      case TaskState::kBlocked: ++k.blocked; break;
      default: break;
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
    nodes.push_back({{"name", subs[s].name}, {"kind", std::string(SubmodelKindName(subs[s].kind))},
                     {"depth", sub_depth[s] == UINT32_MAX ? 0 : sub_depth[s]}, {"tasks", c[s].tasks},
                     {"done", c[s].done}, {"running", c[s].running}, {"ready", c[s].ready},
                     {"blocked", c[s].blocked}});
  }
  json e = json::array();
  for (const auto& [k, count] : edges) {
    e.push_back({{"from", subs[k.first].name}, {"to", subs[k.second].name}, {"count", count}});
  }
  return {{"id", job.id}, {"step", step}, {"submodels", std::move(nodes)}, {"edges", std::move(e)}};
}

}  // namespace hmpmd
