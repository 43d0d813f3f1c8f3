// `hmpmd sim WORKLOAD [--devices N | --pool POOL.json] [--policy NAME]
// [--json] [--trace FILE]`: discrete-event simulation of one job on a
// modelled supernode, every policy side by side unless --policy picks one.
// WORKLOAD is a job spec file or a built-in generator name. The figures come
// from the same ScheduleMetrics and job_report code a live run uses.
#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <new>
#include <nlohmann/json.hpp>

#include "cli_common.h"
#include "hmpmd/controller/job_report.h"
#include "hmpmd/controller/job_spec_parser.h"
#include "hmpmd/protocol/json_text.h"
#include "hmpmd/protocol/strict_json.h"
#include "hmpmd/sim/simulator.h"
#include "hmpmd/sim/workloads.h"
#include "sim_several.h"

namespace hmpmd {
namespace {

using json = nlohmann::json;

// Devices of a simulated pool at most (ValidatePoolSpec's limit).
constexpr uint64_t kMaxSimDevices = 1'000'000;

struct SimArgs {
  std::vector<std::string> workloads;  // several: submitted together
  std::string weights_text;            // --weights as given: "3,1"
  std::vector<uint32_t> weights;       // per workload; empty: the specs' own
  std::string workload;                // the one LoadWorkload reads
  uint32_t devices = 384;
  std::string pool_file;
  std::string policy;  // empty: all
  bool json = false;
  std::string trace_file;
  std::string seed_text = "1";  // --seed as given
  uint64_t seed = 1;
  bool pinned = false;  // elastic: false on the job
  // Task runs (tasks x repeat) simulated at most: each costs about 1 KB of
  // memory over the run. Default: 20,000,000 (about 20 GB).
  uint64_t max_runs = 20'000'000;
};

// How big a simulation had grown, for the message when memory runs out.
struct SimSize {
  uint32_t devices = 0;  // the pool's, once known
  uint64_t runs = 0;     // task runs of the workloads sized so far
  bool about = false;    // `runs` holds a built-in's estimate
};

using ojson = nlohmann::ordered_json;

// Cores of one kind per device at most (as a worker's --cores).
constexpr uint32_t kMaxCoresPerKind = 256;

// Reads `obj[key]` as an integer in [min, max] into `out` when present.
template <typename T>
Status Count(const ojson& obj, const std::string& path, const char* key, uint64_t min, uint64_t max,
             T* out) {
  auto it = obj.find(key);
  if (it == obj.end()) return Status::Ok();
  const std::string field = path + key;
  if (!it->is_number()) return Status::InvalidArgument(field + ": must be a number");
  const double v = it->get<double>();
  if (!it->is_number_integer() && std::trunc(v) != v) {
    return Status::InvalidArgument(field + ": must be a whole number");
  }
  if (!(v >= static_cast<double>(min) && v <= static_cast<double>(max))) {
    return Status::InvalidArgument(field + ": must be between " + std::to_string(min) + " and " +
                                   std::to_string(max));
  }
  *out = static_cast<T>(v);
  return Status::Ok();
}

// Reads `obj[key]` as a finite number >= 0 into `out` when present.
Status Figure(const ojson& obj, const std::string& path, const char* key, double* out) {
  auto it = obj.find(key);
  if (it == obj.end()) return Status::Ok();
  if (!it->is_number()) return Status::InvalidArgument(path + key + ": must be a number");
  const double v = it->get<double>();
  if (v < 0) return Status::InvalidArgument(path + key + ": must not be negative");
  *out = v;
  return Status::Ok();
}

Status OnlyKeys(const ojson& obj, const std::string& path,
                std::initializer_list<const char*> keys) {
  if (!obj.is_object()) {
    return Status::InvalidArgument((path.empty() ? "pool" : path.substr(0, path.size() - 1)) +
                                   ": must be an object");
  }
  for (const auto& [k, v] : obj.items()) {
    bool known = false;
    for (const char* key : keys) known = known || k == key;
    if (!known) return Status::InvalidArgument(path + k + ": unknown field");
  }
  return Status::Ok();
}

// "device_labels": [{"devices": [FIRST, LAST], "labels": {"accel": "910c"}}, ...]
// (PoolSpec::device_labels); the ranges are checked against the pool by
// ValidatePoolSpec.
Status ParseDeviceLabels(const ojson& list, PoolSpec* s) {
  if (!list.is_array()) return Status::InvalidArgument("device_labels: must be an array");
  for (size_t r = 0; r < list.size(); ++r) {
    const std::string path = "device_labels[" + std::to_string(r) + "].";
    const ojson& e = list[r];
    RETURN_IF_ERROR(OnlyKeys(e, path, {"devices", "labels"}));
    DeviceLabels range;
    const auto devices = e.find("devices");
    if (devices == e.end() || !devices->is_array() || devices->size() != 2 ||
        !(*devices)[0].is_number_unsigned() || !(*devices)[1].is_number_unsigned() ||
        (*devices)[1].get<uint64_t>() >= kMaxSimDevices) {
      return Status::InvalidArgument(path + "devices: must be [FIRST, LAST], device indices");
    }
    range.first = (*devices)[0].get<uint32_t>();
    range.last = (*devices)[1].get<uint32_t>();
    const auto labels = e.find("labels");
    if (labels == e.end() || !labels->is_object() || labels->empty()) {
      return Status::InvalidArgument(path + "labels: must be an object like {\"accel\": \"910c\"}");
    }
    for (const auto& [k, v] : labels->items()) {
      if (!v.is_string()) return Status::InvalidArgument(path + "labels: values must be strings");
      RETURN_IF_ERROR(CheckLabel(path + "labels", {k, v.get<std::string>()}));
      RETURN_IF_ERROR(AddLabel(path + "labels", {k, v.get<std::string>()}, &range.labels));
    }
    s->device_labels.push_back(std::move(range));
  }
  return Status::Ok();
}

// The pool spec of README.md ("Simulation"); unset fields keep PoolSpec's
// defaults. Counts are whole numbers within the limits README states.
Result<PoolSpec> ParsePoolSpec(const std::string& text) {
  ASSIGN_OR_RETURN(ojson j, ParseStrictJson(text));
  PoolSpec s;
  RETURN_IF_ERROR(OnlyKeys(
      j, "",
      {"name", "nodes", "devices_per_node", "cores", "memory_mb", "links", "device_labels"}));
  if (j.contains("name")) {
    if (!j["name"].is_string()) return Status::InvalidArgument("name: must be a string");
    s.name = j["name"].get<std::string>();
    // Printed in the table's header line and in --json, as a job's name is:
    // the same rules (a newline there split the header in two).
    if (s.name.size() > SpecLimits{}.max_string) {
      return Status::InvalidArgument("name: longer than the limit of " +
                                     std::to_string(SpecLimits{}.max_string));
    }
    if (std::string c = FirstControlChar(s.name); !c.empty()) {
      return Status::InvalidArgument("name: contains the control character " + c);
    }
  }
  RETURN_IF_ERROR(Count(j, "", "nodes", 1, kMaxSimDevices, &s.nodes));
  RETURN_IF_ERROR(Count(j, "", "devices_per_node", 1, kMaxSimDevices, &s.devices_per_node));
  RETURN_IF_ERROR(Count(j, "", "memory_mb", 0, uint64_t{1} << 40, &s.memory_mb));
  if (j.contains("cores")) {
    RETURN_IF_ERROR(OnlyKeys(j["cores"], "cores.", {"cube", "vector"}));
    for (int k = 0; k < kNumCoreKinds; ++k) {
      std::string kind(CoreKindName(static_cast<CoreKind>(k)));
      if (!j["cores"].contains(kind)) continue;
      const ojson& c = j["cores"][kind];
      std::string path = "cores." + kind + ".";
      RETURN_IF_ERROR(OnlyKeys(c, path, {"count", "flops_per_us"}));
      RETURN_IF_ERROR(Count(c, path, "count", 0, kMaxCoresPerKind, &s.cores[k]));
      RETURN_IF_ERROR(Figure(c, path, "flops_per_us", &s.flops_per_us[k]));
    }
  }
  if (j.contains("links")) {
    RETURN_IF_ERROR(OnlyKeys(j["links"], "links.", {"device", "node", "fabric"}));
    for (int t = 0; t < kNumLinkTiers; ++t) {
      std::string tier(LinkTierName(static_cast<LinkTier>(t)));
      if (!j["links"].contains(tier)) continue;
      const ojson& l = j["links"][tier];
      std::string path = "links." + tier + ".";
      RETURN_IF_ERROR(OnlyKeys(l, path, {"bytes_per_us", "latency_us"}));
      RETURN_IF_ERROR(Figure(l, path, "bytes_per_us", &s.links[t].bytes_per_us));
      RETURN_IF_ERROR(Figure(l, path, "latency_us", &s.links[t].latency_us));
    }
  }
  if (j.contains("device_labels")) RETURN_IF_ERROR(ParseDeviceLabels(j["device_labels"], &s));
  RETURN_IF_ERROR(ValidatePoolSpec(s));
  return s;
}

// A simulation times a gemm by m, n and k, or by cost.flops in their place;
// with neither it took the 1 us minimum, silently.
Status CheckGemmsTimed(const std::string& workload, const JobSpec& spec) {
  for (size_t i = 0; i < spec.tasks.size(); ++i) {
    const TaskSpec& t = spec.tasks[i];
    if (t.kernel != "gemm" || t.cost.flops > 0) continue;
    for (const char* name : {"m", "n", "k"}) {
      if (ArgNumber(t.args, name, -1) >= 0) continue;
      return Status::InvalidArgument(workload + ": tasks[" + std::to_string(i) + "] '" + t.id +
                                     "': args." + name +
                                     ": required: gemm is timed by m, n and k, or by cost.flops "
                                     "in their place");
    }
  }
  return Status::Ok();
}

// Says once on stderr when tasks have nothing to be timed by: a worker's
// own kernel without cost.flops (or a collective's bytes) takes the
// simulator's minimum, 1 us, so a misspelt kernel name ("gemn") would
// otherwise pass unnoticed.
void WarnUntimed(const std::string& workload, const JobSpec& spec) {
  size_t count = 0, first = 0;
  for (size_t i = 0; i < spec.tasks.size(); ++i) {
    const TaskSpec& t = spec.tasks[i];
    const bool builtin = std::find(std::begin(kBuiltinKernels), std::end(kBuiltinKernels),
                                   t.kernel) != std::end(kBuiltinKernels);
    if (builtin || t.cost.flops > 0 || t.collective) continue;
    if (count++ == 0) first = i;
  }
  if (count > 0) {
    const TaskSpec& t = spec.tasks[first];
    std::cerr << "hmpmd sim: warning: " << OneLine(workload) << ": tasks[" << first << "] '"
              << OneLine(t.id) << "': kernel '" << OneLine(t.kernel)
              << "' is not built in and has no cost.flops to time it by; "
              << (count > 1 ? "it and " + std::to_string(count - 1) + " more such tasks take"
                            : "it takes")
              << " 1 us (the minimum) each run" << std::endl;
  }
  // Communication that moves its inputs' data live: sizes the simulator
  // does not know (CommBytes guesses 4096 bytes).
  count = 0;
  for (size_t i = 0; i < spec.tasks.size(); ++i) {
    if (CommSizedByInputsOnly(spec.tasks[i]) && count++ == 0) first = i;
  }
  if (count == 0) return;
  const TaskSpec& t = spec.tasks[first];
  std::cerr << "hmpmd sim: warning: " << OneLine(workload) << ": tasks[" << first << "] '"
            << OneLine(t.id) << "': '" << OneLine(t.kernel)
            << "' moves its inputs' data, whose size the simulator does not know; give "
            << (t.collective ? "collective.bytes" : "cost.bytes") << " (timed as 4096 bytes"
            << (count > 1 ? ", as are " + std::to_string(count - 1) + " more such tasks)" : ")")
            << std::endl;
}

// Whether `workload` names a built-in generator (a file of that name is
// read instead; a directory, examples/rl beside examples/*.json, is not).
bool Generated(const std::string& workload) {
  bool builtin = false;
  for (const std::string& n : WorkloadNames()) builtin = builtin || n == workload;
  return builtin && !std::filesystem::is_regular_file(workload);
}

// `weight` > 0 replaces the spec's. Adds the workload's task runs to
// `size->runs` as soon as they are known (a built-in's estimate first).
Result<std::shared_ptr<const JobGraph>> LoadWorkload(const SimArgs& a, uint32_t devices,
                                                     uint32_t weight, SimSize* size) {
  const uint64_t runs_before = size->runs;
  Result<JobSpec> spec = Status::Internal("no workload loaded");  // set on every path below
  const auto too_many = [&](uint64_t runs, const std::string& what) {
    return Status::ResourceExhausted(a.workload + ": " + what + std::to_string(runs) +
                                     " task runs, over the limit of " + std::to_string(a.max_runs) +
                                     " (--max-runs; each takes about 1 KB of memory)");
  };
  if (Generated(a.workload)) {
    // The generators grow with the pool (about 80 runs per device): sized
    // from a small pool first, so a huge one is refused before it is built.
    constexpr uint32_t kProbeDevices = 1024;
    if (devices > kProbeDevices) {
      ASSIGN_OR_RETURN(JobSpec probe, MakeWorkload(a.workload, kProbeDevices, a.seed));
      const double per_device =
          static_cast<double>(probe.tasks.size()) * probe.repeat / kProbeDevices;
      const auto estimate = static_cast<uint64_t>(per_device * devices);
      if (estimate > a.max_runs) {
        return too_many(estimate, "on " + std::to_string(devices) + " devices makes about ");
      }
      size->runs = runs_before + estimate;
      size->about = true;
    }
    spec = MakeWorkload(a.workload, devices, a.seed);
  } else {
    auto text = ReadFile(a.workload, SpecLimits{}.max_bytes);
    if (!text.ok() && text.status().code() == StatusCode::kNotFound) {
      return Status::InvalidArgument(a.workload +
                                     ": neither a readable job spec nor a built-in "
                                     "workload (multimodal, moe, rl, pipeline)");
    }
    if (!text.ok()) return text.status();
    spec = ParseJobSpec(*text);
  }
  if (!spec.ok()) return Status::InvalidArgument(a.workload + ": " + spec.status().message());
  if (a.pinned) spec->elastic = false;
  if (weight > 0) spec->weight = weight;
  const uint64_t runs = uint64_t{spec->repeat} * spec->tasks.size();
  if (runs > a.max_runs) return too_many(runs, "");
  size->runs = runs_before + runs;
  size->about = false;
  RETURN_IF_ERROR(CheckGemmsTimed(a.workload, *spec));
  auto graph = JobGraph::Build(std::move(spec).value());
  if (!graph.ok()) return Status::InvalidArgument(a.workload + ": " + graph.status().message());
  WarnUntimed(a.workload, (*graph)->spec());
  return graph;
}

// --weights and --seed from their text, every item checked.
Status ParseFlags(SimArgs* a) {
  ASSIGN_OR_RETURN(a->seed, ParseWhole("--seed", a->seed_text, 0, UINT64_MAX));
  a->weights.clear();
  if (a->weights_text.empty()) return Status::Ok();
  for (size_t start = 0; start <= a->weights_text.size();) {
    const size_t comma = std::min(a->weights_text.find(',', start), a->weights_text.size());
    ASSIGN_OR_RETURN(
        const uint64_t w,
        ParseWhole("--weights", a->weights_text.substr(start, comma - start), 1, 1'000'000));
    a->weights.push_back(static_cast<uint32_t>(w));
    start = comma + 1;
  }
  return Status::Ok();
}

int SimMain(const SimArgs& a, SimSize* size) {
  PoolSpec pool = MakePoolSpec(a.devices);
  if (!a.pool_file.empty()) {
    auto text = ReadFile(a.pool_file, SpecLimits{}.max_bytes);
    if (!text.ok()) return Fail(text.status());
    auto parsed = ParsePoolSpec(*text);
    if (!parsed.ok())
      return Fail(Status::InvalidArgument(a.pool_file + ": " + parsed.status().message()));
    pool = *parsed;
  } else if (a.devices == 0) {
    return Fail(Status::InvalidArgument("--devices: must be at least 1"));
  } else if (a.devices > kMaxSimDevices) {
    return Fail(Status::InvalidArgument("--devices: more than 1000000"));
  }
  std::vector<std::string> policies = PolicyNames();
  if (!a.policy.empty()) {
    if (std::find(policies.begin(), policies.end(), a.policy) == policies.end()) {
      std::string known;
      for (const std::string& p : policies) known += (known.empty() ? "" : ", ") + p;
      return Fail(Status::InvalidArgument("--policy: unknown policy '" + a.policy +
                                          "' (known: " + known + ")"));
    }
    policies = {a.policy};
  }
  // Checked before simulating: a long run must not end at a bad path. The
  // path named is checked too when each policy writes beside it: a
  // directory ("out", "out/") made files "out.fifo" or "out/.fifo".
  if (!a.trace_file.empty()) {
    std::vector<std::string> inputs = a.workloads;
    if (!a.pool_file.empty()) inputs.push_back(a.pool_file);
    if (Status st = CheckWritable("--trace", a.trace_file, inputs); !st.ok()) return Fail(st);
    for (const std::string& name : policies) {
      Status st =
          CheckWritable("--trace", TraceFile(a.trace_file, name, policies.size() > 1), inputs);
      if (!st.ok()) return Fail(st);
    }
  }
  size->devices = pool.devices();
  if (!a.weights.empty() && a.weights.size() != a.workloads.size()) {
    return Fail(Status::InvalidArgument("--weights: " + std::to_string(a.weights.size()) +
                                        " given for " + std::to_string(a.workloads.size()) +
                                        " workloads"));
  }
  if (a.workloads.size() > 1) {
    SimSeveralArgs s{pool, policies, {}, a.workloads, a.json, a.trace_file};
    uint64_t runs = 0;
    for (size_t i = 0; i < a.workloads.size(); ++i) {
      SimArgs one = a;
      one.workload = a.workloads[i];
      auto g = LoadWorkload(one, pool.devices(), a.weights.empty() ? 0 : a.weights[i], size);
      if (!g.ok()) return Fail(g.status());
      runs += (*g)->total_runs();
      if (runs > a.max_runs) {
        return Fail(Status::ResourceExhausted(
            "the workloads make " + std::to_string(runs) + "+ task runs, over the limit of " +
            std::to_string(a.max_runs) + " (--max-runs; each takes about 1 KB of memory)"));
      }
      s.graphs.push_back(std::move(g).value());
    }
    return SimSeveral(s);
  }
  auto graph = LoadWorkload(a, pool.devices(), a.weights.empty() ? 0 : a.weights[0], size);
  if (!graph.ok()) return Fail(graph.status());
  json out;
  out["workload"] = (*graph)->spec().name;
  out["tasks_per_step"] = (*graph)->size();
  // A generator's draws (routing, lengths) come from the seed: printed so
  // that a figure can be reproduced.
  const bool generated = Generated(a.workload);
  if (generated) out["seed"] = a.seed;
  out["pool"] = {{"name", pool.name}, {"devices", pool.devices()}, {"nodes", pool.nodes}};
  out["policies"] = json::object();
  std::string table;
  char line[256];
  std::snprintf(line, sizeof line, "%-10s %-9s %9s %11s %11s %7s %7s %7s %6s %6s %6s %7s\n",
                "policy", "state", "tasks", "makespan_s", "bound_s", "gap", "bubble", "masking",
                "cube", "vector", "moves", "wall_s");
  table += line;
  bool all_ok = true;
  for (const std::string& name : policies) {
    SimOptions so;
    so.policy = name;
    so.pool = pool;
    auto sim = Simulator::Create(so);
    if (!sim.ok()) return Fail(sim.status());
    auto wall0 = std::chrono::steady_clock::now();
    auto id = (*sim)->Submit(*graph);
    if (!id.ok()) return Fail(Status::InvalidArgument(a.workload + ": " + id.status().message()));
    Status st = (*sim)->Run();
    double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - wall0).count();
    const JobRun& job = *(*sim)->scheduler().job(*id);
    const ResourcePool& rp = (*sim)->scheduler().pool();
    ScheduleMetrics m = ComputeMetrics(job, rp, (*sim)->LoadsOf(*id));
    all_ok = all_ok && st.ok() && job.state == JobState::kSucceeded;
    json j = SimulatedJobJson(**sim, *id);
    j["state"] = st.ok() ? std::string(JobStateName(job.state)) : "failed";
    if (!st.ok()) j["error"] = st.message();
    j["sim_wall_s"] = wall;
    const uint64_t moves = j["device_moves"].get<uint64_t>();
    const std::string short_note =
        job.short_sets.empty() ? "" : "  " + name + ": " + ShortSetsText(j["short_sets"]) + "\n";
    // State loads the simulator charged (stateful sub-models, state_bytes).
    j["state_loads"] = (*sim)->state_loads();
    j["state_load_s"] = (*sim)->state_load_us() / 1e6;
    j["state_load_exposed_s"] = (*sim)->state_load_exposed_us() / 1e6;
    j["state_load_hidden_s"] = (*sim)->state_load_hidden_us() / 1e6;
    j["state_load_hidden_fraction"] =
        (*sim)->state_load_us() > 0 ? (*sim)->state_load_hidden_us() / (*sim)->state_load_us() : 0;
    j["state_prefetches"] = (*sim)->state_prefetches();
    j["state_evictions"] = (*sim)->state_evictions();
    out["policies"][name] = std::move(j);
    double gap = m.lower_bound_s > 0 ? m.makespan_s / m.lower_bound_s - 1 : 0;
    std::snprintf(
        line, sizeof line,
        "%-10s %-9s %9llu %11.6f %11.6f %6.1f%% %6.1f%% %6.1f%% %5.1f%% %5.1f%% %6llu %7.2f\n",
        name.c_str(), st.ok() ? std::string(JobStateName(job.state)).c_str() : "failed",
        static_cast<unsigned long long>(m.tasks), m.makespan_s, m.lower_bound_s, gap * 100,
        m.bubble_ratio * 100, m.masking_ratio * 100, m.utilisation_by_kind[0] * 100,
        m.utilisation_by_kind[1] * 100, static_cast<unsigned long long>(moves), wall);
    table += line;
    if (!st.ok()) {
      table += "  " + name + ": " + st.message() + "\n";
    } else if (!job.error.empty()) {  // the job failed (spmd-1f1b: a plan it cannot follow)
      table += "  " + name + ": " + job.error + "\n";
    }
    table += short_note;
    if (!a.trace_file.empty()) {
      Status w = WriteFile(TraceFile(a.trace_file, name, policies.size() > 1),
                           TraceText(job, rp, (*sim)->LoadsOf(*id)));
      if (!w.ok()) return Fail(w);
    }
  }
  if (a.json) {
    std::cout << JsonText(out, 2) << std::endl;
  } else {
    std::cout << "workload " << (*graph)->spec().name << " (" << (*graph)->size() << " tasks"
              << (generated ? ", seed " + std::to_string(a.seed) : "") << ") on pool " << pool.name
              << " (" << pool.devices() << " devices, " << pool.nodes
              << (pool.nodes == 1 ? " node)\n" : " nodes)\n") << table;
  }
  return all_ok ? kExitOk : kExitFailed;
}

// One line and kExitFailed for a std::bad_alloc: --max-runs and the pool's
// limits bound a simulation, not the host's memory (a small host, or a
// ulimit -v, runs out first).
int OutOfMemory(const SimArgs& a, const SimSize& size) {
  std::string what = size.runs > 0
                         ? (size.about ? "about " : "") + std::to_string(size.runs) + " task runs"
                         : "workload '" + OneLine(a.workload, 256) + "'";
  if (size.devices > 0) what += " on " + std::to_string(size.devices) + " devices";
  std::cerr << "hmpmd: out of memory simulating " << what << "; lower --max-runs or the pool"
            << std::endl;
  return kExitFailed;
}

}  // namespace

