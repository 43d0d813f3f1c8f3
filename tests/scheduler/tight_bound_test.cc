// Tests for ScheduleMetrics::tight_bound_s, the energetic head/tail bound
// beside lower_bound_s (sim/schedule_metrics.cc): it is exact on a
// DAG where the issue's bound is not, never below lower_bound_s, and no
// policy beats it on seeded random DAGs (with steps, collectives, both core
// kinds and stateful sub-models) nor on the built-in workloads.
#include <gtest/gtest.h>

#include <random>
#include <string>
#include <vector>

#include "hmpmd/sim/schedule_metrics.h"
#include "hmpmd/sim/simulator.h"
#include "hmpmd/sim/workloads.h"
#include "test_builders.h"

namespace hmpmd {
namespace {

using test::Device;
using test::SpecBuilder;
using test::TaskBuilder;

constexpr double kUs = 1e-6;

ScheduleMetrics Simulate(const JobSpec& spec, const std::string& policy, const PoolSpec& pool) {
  SimOptions o;
  o.policy = policy;
  o.pool = pool;
  auto sim = Simulator::Create(o);
  EXPECT_TRUE(sim.ok()) << sim.status().message();
  auto graph = test::BuildGraph(spec);
  auto id = (*sim)->Submit(graph);
  EXPECT_TRUE(id.ok()) << id.status().message();
  Status run = (*sim)->Run();
  EXPECT_TRUE(run.ok()) << policy << ": " << run.message();
  const JobRun& job = *(*sim)->scheduler().job(*id);
  EXPECT_EQ(job.state, JobState::kSucceeded) << policy;
  return ComputeMetrics(job, (*sim)->scheduler().pool());
}

TEST(TightBoundTest, HeadAndTailMakeItExactWhereTheIssuesBoundIsNot) {
  // a (100 us), then four 100 us tasks after it, on one device of two
  // cores: the critical path is 200 us, the work 500 us / 2 = 250 us, but
  // nothing runs beside a, so 100 + 400 / 2 = 300 us is the best there is.
  ResourcePool pool;
  pool.AddDevice(Device("d", 2, 0));
  JobRun job;
  SpecBuilder s;
  s.Add(TaskBuilder("a"));
  for (int i = 0; i < 4; ++i) s.Add(TaskBuilder("b" + std::to_string(i)).Inputs({"a"}));
  job.graph = test::BuildGraph(s);
  job.runs.assign(job.graph->total_runs(), TaskRecord{});
  auto done = [&](uint32_t run, CoreId core, TimeUs start, TimeUs end) {
    job.runs[run].state = TaskState::kDone;
    job.runs[run].core = core;
    job.runs[run].start = start;
    job.runs[run].end = end;
  };
  done(0, 0, 0, 100);
  done(1, 0, 100, 200);
  done(2, 1, 100, 200);
  done(3, 0, 200, 300);
  done(4, 1, 200, 300);
  ScheduleMetrics m = ComputeMetrics(job, pool);
  EXPECT_DOUBLE_EQ(m.lower_bound_s, 250 * kUs);
  EXPECT_DOUBLE_EQ(m.tight_bound_s, 300 * kUs);
  EXPECT_DOUBLE_EQ(m.makespan_s, 300 * kUs);
}

// A random layered DAG: compute on cube cores, sends on vector cores,
// all-reduce gangs, stateful sub-models with sets (hmpmd moves devices
// between them), and `steps` repeats.
JobSpec RandomDag(std::mt19937_64& rng, uint32_t devices) {
  JobSpec spec;
  spec.repeat = 1 + static_cast<uint32_t>(rng() % 2);
  SubmodelSpec gen{"gen", SubmodelKind::kActor, std::max(1u, devices / 2)};
  gen.state_bytes = 1e6;
  SubmodelSpec train{"train", SubmodelKind::kLearner, std::max(1u, devices / 4)};
  train.state_bytes = 4e6;
  // Gangs in a sub-model of their own that asks for the whole pool (the
  // static baseline gives each sub-model a fixed set; members need
  // distinct devices).
  spec.submodels = {
      gen, train, {"free", SubmodelKind::kGeneric, 0}, {"comm", SubmodelKind::kGeneric, devices}};
  const char* submodels[] = {"gen", "train", "free"};
  std::uniform_int_distribution<int> us(20, 2000);
  const int layers = 3 + static_cast<int>(rng() % 4), width = 2 + static_cast<int>(rng() % 10);
  for (int l = 0; l < layers; ++l) {
    const bool gang = l > 0 && rng() % 3 == 0 && static_cast<uint32_t>(width) <= devices;
    for (int i = 0; i < width; ++i) {
      TaskSpec t;
      t.id = "t" + std::to_string(l) + "_" + std::to_string(i);
      t.submodel = submodels[rng() % 3];
      if (gang) {
        t.kernel = "allreduce";
        t.core = CoreKind::kVector;
        t.submodel = "comm";
        t.collective = CollectiveSpec{"g" + std::to_string(l), "allreduce", 1e5};
      } else if (rng() % 4 == 0) {
        t.kernel = "send";
        t.core = CoreKind::kVector;
        t.cost.bytes = 1e3 * us(rng);
      } else {
        t.kernel = "spin";
        t.args.push_back({"us", static_cast<int64_t>(us(rng))});
      }
      if (l > 0) {
        const int inputs = 1 + static_cast<int>(rng() % 3);
        for (int k = 0; k < inputs; ++k) {
          const int from = static_cast<int>(rng() % width);
          std::string in = "t" + std::to_string(l - 1) + "_" + std::to_string(from);
          // A gang member reads no send or gang output: their data would give the
          // members different sizes (refused, as a worker would fail it).
          const TaskSpec& producer = spec.tasks[spec.tasks.size() - i - width + from];
          if (gang && (producer.kernel == "send" || producer.collective)) continue;
          if (std::find(t.inputs.begin(), t.inputs.end(), in) == t.inputs.end()) {
            t.inputs.push_back(in);
          }
        }
      }
      spec.tasks.push_back(std::move(t));
    }
  }
  return spec;
}

TEST(TightBoundTest, NoPolicyBeatsItOnRandomDags) {
  for (uint64_t seed = 1; seed <= 40; ++seed) {
    std::mt19937_64 rng(seed);
    const uint32_t devices = 4 + static_cast<uint32_t>(rng() % 13);
    JobSpec spec = RandomDag(rng, devices);
    PoolSpec pool = MakePoolSpec(devices);
    for (const std::string& policy : PolicyNames()) {
      SCOPED_TRACE("seed " + std::to_string(seed) + " policy " + policy);
      ScheduleMetrics m = Simulate(spec, policy, pool);
      EXPECT_GE(m.tight_bound_s, m.lower_bound_s);
      EXPECT_GE(m.makespan_s, m.tight_bound_s * (1 - 1e-9));
    }
  }
}

TEST(TightBoundTest, NoPolicyBeatsItOnTheBuiltInWorkloads) {
  for (const char* workload : {"multimodal", "moe", "rl", "pipeline"}) {
    auto spec = MakeWorkload(workload, 32, 3);
    ASSERT_TRUE(spec.ok());
    for (const std::string& policy : PolicyNames()) {
      SCOPED_TRACE(std::string(workload) + " / " + policy);
      ScheduleMetrics m = Simulate(*spec, policy, MakePoolSpec(32));
      EXPECT_GE(m.tight_bound_s, m.lower_bound_s);
      EXPECT_GE(m.makespan_s, m.tight_bound_s * (1 - 1e-9));
    }
  }
}

}  // namespace
}  // namespace hmpmd
