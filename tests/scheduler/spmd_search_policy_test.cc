// spmd-search: the device split that minimises the modelled step (the
// busiest device's work) under gang and memory limits, and a schedule at
// least as good as spmd-1f1b's where the spec's `devices` hint is bad.
#include "hmpmd/scheduler/spmd_search_policy.h"

#include <gtest/gtest.h>

#include <cmath>
#include <numeric>
#include <set>
#include <string>

#include "hmpmd/sim/simulator.h"
#include "sim_run.h"
#include "test_builders.h"

namespace hmpmd {
namespace {

using test::SimRun;
using test::Simulate;
using test::SpecBuilder;
using test::TaskBuilder;

SplitDemand Shards(uint32_t count, double us) {
  SplitDemand d;
  for (uint32_t k = 0; k < count; ++k) d.shard_us.push_back({k, us});
  return d;
}

double Worst(const std::vector<SplitDemand>& demands, const std::vector<uint32_t>& split,
             double memory) {
  double worst = 0;
  for (size_t s = 0; s < demands.size(); ++s) {
    worst = std::max(worst, SetStepUs(demands[s], split[s], memory));
  }
  return worst;
}

TEST(SpmdSearch, SetStepIsTheBusiestDevicesWork) {
  SplitDemand d = Shards(8, 1000);
  d.loose_us = 400;
  EXPECT_DOUBLE_EQ(SetStepUs(d, 8, 0), 1000 + 50);
  EXPECT_DOUBLE_EQ(SetStepUs(d, 3, 0), 3000 + 400.0 / 3);  // shards 0, 3, 6 on device 0
  d.min_devices = 4;
  EXPECT_TRUE(std::isinf(SetStepUs(d, 3, 0))) << "its gang needs 4 devices";
}

TEST(SpmdSearch, MemoryRulesOutCountsWhoseDevicesHoldTooManyParts) {
  SplitDemand d = Shards(8, 1000);
  for (uint32_t k = 0; k < 8; ++k) d.shard_part.push_back(k);  // a part per shard
  d.part_bytes = 3e9;
  const double memory = 4e9;  // one part a device
  EXPECT_TRUE(std::isinf(SetStepUs(d, 4, memory)));
  EXPECT_DOUBLE_EQ(SetStepUs(d, 8, memory), 1000);
  EXPECT_DOUBLE_EQ(SetStepUs(d, 4, 0), 2000) << "no cap";
  // The search never picks an infeasible count, and says so when none fits.
  std::vector<SplitDemand> demands{d, Shards(4, 10)};
  const std::vector<uint32_t> split = SearchSplit(demands, 9, memory);
  ASSERT_EQ(split.size(), 2u);
  EXPECT_EQ(split[0], 8u);
  EXPECT_EQ(split[1], 1u);
  EXPECT_TRUE(SearchSplit(demands, 7, memory).empty());
}

// The split minimises the bottleneck: checked against every split of a
// small pool.
TEST(SpmdSearch, SplitMinimisesTheBottleneckOverEveryAllocation) {
  std::vector<SplitDemand> demands{Shards(8, 1000), Shards(8, 100), Shards(3, 700)};
  demands[2].loose_us = 900;
  for (uint32_t devices : {3u, 5u, 8u, 12u, 20u}) {
    const std::vector<uint32_t> split = SearchSplit(demands, devices, 0);
    ASSERT_EQ(split.size(), 3u);
    EXPECT_LE(std::accumulate(split.begin(), split.end(), 0u), devices);
    double best = INFINITY;
    for (uint32_t a = 1; a <= devices; ++a) {
      for (uint32_t b = 1; a + b <= devices; ++b) {
        for (uint32_t c = 1; a + b + c <= devices; ++c) {
          best = std::min(best, Worst(demands, {a, b, c}, 0));
        }
      }
    }
    EXPECT_DOUBLE_EQ(Worst(demands, split, 0), best) << devices << " devices";
  }
}

TEST(SpmdSearch, SubModelsSpanningThePoolStayOutsideTheSplit) {
  std::vector<SplitDemand> demands{Shards(8, 100), Shards(4, 1000), Shards(4, 1000)};
  demands[0].outside = true;
  const std::vector<uint32_t> split = SearchSplit(demands, 8, 0);
  EXPECT_EQ(split, (std::vector<uint32_t>{0, 4, 4}));
}

// A pinned sub-model (elastic: false) keeps its spec's device count and
// its devices: the search splits only the others, over what is left.
TEST(SpmdSearch, APinnedSubModelKeepsItsSizeAndItsDevices) {
  SpecBuilder b;
  b.Submodel("pinned", SubmodelKind::kActor, 1).Submodel("heavy", SubmodelKind::kEncoder, 1);
  for (int64_t k = 0; k < 8; ++k) {
    b.Add(TaskBuilder("p" + std::to_string(k), "spin").Us(1000).Submodel("pinned").Arg("shard", k));
    b.Add(TaskBuilder("h" + std::to_string(k), "spin").Us(1000).Submodel("heavy").Arg("shard", k));
  }
  JobSpec spec = b.Build();
  spec.submodels[0].elastic = false;
  PoolSpec pool = MakePoolSpec(8);
  pool.cores = {1, 0};
  SimRun search = Simulate(spec, "spmd-search", pool);
  ASSERT_EQ(search.state, JobState::kSucceeded) << search.error;
  std::set<DeviceId> pinned, heavy;
  for (size_t i = 0; i < spec.tasks.size(); ++i) {
    (spec.tasks[i].submodel == "pinned" ? pinned : heavy).insert(search.device[i]);
  }
  EXPECT_EQ(pinned.size(), 1u);
  EXPECT_GT(heavy.size(), 1u) << "the elastic one is split over the rest";
  for (DeviceId d : heavy) EXPECT_EQ(pinned.count(d), 0u) << "disjoint sets";
}

// A spec whose hint gives the heavy sub-model 1 device of 8: spmd-1f1b
// follows it, spmd-search finds a split at least as good (here about 4x
// shorter), and runs each sub-model on its own set only.
TEST(SpmdSearch, FindsASplitAtLeastAsGoodAsABadHint) {
  SpecBuilder b;
  b.Submodel("heavy", SubmodelKind::kEncoder, 1).Submodel("light", SubmodelKind::kEncoder, 7);
  for (int64_t k = 0; k < 8; ++k) {
    b.Add(TaskBuilder("h" + std::to_string(k), "spin").Us(1000).Submodel("heavy").Arg("shard", k));
    b.Add(TaskBuilder("l" + std::to_string(k), "spin").Us(10).Submodel("light").Arg("shard", k));
  }
  JobSpec spec = b.Build();
  for (SubmodelSpec& sm : spec.submodels) sm.state_bytes = 1e7;  // 0.2 ms to load
  PoolSpec pool = MakePoolSpec(8);
  pool.cores = {1, 0};
  SimRun hint = Simulate(spec, "spmd-1f1b", pool);
  SimRun search = Simulate(spec, "spmd-search", pool);
  ASSERT_EQ(hint.state, JobState::kSucceeded) << hint.error;
  ASSERT_EQ(search.state, JobState::kSucceeded) << search.error;
  EXPECT_LE(search.metrics.makespan_s, hint.metrics.makespan_s);
  // The hint runs 8 ms on one device. The search gives heavy 4 devices
  // (2 ms on the busiest; 5 to 7 would not shorten it, 8 do not fit beside
  // light), and the 4 left to light.
  EXPECT_GT(hint.metrics.makespan_s, 8e-3);
  EXPECT_LT(search.metrics.makespan_s, 2.5e-3);
  std::set<DeviceId> heavy, light;
  for (size_t i = 0; i < spec.tasks.size(); ++i) {
    (spec.tasks[i].submodel == "heavy" ? heavy : light).insert(search.device[i]);
  }
  EXPECT_EQ(heavy.size(), 4u);
  EXPECT_EQ(light.size(), 4u);
  for (DeviceId d : light) EXPECT_EQ(heavy.count(d), 0u) << "disjoint sets";
  // Residency: one load per (device, sub-model) it ran on.
  EXPECT_EQ(search.loads, heavy.size() + light.size());
  // A hint the search cannot better in its model is kept: the same sets.
  spec.submodels[0].devices = 4;
  spec.submodels[1].devices = 4;
  SimRun kept = Simulate(spec, "spmd-search", pool);
  SimRun hinted = Simulate(spec, "spmd-1f1b", pool);
  ASSERT_EQ(kept.state, JobState::kSucceeded) << kept.error;
  EXPECT_EQ(kept.device, hinted.device);
  EXPECT_EQ(kept.metrics.makespan_s, hinted.metrics.makespan_s);
}

}  // namespace
}  // namespace hmpmd
