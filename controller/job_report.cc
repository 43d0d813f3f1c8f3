#include "hmpmd/controller/job_report.h"

#include <algorithm>
#include <cstdio>
#include <limits>
#include <map>
#include <set>

#include "hmpmd/protocol/json_text.h"

namespace hmpmd {
namespace {

using json = nlohmann::json;

// Runs reloaded from a job store after a restart keep their times but not
// their core, so placement-based metrics cannot cover them.
bool AllDonePlaced(const JobRun& job) {
  for (const TaskRecord& rec : job.runs) {
    if (rec.state == TaskState::kDone && rec.core == kNoCore) return false;
  }
  return true;
}

TimeUs Origin(const JobRun& job) {
  TimeUs origin = std::numeric_limits<TimeUs>::max();
  for (const TaskRecord& r : job.runs) {
    if (r.state == TaskState::kDone) origin = std::min(origin, r.start);
  }
  return origin == std::numeric_limits<TimeUs>::max() ? job.started : origin;
}

std::string Fixed(double v, int digits) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f", digits, v);
  return buf;
}

}  // namespace

std::string CoreName(const ResourcePool::Core& core) {
  return std::string(CoreKindName(core.kind)) + std::to_string(core.lane);
}

int TraceTid(const ResourcePool::Core& core) {
  return static_cast<int>(core.kind) * 1000 + static_cast<int>(core.lane);
}

json MetricsJson(const ScheduleMetrics& m, const ResourcePool& pool) {
  json j;
  j["makespan_s"] = m.makespan_s;
  j["lower_bound_s"] = m.lower_bound_s;
  j["critical_path_s"] = m.critical_path_s;
  j["utilisation"] = m.utilisation;
  j["utilisation_by_kind"] = {{"cube", m.utilisation_by_kind[0]},
                              {"vector", m.utilisation_by_kind[1]}};
  json devs = json::array();
  for (const auto& d : m.utilisation_by_device) {
    devs.push_back({{"device", d.device}, {"name", d.name}, {"utilisation", d.utilisation}});
  }
  j["utilisation_by_device"] = std::move(devs);
  j["comm_s"] = m.comm_s;
  j["masking_ratio"] = m.masking_ratio;
  j["bubble_ratio"] = m.bubble_ratio;
  json cp = json::array();
  for (size_t i = 0; i < m.critical_path.size() && i < 64; ++i) {
    const auto& e = m.critical_path[i];
    cp.push_back({{"task", e.task},
                  {"step", e.step},
                  {"device", e.device},
                  {"core", std::string(CoreKindName(e.kind))},
                  {"duration_s", e.duration_us / 1e6}});
  }
  j["critical_path"] = std::move(cp);
  (void)pool;
  return j;
}

json ShortSetsJson(const JobRun& job) {
  json out = json::array();
  const auto& submodels = job.graph->spec().submodels;
  for (const SetShortfall& f : job.short_sets) {
    out.push_back({{"submodel", f.submodel < submodels.size() ? submodels[f.submodel].name : ""},
                   {"asked", f.asked},
                   {"got", f.got},
                   {"shared", f.shared}});
  }
  return out;
}

std::string ShortSetsText(const json& sets) {
  std::string out;
  for (const json& f : sets) {
    if (!f.is_object()) continue;
    if (!out.empty()) out += "; ";
    const unsigned asked = f.value("asked", 0u);
    out += "sub-model '" + f.value("submodel", std::string()) + "' asked for " +
           std::to_string(asked) + (asked == 1 ? " device" : " devices") + " and got " +
           std::to_string(f.value("got", 0u));
    if (f.value("shared", 0u) > 0) {
      out += ", " + std::to_string(f.value("shared", 0u)) + " of them shared with other sub-models";
    }
  }
  return out;
}

std::string StoredMetricsText(const JobRun& job, const ResourcePool& pool) {
  if (job.done == 0 || !AllDonePlaced(job)) return {};
  return JsonText(MetricsJson(ComputeMetrics(job, pool), pool));
}