void AddSimCommand(CLI::App& app, int* exit_code) {
  auto args = std::make_shared<SimArgs>();
  CLI::App* sub = app.add_subcommand(
      "sim", "Simulate a job on a modelled supernode; compare policies side by side");
  sub->add_option("workload", args->workloads,
                  "Job spec (JSON) or built-in workload: multimodal, moe, rl, pipeline; several "
                  "share the pool, submitted together")
      ->required();
  // Parsed by ParseFlags: CLI11 skipped empty items ("3,,1" was 3,1) and
  // took a flag after a lone "," as a weight.
  sub->add_option("--weights", args->weights_text,
                  "Each workload's weight (share of the pool), in order, e.g. 3,1; default: the "
                  "specs'");
  auto* devices =
      sub->add_option("--devices", args->devices, "Devices of a generated pool (8 per node)")
          ->check(WholeRange(0, UINT32_MAX))
          ->capture_default_str();
  sub->add_option("--pool", args->pool_file, "Pool spec (JSON)")
      ->excludes(devices)
      ->check(NonEmptyPath());
  sub->add_option("--policy", args->policy, "One policy (" + PolicyNamesText() + "); default all");
  sub->add_flag("--json", args->json, "Print one JSON object, one entry per policy");
  sub->add_flag("--pinned", args->pinned,
                "Pin every sub-model's device set (as \"elastic\": false on the job)");
  sub->add_option("--trace", args->trace_file,
                  "Write the simulated schedule as a Chrome trace (FILE.POLICY.json for several)")
      ->check(NonEmptyPath());
  sub->add_option("--seed", args->seed_text, "Seed of the built-in generators")
      ->capture_default_str();
  sub->add_option("--max-runs", args->max_runs,
                  "Task runs (tasks x repeat) simulated at most, about 1 KB of memory each")
      ->check(WholeRange(1, 100'000'000))
      ->capture_default_str();
  sub->callback([args, exit_code] {
    args->workload = args->workloads.front();
    if (Status st = ParseFlags(args.get()); !st.ok()) {
      *exit_code = Fail(st);
      return;
    }
    SimSize size;
    try {
      *exit_code = SimMain(*args, &size);
    } catch (const std::bad_alloc&) {
      *exit_code = OutOfMemory(*args, size);
    }
  });
}

}  // namespace hmpmd
