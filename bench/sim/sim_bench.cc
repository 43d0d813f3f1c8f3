// bench_sim: the simulator's figures and its cost.
//
//   bench_sim --table [--devices N] [--rl-iterations N] [--rl-staleness S]
//                                     the three built-in workloads, every
//                                     policy side by side, hmpmd against the
//                                     best baseline and the targets, and what
//                                     spmd-search's search costs
//   bench_sim --scale [--tasks N] [--devices N]
//                                     one job of N task runs (default 1e6) on
//                                     N devices (default 4096), wall time
//   bench_sim --detail WORKLOAD [--policy P] [--devices N] [--rl-...]
//                                     where one schedule leaves communication
//                                     unmasked and cores idle (sim_detail.h)
//   bench_sim [--benchmark_...]       Google Benchmark: the engine+policy
//                                     decision cost per task at 64, 512, 4096
//                                     devices (a job growing with the pool,
//                                     and one fixed job)
// Speed figures are printed, never asserted.
#include <benchmark/benchmark.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "hmpmd/scheduler/hmpmd_policy.h"
#include "hmpmd/scheduler/spmd_search_policy.h"
#include "hmpmd/sim/simulator.h"
#include "hmpmd/sim/workloads.h"
#include "sim_detail.h"

namespace hmpmd {
namespace {

// A step of `width` x `layers` tasks, each consuming two tasks of the layer
// before (seeded), every fourth a vector-core send; `steps` repeats.
JobSpec LayeredJob(uint32_t width, uint32_t layers, uint32_t steps, uint64_t seed) {
  JobSpec job;
  job.name = "layered";
  job.repeat = steps;
  std::mt19937_64 rng(seed);
  std::uniform_int_distribution<uint32_t> pick(0, width - 1);
  std::uniform_real_distribution<double> us(50, 500);
  for (uint32_t l = 0; l < layers; ++l) {
    for (uint32_t i = 0; i < width; ++i) {
      TaskSpec t;
      t.id = "t" + std::to_string(l) + "_" + std::to_string(i);
      if (i % 4 == 3) {
        t.kernel = "send";
        t.core = CoreKind::kVector;
        t.cost.bytes = 2.5e4 * us(rng);
      } else {
        t.kernel = "gemm";
        t.cost.flops = 2.5e8 * us(rng);
      }
      if (l > 0) {
        uint32_t a = pick(rng), b = pick(rng);
        t.inputs.push_back("t" + std::to_string(l - 1) + "_" + std::to_string(a));
        if (b != a) t.inputs.push_back("t" + std::to_string(l - 1) + "_" + std::to_string(b));
      }
      job.tasks.push_back(std::move(t));
    }
  }
  return job;
}

struct RunResult {
  Status status;
  uint64_t tasks = 0;
  double wall_s = 0;  // Create + Submit (admission) + Run
  double run_s = 0;   // Run alone: the engine's decisions and the event loop
  ScheduleMetrics metrics;
  uint64_t moves = 0;        // device moves between sub-models (hmpmd)
  uint64_t state_loads = 0;  // state loads the simulator charged
  double state_load_s = 0;   // their device time
  double exposed_s = 0;      // of which tasks waited for
  double hidden_s = 0;       // of which overlapped compute on its device
};

RunResult RunOnce(const JobSpec& spec, const std::string& policy, const PoolSpec& pool,
                  bool metrics, bool charge_state = true) {
  RunResult r;
  SimOptions o;
  o.policy = policy;
  o.pool = pool;
  o.charge_state = charge_state;
  auto graph = JobGraph::Build(spec);
  if (!graph.ok()) return {graph.status()};
  auto t0 = std::chrono::steady_clock::now();
  auto sim = Simulator::Create(o);
  if (!sim.ok()) return {sim.status()};
  auto id = (*sim)->Submit(*graph);
  if (!id.ok()) return {id.status()};
  auto t1 = std::chrono::steady_clock::now();
  r.status = (*sim)->Run();
  auto t2 = std::chrono::steady_clock::now();
  r.wall_s = std::chrono::duration<double>(t2 - t0).count();
  r.run_s = std::chrono::duration<double>(t2 - t1).count();
  const JobRun& job = *(*sim)->scheduler().job(*id);
  r.tasks = job.done;
  if (metrics) r.metrics = ComputeMetrics(job, (*sim)->scheduler().pool(), (*sim)->LoadsOf(*id));
  const auto* hp = dynamic_cast<const HmpmdPolicy*>(&(*sim)->scheduler().policy());
  r.moves = hp != nullptr ? hp->share().MoveCount(*id) : 0;
  r.state_loads = (*sim)->state_loads();
  r.state_load_s = (*sim)->state_load_us() / 1e6;
  r.exposed_s = (*sim)->state_load_exposed_us() / 1e6;
  r.hidden_s = (*sim)->state_load_hidden_us() / 1e6;
  return r;
}

// Decision cost per task: the whole simulation (Schedule, Place, pool
// updates, event queue) divided by the tasks it ran; 50 tasks per device.
// The time of Run() alone per task placed: building the graph, admission
// (ranks, the policy's per-job set-up) and the metrics are not decisions.
void DecisionCost(benchmark::State& state, const JobSpec& spec, uint32_t devices) {
  PoolSpec pool = MakePoolSpec(devices);
  uint64_t tasks = 0;
  double run_s = 0;
  for (auto _ : state) {
    RunResult r = RunOnce(spec, "hmpmd", pool, false);
    if (!r.status.ok()) state.SkipWithError(r.status.message().c_str());
    state.SetIterationTime(r.run_s);
    tasks += r.tasks;
    run_s += r.run_s;
  }
  state.SetItemsProcessed(static_cast<int64_t>(tasks));
  state.counters["ns_per_task"] = tasks ? run_s * 1e9 / static_cast<double>(tasks) : 0;
}

// The job grows with the pool (50 tasks per device), as a supernode's jobs
// do; its task tables grow with it, so caches miss more at 4,096 devices.
void BM_DecisionCostPerTask(benchmark::State& state) {
  uint32_t devices = static_cast<uint32_t>(state.range(0));
  DecisionCost(state, LayeredJob(devices * 2, 25, 1, 42), devices);
}
BENCHMARK(BM_DecisionCostPerTask)
    ->Arg(64)
    ->Arg(512)
    ->Arg(4096)
    ->Unit(benchmark::kMillisecond)
    ->UseManualTime();

// One job of 204,800 tasks on every pool: what the device count alone costs.
void BM_DecisionCostFixedJob(benchmark::State& state) {
  static const JobSpec kJob = LayeredJob(8192, 25, 1, 42);
  DecisionCost(state, kJob, static_cast<uint32_t>(state.range(0)));
}
BENCHMARK(BM_DecisionCostFixedJob)
    ->Arg(64)
    ->Arg(512)
    ->Arg(4096)
    ->Unit(benchmark::kMillisecond)
    ->UseManualTime();

// The RL workload's options the command line may change (< 0: default).
struct RlArgs {
  int64_t iterations = -1;
  int64_t staleness = -1;
};

// The generators' seed (moe's routing and token counts, rl's rollout
// lengths), printed with the table.
constexpr uint64_t kSeed = 1;

Result<JobSpec> Workload(const std::string& name, uint32_t devices, const RlArgs& rl) {
  if (name != "rl") return MakeWorkload(name, devices, kSeed);
  RlOptions o;
  o.devices = devices;
  o.seed = kSeed;
  if (rl.iterations > 0) o.iterations = static_cast<uint32_t>(rl.iterations);
  if (rl.staleness >= 0) o.staleness = static_cast<uint32_t>(rl.staleness);
  return RlWorkload(o);
}

// What spmd-search's search costs and finds on `spec`: the wall time of
// SearchedSplit on the admitted job (median of 5), the sub-models whose
// count differs from the spec's `devices`, and the modelled step of each.
std::string SearchSummary(const std::string& name, const JobSpec& spec, const PoolSpec& pool_spec) {
  SimOptions o;
  o.policy = "spmd-search";
  o.pool = pool_spec;
  auto graph = JobGraph::Build(spec);
  auto sim = Simulator::Create(o);
  if (!graph.ok() || !sim.ok()) return name + ": cannot admit";
  auto id = (*sim)->Submit(*graph);
  if (!id.ok()) return name + ": " + id.status().message();
  const JobRun& job = *(*sim)->scheduler().job(*id);
  const ResourcePool& pool = (*sim)->scheduler().pool();
  std::vector<DeviceId> alive;
  uint64_t memory = UINT64_MAX;
  for (DeviceId d = 0; d < pool.device_count(); ++d) {
    if (!pool.device(d).alive) continue;
    alive.push_back(d);
    memory = std::min(memory, ResourcePool::StoreCap(pool.device(d).desc));
  }
  const double cap = memory == UINT64_MAX ? 0 : static_cast<double>(memory);
  std::vector<uint32_t> hint;
  for (const SubmodelSpec& sm : spec.submodels) hint.push_back(sm.devices);
  std::vector<double> wall;
  std::vector<uint32_t> split;
  for (int k = 0; k < 5; ++k) {
    auto t0 = std::chrono::steady_clock::now();
    split = SearchedSplit(job, pool, alive, hint);
    wall.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  }
  std::sort(wall.begin(), wall.end());
  const std::vector<SplitDemand> demands = SplitDemands(job, static_cast<uint32_t>(alive.size()));
  uint32_t differ = 0;
  for (size_t s = 0; s < split.size() && s < hint.size(); ++s) {
    differ += split[s] > 0 && split[s] != hint[s];
  }
  char line[256];
  std::snprintf(line, sizeof line,
                "%-11s spmd-search: search %.1f ms (median of 5), %s; modelled step %.2f ms, "
                "the hint's %.2f ms",
                name.c_str(), 1e3 * wall[wall.size() / 2],
                split.empty() ? "kept the hint"
                              : ("changed " + std::to_string(differ) + " sub-models").c_str(),
                ModelledStepUs(demands, split.empty() ? hint : split, cap) / 1e3,
                ModelledStepUs(demands, hint, cap) / 1e3);
  return line;
}

int Table(uint32_t devices, const RlArgs& rl) {
  std::printf("%u devices, seed %llu\n", devices, static_cast<unsigned long long>(kSeed));
  std::printf("%-11s %-11s %10s %10s %7s %8s %7s %7s %8s %8s %8s %6s %6s %7s %7s %6s %6s\n",
              "workload", "policy", "makespan_s", "bound_s", "gap", "tight_s", "gap_t", "bubble",
              "masking", "vs_spmd", "vs_best", "moves", "loads", "load_s", "expo_s", "hidden",
              "wall_s");
  std::vector<std::string> verdicts;
  for (const std::string& w : {std::string("multimodal"), std::string("moe"), std::string("rl")}) {
    auto spec = Workload(w, devices, rl);
    if (!spec.ok()) return 1;
    PoolSpec pool = MakePoolSpec(devices);
    const std::vector<std::string> policies = PolicyNames();
    std::vector<RunResult> runs;
    for (const std::string& p : policies) runs.push_back(RunOnce(*spec, p, pool, true));
    // The best baseline: every policy but hmpmd, by step time.
    size_t spmd = 0, best = policies.size(), ours = policies.size();
    for (size_t i = 0; i < policies.size(); ++i) {
      if (policies[i] == "spmd-1f1b") spmd = i;
      if (policies[i] == "hmpmd") ours = i;
      if (policies[i] == "hmpmd" || !runs[i].status.ok()) continue;
      if (best == policies.size() || runs[i].metrics.makespan_s < runs[best].metrics.makespan_s) {
        best = i;
      }
    }
    const double best_s = best < policies.size() ? runs[best].metrics.makespan_s : 0;
    for (size_t i = 0; i < policies.size(); ++i) {
      const std::string& p = policies[i];
      const RunResult& r = runs[i];
      if (!r.status.ok()) {
        std::printf("%-11s %-11s failed: %s\n", w.c_str(), p.c_str(), r.status.message().c_str());
        continue;
      }
      const ScheduleMetrics& m = r.metrics;
      std::printf(
          "%-11s %-11s %10.4f %10.4f %6.1f%% %8.4f %6.1f%% %6.1f%% %7.1f%% %7.1f%% %7.1f%% %6llu "
          "%6llu %7.2f %7.3f %5.1f%% %6.2f\n",
          w.c_str(), p.c_str(), m.makespan_s, m.lower_bound_s,
          100 * (m.makespan_s / m.lower_bound_s - 1), m.tight_bound_s,
          100 * (m.makespan_s / m.tight_bound_s - 1), 100 * m.bubble_ratio, 100 * m.masking_ratio,
          100 * (m.makespan_s / runs[spmd].metrics.makespan_s - 1),
          best_s > 0 ? 100 * (m.makespan_s / best_s - 1) : 0.0,
          static_cast<unsigned long long>(r.moves), static_cast<unsigned long long>(r.state_loads),
          r.state_load_s, r.exposed_s, r.state_load_s > 0 ? 100 * r.hidden_s / r.state_load_s : 0,
          r.wall_s);
    }
    if (best < policies.size() && ours < policies.size() && runs[ours].status.ok()) {
      const ScheduleMetrics& h = runs[ours].metrics;
      const ScheduleMetrics& b = runs[best].metrics;
      char line[256];
      std::snprintf(line, sizeof line,
                    "%-11s best baseline %-11s step %+6.1f%%, bubble %5.1f%% vs %5.1f%%, "
                    "masking %5.1f%%",
                    w.c_str(), policies[best].c_str(), 100 * (h.makespan_s / b.makespan_s - 1),
                    100 * h.bubble_ratio, 100 * b.bubble_ratio, 100 * h.masking_ratio);
      verdicts.push_back(line);
    }
    verdicts.push_back(SearchSummary(w, *spec, pool));
  }
  std::printf("\nhmpmd against the best baseline of each workload (vs_best):\n");
  for (const std::string& v : verdicts) std::printf("%s\n", v.c_str());
  std::printf(
      "targets (hmpmd): masking >= 90%%, bubble <= 1/2 of the best baseline's, "
      "step time <= -15%% vs the best baseline, gap to bound <= 10%%\n"
      "(baselines: every policy but hmpmd; gap: to bound_s = max(critical path, work /\n"
      " capacity), the issue's bound; gap_t: to tight_s, the energetic head/tail bound, also\n"
      " valid, reported beside it)\n");
  // What floating RL's stateful sub-models (state affinity) buys against
  // pinned sets, with each state load charged and free.
  std::printf(
      "\nrl, hmpmd: floating sub-models and pinned sets, with and without the state-load "
      "cost:\n");
  std::printf("%-10s %-12s %10s %7s %6s %6s %8s\n", "sub-models", "state", "makespan_s", "gap",
              "moves", "loads", "load_s");
  for (bool pinned : {false, true}) {
    for (bool charge : {true, false}) {
      auto spec = Workload("rl", devices, rl);
      if (!spec.ok()) return 1;
      spec->elastic = !pinned;
      RunResult r = RunOnce(*spec, "hmpmd", MakePoolSpec(devices), true, charge);
      if (!r.status.ok()) {
        std::printf("%-10s %-12s failed: %s\n", pinned ? "pinned" : "floating",
                    charge ? "loads cost" : "loads free", r.status.message().c_str());
        continue;
      }
      std::printf("%-10s %-12s %10.4f %6.1f%% %6llu %6llu %8.4f\n", pinned ? "pinned" : "floating",
                  charge ? "loads cost" : "loads free", r.metrics.makespan_s,
                  100 * (r.metrics.makespan_s / r.metrics.lower_bound_s - 1),
                  static_cast<unsigned long long>(r.moves),
                  static_cast<unsigned long long>(r.state_loads), r.state_load_s);
    }
  }
  // fifo follows the order the spec lists tasks in, which the generators
  // write in a good order; hmpmd orders by the DAG and must not depend on it.
  std::printf("\nthe same jobs with the task list shuffled (seeds 1-3), gap to the bound:\n");
  std::printf("%-11s %-10s %8s %8s %8s\n", "workload", "policy", "seed 1", "seed 2", "seed 3");
  for (const std::string& w : {std::string("multimodal"), std::string("moe"), std::string("rl")}) {
    for (const std::string& p : {std::string("hmpmd"), std::string("fifo")}) {
      std::printf("%-11s %-10s", w.c_str(), p.c_str());
      for (uint64_t seed = 1; seed <= 3; ++seed) {
        auto spec = Workload(w, devices, rl);
        if (!spec.ok()) return 1;
        std::mt19937_64 rng(seed);
        std::shuffle(spec->tasks.begin(), spec->tasks.end(), rng);
        RunResult r = RunOnce(*spec, p, MakePoolSpec(devices), true);
        if (!r.status.ok()) {
          std::printf(" %8s", "failed");
          continue;
        }
        std::printf(" %7.1f%%", 100 * (r.metrics.makespan_s / r.metrics.lower_bound_s - 1));
      }
      std::printf("\n");
    }
  }
  return 0;
}

int Scale(uint64_t tasks, uint32_t devices) {
  // Steps of 10,000 tasks (20 layers of 500), repeated to reach `tasks`.
  uint32_t width = 500, layers = 20;
  uint32_t steps = static_cast<uint32_t>((tasks + width * layers - 1) / (width * layers));
  JobSpec spec = LayeredJob(width, layers, steps, 7);
  for (const std::string& p : {std::string("hmpmd"), std::string("fifo")}) {
    RunResult r = RunOnce(spec, p, MakePoolSpec(devices), false);
    std::printf(
        "scale: policy %s, %llu tasks (%u steps x %u) on %u devices: %s in %.2f s "
        "wall (%.0f ns/task)\n",
        p.c_str(), static_cast<unsigned long long>(r.tasks), steps, width * layers, devices,
        r.status.ok() ? "done" : r.status.message().c_str(), r.wall_s,
        r.tasks ? r.wall_s * 1e9 / r.tasks : 0);
  }
  return 0;
}

}  // namespace
}  // namespace hmpmd