RunPlaceView ViewRun(const JobRun& job, uint32_t r, const ResourcePool& pool,
                     const JobClock* clock) {
  RunPlaceView v;
  const TaskRecord& rec = job.runs[r];
  const bool done = rec.state == TaskState::kDone;
  if (clock != nullptr && done) {
    v.start_unix_us = clock->wall.ToUnixUs(rec.start);
    v.end_unix_us = clock->wall.ToUnixUs(rec.end);
  }
  if (rec.core != kNoCore) {
    const auto& core = pool.core(rec.core);
    v.placed = true;
    v.device = core.device;
    v.kind = core.kind;
    v.lane = core.lane;
    v.worker = pool.device(core.device).desc.name;
    return v;
  }
  const PastRun* p = done && clock != nullptr && clock->history ? clock->history->Find(r) : nullptr;
  if (p == nullptr) return v;
  v.past = true;
  v.placed = p->placed;
  v.device = p->device;
  v.kind = p->kind;
  v.lane = p->lane;
  v.worker = clock->history->WorkerOf(*p);
  // The store's wall clock, which a reboot between keeps (the monotonic
  // one restarts).
  if (p->start_unix_us > 0) v.start_unix_us = p->start_unix_us;
  if (p->end_unix_us > 0) v.end_unix_us = p->end_unix_us;
  return v;
}

namespace {

// Unix microseconds of a job's monotonic time `t` (-1: none, null), or the
// stored one where the job was reloaded with it.
json UnixJson(const JobClock& clock, TimeUs t, int64_t stored) {
  if (t < 0) return nullptr;
  return stored > 0 ? stored : clock.wall.ToUnixUs(t);
}

void AddWallTimes(const JobRun& job, const JobClock& clock, json& j) {
  const JobHistory* h = clock.history.get();
  const std::pair<const char*, json> times[] = {
      {"submitted", UnixJson(clock, job.submitted, h ? h->submitted_unix_us : 0)},
      {"started", UnixJson(clock, job.started, h ? h->started_unix_us : 0)},
      {"finished", UnixJson(clock, job.finished, h ? h->finished_unix_us : 0)}};
  for (const auto& [name, unix_us] : times) {
    j[std::string(name) + "_unix_us"] = unix_us;
    j[std::string(name) + "_at"] =
        unix_us.is_number() ? json(Rfc3339(unix_us.get<int64_t>())) : json(nullptr);
  }
  if (h != nullptr && h->unplaced > 0) {
    j["history_missing"] = std::to_string(h->unplaced) +
                           " runs done before a controller restart were stored without their "
                           "worker and core (a job store written by an older version): the "
                           "trace, task table and Gantt chart cannot show where they ran";
  }
}

}  // namespace

json StateLoadsJson(const StateLoadTimes& loads) {
  double seconds = 0, exposed = 0;
  uint64_t bytes = 0;
  for (const StateLoadTimes::Slice& s : loads.slices) {
    seconds += static_cast<double>(s.end - s.start) / 1e6;
    exposed += static_cast<double>(s.waited) / 1e6;
    bytes += s.bytes;
  }
  return json{{"state_loads", loads.slices.size()},
              {"state_load_s", seconds},
              {"state_load_bytes", bytes},
              {"state_load_exposed_s", exposed},
              {"state_load_hidden_fraction", seconds > 0 ? 1 - exposed / seconds : 0.0}};
}

