// spmd-eplb: EPLB's replica counts and packing, the replicas it picks from
// the previous step's routing, its memory limit, its prefetch gate, and
// that it beats spmd-1f1b's fixed expert sets on skewed routing.
#include "hmpmd/scheduler/eplb_policy.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <memory>
#include <set>

#include "hmpmd/sim/schedule_metrics.h"
#include "hmpmd/sim/simulator.h"
#include "hmpmd/sim/workloads.h"
#include "test_builders.h"

namespace hmpmd {
namespace {

TEST(EplbReplicaCounts, FollowTheHistogram) {
  // One replica each, then each spare slot to the highest load per replica.
  EXPECT_EQ(EplbReplicaCounts({6, 2, 1, 1}, 10, 10), (std::vector<uint32_t>{6, 2, 1, 1}));
  EXPECT_EQ(EplbReplicaCounts({1, 1, 1, 1}, 8, 8), (std::vector<uint32_t>{2, 2, 2, 2}));
  EXPECT_EQ(EplbReplicaCounts({1, 6, 1}, 3, 3), (std::vector<uint32_t>{1, 1, 1}));
  // No expert takes more replicas than devices can hold apart.
  EXPECT_EQ(EplbReplicaCounts({10, 1}, 6, 3), (std::vector<uint32_t>{3, 3}));
}

TEST(EplbPack, BalancesAndKeepsReplicasApart) {
  const std::vector<double> load{6, 2, 1, 1};
  const std::vector<uint32_t> counts{3, 1, 1, 1};
  auto packed = EplbPack(load, counts, 3, 2, {});
  std::vector<double> on(3, 0);
  std::vector<uint32_t> slots(3, 0);
  for (size_t e = 0; e < packed.size(); ++e) {
    ASSERT_EQ(packed[e].size(), counts[e]);
    std::set<uint32_t> distinct(packed[e].begin(), packed[e].end());
    EXPECT_EQ(distinct.size(), packed[e].size()) << "expert " << e << " twice on a device";
    for (uint32_t d : packed[e]) {
      on[d] += load[e] / counts[e];
      ++slots[d];
    }
  }
  for (uint32_t s : slots) EXPECT_LE(s, 2u);
  const auto [lo, hi] = std::minmax_element(on.begin(), on.end());
  EXPECT_LE(*hi - *lo, 2.0);  // within one replica's load
  // A replica stays on a device that held its expert.
  auto kept = EplbPack(load, counts, 3, 2, {{2}, {}, {}, {}});
  EXPECT_EQ(kept[0].front(), 2u);
}

struct EplbRun {
  JobState state = JobState::kQueued;
  std::string error;
  double makespan_s = 0;
  uint64_t loads = 0;
  uint64_t evictions = 0;
  uint32_t slots = 0;
  std::vector<std::vector<std::vector<DeviceId>>> layouts;
  std::vector<TaskRecord> runs;
  std::vector<DeviceId> device;  // per run
  std::vector<StateLoadTimes::Slice> slices;
};

EplbRun Simulate(const JobSpec& spec, const std::string& policy, const PoolSpec& pool) {
  SimOptions o;
  o.policy = policy;
  o.pool = pool;
  auto sim = Simulator::Create(o);
  EXPECT_TRUE(sim.ok()) << sim.status().message();
  auto id = (*sim)->Submit(test::BuildGraph(spec));
  EXPECT_TRUE(id.ok()) << id.status().message();
  EplbRun r;
  // Its plan, made at admission (the policy forgets a job once it ends).
  if (const auto* p = dynamic_cast<const EplbPolicy*>(&(*sim)->scheduler().policy())) {
    r.layouts = p->Layouts(*id);
    r.slots = p->SlotsPerDevice(*id);
  }
  Status st = (*sim)->Run();
  EXPECT_TRUE(st.ok()) << st.message();
  const JobRun& job = *(*sim)->scheduler().job(*id);
  r.state = job.state;
  r.error = job.error;
  r.makespan_s = ComputeMetrics(job, (*sim)->scheduler().pool(), (*sim)->LoadsOf(*id)).makespan_s;
  r.loads = (*sim)->state_loads();
  r.evictions = (*sim)->state_evictions();
  r.runs = job.runs;
  for (const TaskRecord& rec : job.runs) {
    r.device.push_back(rec.core == kNoCore ? UINT32_MAX
                                           : (*sim)->scheduler().pool().core(rec.core).device);
  }
  if (const StateLoadTimes* t = (*sim)->LoadsOf(*id)) r.slices = t->slices;
  return r;
}

int64_t StepOf(const TaskSpec& t) {
  for (const auto& [k, v] : t.args) {
    if (k == "step") return std::get<int64_t>(v);
  }
  return -1;
}

MoeOptions SmallMoe() {
  MoeOptions o;
  o.devices = 32;
  o.experts = 4;
  o.steps = 4;
  o.layers = 1;  // an expert's load is its one layer's routing
  o.chunks = 16;
  o.skew = 1.2;
  o.drift = 0.1;
  return o;
}

// Per step, the tasks of each expert sub-model (index into the spec's).
std::vector<std::map<uint32_t, double>> Histograms(const JobSpec& spec) {
  std::map<std::string, uint32_t> index;
  for (uint32_t s = 0; s < spec.submodels.size(); ++s) index[spec.submodels[s].name] = s;
  std::vector<std::map<uint32_t, double>> h;
  for (const TaskSpec& t : spec.tasks) {
    if (t.submodel.rfind("expert", 0) != 0) continue;
    const int64_t step = StepOf(t);
    if (h.size() <= static_cast<size_t>(step)) h.resize(step + 1);
    h[step][index[t.submodel]] += 1;
  }
  return h;
}

TEST(EplbPolicy, ReplicasFollowThePreviousStepsRouting) {
  const JobSpec spec = MoeWorkload(SmallMoe());
  EplbRun r = Simulate(spec, "spmd-eplb", MakePoolSpec(32));
  ASSERT_EQ(r.state, JobState::kSucceeded) << r.error;
  ASSERT_EQ(r.layouts.size(), 4u);
  const auto hist = Histograms(spec);
  ASSERT_EQ(hist.size(), 4u);
  // Step 0: the uniform guess, 8 replicas each on spmd-1f1b's sets.
  for (uint32_t sm = 1; sm <= 4; ++sm) {
    ASSERT_EQ(r.layouts[0][sm].size(), 8u);
    for (uint32_t k = 0; k < 8; ++k) EXPECT_EQ(r.layouts[0][sm][k], (sm - 1) * 8 + k);
  }
  // Step s: replica counts are EPLB's for step s - 1's tasks (all of equal
  // size), not step s's own, unless the layout before is kept (a rebalance
  // that would not pay for its loads); step 1's pays.
  auto counts_of = [&](uint32_t step) {
    std::vector<double> load;
    for (uint32_t sm = 1; sm <= 4; ++sm) load.push_back(hist[step].at(sm));
    return EplbReplicaCounts(load, 32, 32);
  };
  ASSERT_NE(counts_of(0), counts_of(1));
  for (uint32_t s = 1; s < 4; ++s) {
    const auto want = counts_of(s - 1);
    bool follows = true;
    for (uint32_t sm = 1; sm <= 4; ++sm)
      follows = follows && r.layouts[s][sm].size() == want[sm - 1];
    const bool kept = r.layouts[s] == r.layouts[s - 1];
    EXPECT_TRUE(follows || (s > 1 && kept)) << "step " << s;
  }
  // Each task of an expert ran on a replica of its step's layout, and the
  // replicas took turns.
  std::map<std::pair<uint32_t, DeviceId>, uint32_t> tasks_on;  // (sub-model, device)
  for (uint32_t i = 0; i < spec.tasks.size(); ++i) {
    const TaskSpec& t = spec.tasks[i];
    if (t.submodel.rfind("expert", 0) != 0) continue;
    ASSERT_GE(StepOf(t), 0) << t.id;
    const auto step = static_cast<uint32_t>(StepOf(t));
    const auto sm = static_cast<uint32_t>(1 + std::stoul(t.submodel.substr(6)));
    const auto& replicas = r.layouts[step][sm];
    EXPECT_NE(std::find(replicas.begin(), replicas.end(), r.device[i]), replicas.end())
        << t.id << " ran on device " << r.device[i];
    if (step == 1) ++tasks_on[{sm, r.device[i]}];
  }
  for (uint32_t sm = 1; sm <= 4; ++sm) {
    const double mean = hist[1].at(sm) / static_cast<double>(r.layouts[1][sm].size());
    for (DeviceId d : r.layouts[1][sm]) EXPECT_LE((tasks_on[{sm, d}]), std::ceil(mean));
  }
}

TEST(EplbPolicy, ReplicasOfALaterStepLoadOnlyOnceTheStepBeforeIsRouted) {
  const JobSpec spec = MoeWorkload(SmallMoe());
  EplbRun r = Simulate(spec, "spmd-eplb", MakePoolSpec(32));
  ASSERT_EQ(r.state, JobState::kSucceeded) << r.error;
  ASSERT_FALSE(r.layouts.empty());
  // When the last expert task of step 0 was placed.
  TimeUs routed = 0;
  for (uint32_t i = 0; i < spec.tasks.size(); ++i) {
    const TaskSpec& t = spec.tasks[i];
    if (t.submodel.rfind("expert", 0) == 0 && StepOf(t) == 0) {
      routed = std::max(routed, r.runs[i].dispatched);
    }
  }
  std::set<std::pair<DeviceId, uint32_t>> step0;
  for (uint32_t sm = 0; sm < r.layouts[0].size(); ++sm) {
    for (DeviceId d : r.layouts[0][sm]) step0.insert({d, sm});
  }
  uint32_t later = 0;
  for (const auto& s : r.slices) {
    if (spec.submodels[s.submodel].kind != SubmodelKind::kExpert) continue;
    if (step0.count({s.device, s.submodel}) > 0) continue;
    ++later;
    EXPECT_GE(s.start, routed) << "device " << s.device << " loaded expert " << s.submodel
                               << " before step 0 was routed";
  }
  EXPECT_GT(later, 0u);
}

TEST(EplbSlots, FitBesideTheOtherStateWithRoomForOutputs) {
  const double dense = 7.36e9, expert = 1.41e9;
  // 10 GiB less an eighth for outputs holds the dense part and one expert.
  EXPECT_EQ(EplbSlots(10240, dense, expert, 4), 1u);
  EXPECT_EQ(EplbSlots(12288, dense, expert, 4), 2u);
  EXPECT_EQ(EplbSlots(65536, dense, expert, 4), 4u);  // as asked
  EXPECT_EQ(EplbSlots(0, dense, expert, 4), 4u);      // no cap
  EXPECT_EQ(EplbSlots(8192, dense, expert, 4), 1u);   // at least one
}

TEST(EplbPolicy, RunsWithinMemoryThatHoldsOneExpertBesideTheDensePart) {
  MoeOptions mo = SmallMoe();
  mo.layers = 2;  // the dense part 7.4 GB, an expert 1.4 GB
  const JobSpec spec = MoeWorkload(mo);
  PoolSpec pool = MakePoolSpec(32);
  pool.memory_mb = 9216;  // 9.7 GB
  EplbRun r = Simulate(spec, "spmd-eplb", pool);
  ASSERT_EQ(r.state, JobState::kSucceeded) << r.error;
  EXPECT_EQ(r.slots, 1u);
  std::map<DeviceId, uint32_t> before;  // device: its expert in the step before
  uint32_t changed = 0;
  for (const auto& step : r.layouts) {
    std::map<DeviceId, uint32_t> now;
    for (uint32_t sm = 0; sm < step.size(); ++sm) {
      for (DeviceId d : step[sm]) {
        EXPECT_EQ(now.count(d), 0u) << "device " << d << " holds two experts";
        now[d] = sm;
      }
    }
    for (const auto& [d, sm] : now) changed += before.count(d) > 0 && before[d] != sm;
    before = now;
  }
  // A device that changes expert evicts the one before.
  ASSERT_GT(changed, 0u);
  EXPECT_GE(r.evictions, changed);
}

TEST(EplbPolicy, BeatsFixedExpertSetsOnSkewedRouting) {
  const JobSpec spec = MoeWorkload(SmallMoe());
  EplbRun eplb = Simulate(spec, "spmd-eplb", MakePoolSpec(32));
  EplbRun spmd = Simulate(spec, "spmd-1f1b", MakePoolSpec(32));
  ASSERT_EQ(eplb.state, JobState::kSucceeded) << eplb.error;
  ASSERT_EQ(spmd.state, JobState::kSucceeded) << spmd.error;
  EXPECT_LT(eplb.makespan_s, spmd.makespan_s);
  std::printf("makespan: spmd-eplb %.4f s, spmd-1f1b %.4f s; loads %llu, %llu\n", eplb.makespan_s,
              spmd.makespan_s, static_cast<unsigned long long>(eplb.loads),
              static_cast<unsigned long long>(spmd.loads));
  // It pays for its moves: more loads than the fixed sets.
  EXPECT_GT(eplb.loads, spmd.loads);
}

}  // namespace
}  // namespace hmpmd