int main(int argc, char** argv) {
  uint32_t devices = 0;
  uint64_t tasks = 1'000'000;
  hmpmd::RlArgs rl;
  bool table = false, scale = false;
  std::string detail, policy = "hmpmd";
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--table")) table = true;
    if (!std::strcmp(argv[i], "--scale")) scale = true;
    if (!std::strcmp(argv[i], "--detail") && i + 1 < argc) detail = argv[++i];
    if (!std::strcmp(argv[i], "--policy") && i + 1 < argc) policy = argv[++i];
    if (!std::strcmp(argv[i], "--devices") && i + 1 < argc) devices = std::stoul(argv[++i]);
    if (!std::strcmp(argv[i], "--tasks") && i + 1 < argc) tasks = std::stoull(argv[++i]);
    if (!std::strcmp(argv[i], "--rl-iterations") && i + 1 < argc) {
      rl.iterations = std::stol(argv[++i]);
    }
    if (!std::strcmp(argv[i], "--rl-staleness") && i + 1 < argc) {
      rl.staleness = std::stol(argv[++i]);
    }
  }
  if (!detail.empty()) {
    auto spec = hmpmd::Workload(detail, devices ? devices : 384, rl);
    if (!spec.ok()) {
      std::fprintf(stderr, "bench_sim: %s\n", spec.status().message().c_str());
      return 1;
    }
    return hmpmd::PrintDetail(*spec, devices ? devices : 384, policy);
  }
  if (table) return hmpmd::Table(devices ? devices : 384, rl);
  if (scale) return hmpmd::Scale(tasks, devices ? devices : 4096);
  benchmark::Initialize(&argc, argv);
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