json JobSummaryJson(const JobRun& job, const ResourcePool& pool, bool with_metrics,
                    const std::string* stored, const JobClock* clock, uint32_t queued) {
  json j;
  j["id"] = job.id;
  j["name"] = job.graph->spec().name;
  j["state"] = std::string(JobStateName(job.state));
  if (!job.tenant.name.empty()) j["tenant"] = job.tenant.name;
  if (!job.error.empty()) j["error"] = job.error;
  if (!job.waiting.empty() && !IsTerminal(job.state)) j["waiting"] = job.waiting;
  // Device sets short of their ask (hmpmd's elastic sets on a small pool).
  if (!job.short_sets.empty()) {
    j["short_sets"] = ShortSetsJson(job);
  }
  j["tasks"] = job.graph->total_runs();
  j["tasks_per_step"] = job.graph->size();
  j["steps"] = job.graph->steps();
  j["done"] = job.done;
  const uint64_t waiting = std::min<uint64_t>(queued, job.running);
  j["queued"] = waiting;
  j["running"] = job.running - waiting;
  j["progress"] = job.graph->total_runs() ? double(job.done) / job.graph->total_runs() : 0.0;
  j["submitted_us"] = job.submitted;
  // null until the first dispatch and until the end (never, for a job
  // that ended before any run started).
  j["started_us"] = job.started >= 0 ? json(job.started) : json(nullptr);
  j["finished_us"] = job.finished >= 0 ? json(job.finished) : json(nullptr);
  if (clock != nullptr) AddWallTimes(job, *clock, j);
  if (clock != nullptr && clock->loads != nullptr) j.update(StateLoadsJson(*clock->loads));
  json kept = with_metrics && stored != nullptr && !stored->empty()
                  ? json::parse(*stored, nullptr, /*allow_exceptions=*/false)
                  : json();
  // A job that ended with no run done has no step to measure.
  if (with_metrics && job.done > 0 && AllDonePlaced(job)) {
    j.update(MetricsJson(ComputeMetrics(job, pool), pool));
  } else if (kept.is_object()) {
    j.update(kept);  // kept with its end: the reloaded runs have no cores
  } else if (const double s = IsTerminal(job.state) ? MakespanS(job) : 0; s > 0) {
    j["makespan_s"] = s;  // the jobs list: an ended job's step time alone
  } else {
    j["makespan_s"] = nullptr;
  }
  return j;
}

namespace {

// Trace names of the devices runs done before a restart ran on: pids after
// the pool's, one per (worker, device) in order of first use.
class PastDevices {
 public:
  explicit PastDevices(size_t first_pid) : next_(first_pid) {}
  // The pid of `v`'s device; `fresh` true the first time it is asked.
  size_t Pid(const RunPlaceView& v, bool* fresh) {
    auto [it, added] = pids_.try_emplace({v.worker, v.device}, next_);
    if (added) ++next_;
    *fresh = added;
    return it->second;
  }

 private:
  std::map<std::pair<std::string, DeviceId>, size_t> pids_;
  size_t next_;
};

// Calls `add` with each event of the job's trace, in order.
template <typename Add>
void ForEachTraceEvent(const JobRun& job, const ResourcePool& pool, const StateLoadTimes* loads,
                       const JobClock* clock, const Add& add) {
  const JobGraph& g = *job.graph;
  TimeUs origin = Origin(job);
  // With a clock, ts counts on the wall clock from the first run's start,
  // so that runs of controllers before a restart line up with the live ones.
  int64_t origin_unix = std::numeric_limits<int64_t>::max();
  uint64_t missing = 0;
  if (clock != nullptr) {
    for (uint32_t r = 0; r < job.runs.size(); ++r) {
      if (job.runs[r].state != TaskState::kDone) continue;
      const int64_t start = ViewRun(job, r, pool, clock).start_unix_us;
      if (start > 0) origin_unix = std::min(origin_unix, start);
    }
    if (origin_unix == std::numeric_limits<int64_t>::max()) {
      origin_unix = clock->wall.ToUnixUs(origin);
    }
    add(json{{"ph", "M"},
             {"name", "clock_sync"},
             {"pid", 0},
             {"args", {{"ts0_unix_us", origin_unix}, {"ts0", Rfc3339(origin_unix)}}}});
  }
  std::vector<bool> named_device(pool.device_count(), false);
  std::vector<bool> named_core(pool.core_count(), false);
  PastDevices past(pool.device_count());
  std::set<std::pair<size_t, int>> named_past_core;
  for (uint32_t r = 0; r < job.runs.size(); ++r) {
    const TaskRecord& rec = job.runs[r];
    if (rec.state != TaskState::kDone) continue;
    const TaskSpec& t = g.spec_task(r % g.size());
    size_t pid = 0;
    int tid = 0;
    TimeUs ts = rec.start - origin;
    if (rec.core != kNoCore) {
      const auto& core = pool.core(rec.core);
      pid = core.device;
      tid = TraceTid(core);
      if (!named_device[core.device]) {
        named_device[core.device] = true;
        add(json{{"ph", "M"},
                 {"name", "process_name"},
                 {"pid", core.device},
                 {"args",
                  {{"name", "device " + std::to_string(core.device) + " " +
                                pool.device(core.device).desc.name}}}});
      }
      if (!named_core[rec.core]) {
        named_core[rec.core] = true;
        add(json{{"ph", "M"},
                 {"name", "thread_name"},
                 {"pid", core.device},
                 {"tid", TraceTid(core)},
                 {"args", {{"name", CoreName(core)}}}});
      }
      if (clock != nullptr) ts = clock->wall.ToUnixUs(rec.start) - origin_unix;
    } else {
      const RunPlaceView v = clock != nullptr ? ViewRun(job, r, pool, clock) : RunPlaceView{};
      if (!v.placed) {
        ++missing;
        continue;
      }
      bool fresh = false;
      pid = past.Pid(v, &fresh);
      tid = static_cast<int>(v.kind) * 1000 + static_cast<int>(v.lane);
      if (fresh) {
        add(json{{"ph", "M"},
                 {"name", "process_name"},
                 {"pid", pid},
                 {"args",
                  {{"name", "device " + std::to_string(v.device) + " " + v.worker +
                                " (before a controller restart)"}}}});
      }
      if (named_past_core.insert({pid, tid}).second) {
        add(json{{"ph", "M"},
                 {"name", "thread_name"},
                 {"pid", pid},
                 {"tid", tid},
                 {"args", {{"name", std::string(CoreKindName(v.kind)) + std::to_string(v.lane)}}}});
      }
      ts = v.start_unix_us > 0 ? v.start_unix_us - origin_unix
                               : clock->wall.ToUnixUs(rec.start) - origin_unix;
    }
    add(json{{"name", t.id},
             {"cat", g.spec().submodels[g.task(r % g.size()).submodel].name},
             {"ph", "X"},
             {"ts", ts},
             {"dur", rec.end - rec.start},
             {"pid", pid},
             {"tid", tid},
             {"args",
              {{"task", t.id},
               {"job", job.id},
               {"step", r / g.size()},
               {"kernel", t.kernel},
               {"attempt", rec.attempt}}}});
  }
  if (clock != nullptr && missing > 0) {
    add(json{
        {"ph", "M"},
        {"name", "history_missing"},
        {"pid", 0},
        {"args",
         {{"runs", missing},
          {"reason", std::to_string(missing) +
                         " runs done before a controller restart are not shown: the job store kept "
                         "them without their worker and core (written by an older version)"}}}});
  }
  if (loads == nullptr && clock != nullptr) loads = clock->loads.get();
  if (loads == nullptr) return;
  // Loads run on each device's load lane, a thread of their own.
  constexpr int kLoadTid = 2000;
  std::vector<bool> named_lane(pool.device_count(), false);
  for (const StateLoadTimes::Slice& s : loads->slices) {
    if (s.device >= pool.device_count()) continue;
    if (!named_device[s.device]) {
      named_device[s.device] = true;
      add(json{{"ph", "M"},
               {"name", "process_name"},
               {"pid", s.device},
               {"args",
                {{"name",
                  "device " + std::to_string(s.device) + " " + pool.device(s.device).desc.name}}}});
    }
    if (!named_lane[s.device]) {
      named_lane[s.device] = true;
      add(json{{"ph", "M"},
               {"name", "thread_name"},
               {"pid", s.device},
               {"tid", kLoadTid},
               {"args", {{"name", "state load"}}}});
    }
    json args = {{"job", job.id}, {"prefetch", s.prefetch}};
    if (s.bytes > 0) args["bytes"] = s.bytes;
    if (s.run != kNoRun && s.run < job.runs.size()) args["task"] = g.spec_task(s.run % g.size()).id;
    add(json{
        {"name", "load " + g.spec().submodels[s.submodel].name},
        {"cat", "state_load"},
        {"ph", "X"},
        {"ts", clock != nullptr ? clock->wall.ToUnixUs(s.start) - origin_unix : s.start - origin},
        {"dur", s.end - s.start},
        {"pid", s.device},
        {"tid", kLoadTid},
        {"args", std::move(args)}});
  }
}

}  // namespace

json TraceJson(const JobRun& job, const ResourcePool& pool, const StateLoadTimes* loads,
               const JobClock* clock) {
  json events = json::array();
  ForEachTraceEvent(job, pool, loads, clock, [&](json e) { events.push_back(std::move(e)); });
  return {{"traceEvents", std::move(events)}, {"displayTimeUnit", "ms"}};
}

std::string TraceText(const JobRun& job, const ResourcePool& pool, const StateLoadTimes* loads,
                      const JobClock* clock) {
  // The text of JsonText(TraceJson(...)), without its document, which costs
  // about 2 KB a run (1.7 GB more for a 1e6-run trace).
  std::string out = R"({"displayTimeUnit":"ms","traceEvents":[)";
  bool first = true;
  ForEachTraceEvent(job, pool, loads, clock, [&](const json& e) {
    if (!first) out += ',';
    first = false;
    out += JsonText(e);
  });
  out += "]}";
  return out;
}

std::string TextSummary(const JobRun& job, const ScheduleMetrics& m, const ResourcePool& pool,
                        const StateLoadTimes* loads) {
  std::string out;
  out += "job " + std::to_string(job.id) + " '" + job.graph->spec().name +
         "': " + std::string(JobStateName(job.state));
  if (!job.error.empty()) out += " (" + job.error + ")";
  out += "\n";
  out += "  tasks        " + std::to_string(m.tasks) + " of " +
         std::to_string(job.graph->total_runs()) + " (" + std::to_string(job.graph->size()) +
         " per step x " + std::to_string(job.graph->steps()) + " steps)\n";
  out += "  makespan     " + Fixed(m.makespan_s * 1e3, 3) + " ms (lower bound " +
         Fixed(m.lower_bound_s * 1e3, 3) + " ms, ratio " +
         Fixed(m.lower_bound_s > 0 ? m.makespan_s / m.lower_bound_s : 0, 2) + ")\n";
  out += "  utilisation  " + Fixed(m.utilisation * 100, 1) + "% overall, cube " +
         Fixed(m.utilisation_by_kind[0] * 100, 1) + "%, vector " +
         Fixed(m.utilisation_by_kind[1] * 100, 1) + "%\n";
  out += "  bubble ratio " + Fixed(m.bubble_ratio * 100, 1) + "%, comm masking " +
         Fixed(m.masking_ratio * 100, 1) + "% of " + Fixed(m.comm_s * 1e3, 3) + " ms comm\n";
  if (loads != nullptr && !loads->slices.empty()) {
    const json l = StateLoadsJson(*loads);
    out += "  state loads  " + std::to_string(loads->slices.size()) + ", " +
           Fixed(l["state_load_bytes"].get<double>() / 1e6, 3) + " MB in " +
           Fixed(l["state_load_s"].get<double>() * 1e3, 3) + " ms, " +
           Fixed(l["state_load_hidden_fraction"].get<double>() * 100, 1) +
           "% hidden under the tasks ahead\n";
  }
  out += "  per device:\n";
  for (const auto& d : m.utilisation_by_device) {
    out += "    device " + std::to_string(d.device) + " " + d.name + ": " +
           Fixed(d.utilisation * 100, 1) + "%\n";
  }
  // The longest tasks on the critical path: where the time goes.
  std::vector<CriticalPathEntry> top = m.critical_path;
  std::stable_sort(top.begin(), top.end(),
                   [](const auto& a, const auto& b) { return a.duration_us > b.duration_us; });
  double cp_total = 0;
  for (const auto& e : m.critical_path) cp_total += e.duration_us;
  out += "  critical path: " + std::to_string(m.critical_path.size()) + " tasks, " +
         Fixed(cp_total / 1e3, 3) + " ms busy; longest:\n";
  for (size_t i = 0; i < top.size() && i < 5; ++i) {
    out += "    " + top[i].task + " (step " + std::to_string(top[i].step) + ", device " +
           std::to_string(top[i].device) + " " + std::string(CoreKindName(top[i].kind)) + ") " +
           Fixed(top[i].duration_us / 1e3, 3) + " ms\n";
  }
  (void)pool;
  return out;
}

}  // namespace hmpmd
