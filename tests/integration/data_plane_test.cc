// The data plane end to end: real worker processes pass real tensors peer
// to peer, run collectives as gangs, and the MoE example overlaps its
// communication with the experts' matrix work.
#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "cluster_fixture.h"
#include "hmpmd/worker/builtin_kernels.h"
#include "hmpmd/worker/fetch.h"

namespace hmpmd::testing {
namespace {

using json = nlohmann::json;

using DataPlaneTest = ClusterTest;

TEST_F(DataPlaneTest, TensorsFlowFromProducersOnTwoWorkersIntoAnAdd) {
  StartCluster(2);
  json tasks = json::array({
      {{"id", "a"}, {"kernel", "scale"}, {"args", {{"n", 4096}, {"factor", 2.0}}}},
      {{"id", "b"}, {"kernel", "scale"}, {"args", {{"n", 4096}, {"factor", 6.0}}}},
      {{"id", "sum"}, {"kernel", "add"}, {"core", "vector"}, {"inputs", {"a", "b"}}},
  });
  JobResult r = RunSpec(json{{"name", "flow"}, {"tasks", tasks}}.dump());
  ASSERT_EQ(r.state, JobState::kSucceeded) << r.error;
  EXPECT_NE(r.runs[0].device, r.runs[1].device) << "the producers should be on two workers";
  std::vector<Buffer> out = FetchOutputs(r.id, 2);
  ASSERT_EQ(out.size(), 1u);
  // No `n` on the add: it can only have added its inputs, 2g + 6g = 8g.
  const std::vector<float> got = Floats(out[0]);
  const std::vector<float> want = ScaleGenerated(4096, 8.0);
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i)
    ASSERT_NEAR(got[i], want[i], 1e-5 * (1 + std::abs(want[i])));
  // An intermediate output was read by its one consumer and freed.
  std::string endpoint = cluster_->Call([&]() -> std::string {
    const OutputLocation* loc = cluster_->controller().OutputOf(r.id, 0);
    return loc ? cluster_->controller().workers()[loc->worker].data_endpoint : "";
  });
  auto freed = worker::FetchOutputs(endpoint, data_token(), r.id, 0, 10000);
  EXPECT_EQ(freed.status().code(), StatusCode::kNotFound) << freed.status().ToString();
}

TEST_F(DataPlaneTest, AnInputNamedTwiceReachesTheKernelTwice) {
  // `add` of a and a is 2a, and a's other reader still finds it: the
  // worker reads a once (one of its two reads) and hands it over twice.
  StartCluster(2);
  json tasks = json::array({
      {{"id", "a"}, {"kernel", "scale"}, {"args", {{"n", 4096}, {"factor", 3.0}}}},
      {{"id", "twice"}, {"kernel", "add"}, {"core", "vector"}, {"inputs", {"a", "a"}}},
      {{"id", "once"}, {"kernel", "scale"}, {"args", {{"factor", 1.0}}}, {"inputs", {"a"}}},
  });
  for (int round = 0; round < 3; ++round) {
    JobResult r = RunSpec(json{{"name", "twice"}, {"tasks", tasks}}.dump());
    ASSERT_EQ(r.state, JobState::kSucceeded) << r.error;
    const std::vector<float> twice = Floats(FetchOutputs(r.id, 1).at(0));
    const std::vector<float> once = Floats(FetchOutputs(r.id, 2).at(0));
    const std::vector<float> want = ScaleGenerated(4096, 3.0);
    ASSERT_EQ(twice.size(), want.size());
    ASSERT_EQ(once.size(), want.size());
    for (size_t i = 0; i < want.size(); ++i) {
      ASSERT_NEAR(twice[i], 2 * want[i], 1e-5 * (1 + std::abs(want[i]))) << i;
      ASSERT_NEAR(once[i], want[i], 1e-5 * (1 + std::abs(want[i]))) << i;
    }
    std::string endpoint = cluster_->Call([&]() -> std::string {
      const OutputLocation* loc = cluster_->controller().OutputOf(r.id, 0);
      return loc ? cluster_->controller().workers()[loc->worker].data_endpoint : "";
    });
    auto freed = worker::FetchOutputs(endpoint, data_token(), r.id, 0, 10000);
    EXPECT_EQ(freed.status().code(), StatusCode::kNotFound)
        << "a is freed once both readers took it: " << freed.status().ToString();
  }
}

TEST_F(DataPlaneTest, ManyInputsWithRepeatsKeepTheirOrder) {
  // Past the worker's pairwise scan (16 inputs): send hands its 24 inputs
  // on in the order named, p0..p11 twice, fetched once each.
  StartCluster(2);
  json tasks = json::array();
  json inputs = json::array();
  for (int i = 0; i < 12; ++i) {
    tasks.push_back({{"id", "p" + std::to_string(i)},
                     {"kernel", "scale"},
                     {"args", {{"n", 8}, {"factor", 1.0 + i}}}});
  }
  for (int round = 0; round < 2; ++round) {
    for (int i = 0; i < 12; ++i) inputs.push_back("p" + std::to_string(i));
  }
  tasks.push_back({{"id", "all"}, {"kernel", "send"}, {"core", "vector"}, {"inputs", inputs}});
  JobResult r = RunSpec(json{{"name", "many"}, {"tasks", tasks}}.dump());
  ASSERT_EQ(r.state, JobState::kSucceeded) << r.error;
  std::vector<Buffer> out = FetchOutputs(r.id, 12);
  ASSERT_EQ(out.size(), 24u);
  for (size_t k = 0; k < out.size(); ++k) {
    EXPECT_EQ(Floats(out[k]), ScaleGenerated(8, 1.0 + static_cast<double>(k % 12))) << k;
  }
}

TEST_F(DataPlaneTest, EmptyTensorsKeepTheirPlaceAmongInputs) {
  // A producer whose only output is a tensor of 0 elements (an expert that
  // received no tokens) still hands that tensor on: 0 bytes is not
  // "nothing kept", and the inputs after it keep their positions.
  StartCluster(2);
  json tasks = json::array({
      {{"id", "z"}, {"kernel", "send"}, {"args", {{"bytes", 0}}}},
      {{"id", "a"}, {"kernel", "scale"}, {"args", {{"n", 3}, {"factor", 1.0}}}},
      {{"id", "za"}, {"kernel", "send"}, {"core", "vector"}, {"inputs", {"z", "a"}}},
      {{"id", "zz"}, {"kernel", "send"}, {"core", "vector"}, {"inputs", {"z", "z"}}},
  });
  JobResult r = RunSpec(json{{"name", "empty"}, {"tasks", tasks}}.dump());
  ASSERT_EQ(r.state, JobState::kSucceeded) << r.error;
  std::vector<Buffer> za = FetchOutputs(r.id, 2);
  ASSERT_EQ(za.size(), 2u);
  EXPECT_EQ(za[0].shape, std::vector<int64_t>{0});
  EXPECT_TRUE(za[0].data.empty());
  EXPECT_EQ(Floats(za[1]), ScaleGenerated(3, 1.0));
  std::vector<Buffer> zz = FetchOutputs(r.id, 3);
  ASSERT_EQ(zz.size(), 2u);
  for (const Buffer& b : zz) EXPECT_EQ(b.shape, std::vector<int64_t>{0});
}

TEST_F(DataPlaneTest, AnEmptyTensorFlowsDownAChainOnOneCore) {
  // One core: each consumer is queued behind its producer (early dispatch)
  // and reads the empty tensor that producer left in the local store.
  StartCluster(1, "cube=1,vector=0");
  json tasks = json::array({
      {{"id", "z"}, {"kernel", "send"}, {"args", {{"bytes", 0}}}},
      {{"id", "c"}, {"kernel", "send"}, {"inputs", {"z"}}},
      {{"id", "d"}, {"kernel", "send"}, {"inputs", {"c"}}},
  });
  JobResult r = RunSpec(json{{"name", "chain"}, {"tasks", tasks}}.dump());
  ASSERT_EQ(r.state, JobState::kSucceeded) << r.error;
  // Passed on: had c seen no input, it would have made 4096 bytes.
  std::vector<Buffer> d = FetchOutputs(r.id, 2);
  ASSERT_EQ(d.size(), 1u);
  EXPECT_EQ(d[0].shape, std::vector<int64_t>{0});
  EXPECT_TRUE(d[0].data.empty());
}

TEST_F(DataPlaneTest, ASendAndACollectiveMoveWhatTheirSpecSizes) {
  // docs/job-spec.md's example: a send after a spin (which keeps nothing) is sized
  // by cost.bytes, and a collective by collective.bytes. They made 4096
  // bytes live whatever the spec said, while the simulation moved the size.
  StartCluster(2);
  json tasks = json::array({
      {{"id", "v0"}, {"kernel", "spin"}, {"args", {{"us", 10}}}},
      {{"id", "x0"},
       {"kernel", "send"},
       {"core", "vector"},
       {"inputs", {"v0"}},
       {"cost", {{"bytes", 65536}}}},
  });
  for (int i = 0; i < 2; ++i) {
    tasks.push_back({{"id", "ar" + std::to_string(i)},
                     {"kernel", "allreduce"},
                     {"core", "vector"},
                     {"collective", {{"group", "g"}, {"op", "allreduce"}, {"bytes", 40001}}}});
  }
  JobResult r = RunSpec(json{{"name", "sized"}, {"tasks", tasks}}.dump());
  ASSERT_EQ(r.state, JobState::kSucceeded) << r.error;
  std::vector<Buffer> x0 = FetchOutputs(r.id, 1);
  ASSERT_EQ(x0.size(), 1u);
  EXPECT_EQ(x0[0].data.size(), 65536u);
  for (uint32_t run = 2; run < 4; ++run) {
    std::vector<Buffer> out = FetchOutputs(r.id, run);
    ASSERT_EQ(out.size(), 1u);
    EXPECT_EQ(out[0].data.size(), 40000u) << "whole float32s, rounded down";
  }
}

TEST_F(DataPlaneTest, AllreduceGangSpansThreeWorkers) {
  StartCluster(3);
  json tasks = json::array();
  for (int i = 0; i < 3; ++i) {
    tasks.push_back({{"id", "ar" + std::to_string(i)},
                     {"kernel", "allreduce"},
                     {"core", "vector"},
                     {"args", {{"n", 1000}}},
                     {"collective", {{"group", "g"}, {"op", "allreduce"}, {"bytes", 4000}}}});
  }
  JobResult r = RunSpec(json{{"name", "ar"}, {"tasks", tasks}}.dump());
  ASSERT_EQ(r.state, JobState::kSucceeded) << r.error;
  std::set<DeviceId> devices;
  for (const RunRecord& run : r.runs) devices.insert(run.device);
  EXPECT_EQ(devices.size(), 3u) << "gang members go to distinct devices";
  for (uint32_t run = 0; run < 3; ++run) {
    std::vector<Buffer> out = FetchOutputs(r.id, run);
    ASSERT_EQ(out.size(), 1u);
    const std::vector<float> got = Floats(out[0]);
    ASSERT_EQ(got.size(), 1000u);
    for (size_t i = 0; i < got.size(); ++i) {
      const float want = 3 * (static_cast<float>(i % 251) * 0.5f) + (0 + 1 + 2);
      ASSERT_NEAR(got[i], want, 1e-4) << "run " << run << " element " << i;
    }
  }
}

TEST_F(DataPlaneTest, MoeExampleOverlapsDispatchWithExperts) {
  StartCluster(2);
  std::ifstream in(std::string(HMPMD_SOURCE_DIR) + "/examples/moe.json");
  ASSERT_TRUE(in) << "examples/moe.json";
  std::stringstream ss;
  ss << in.rdbuf();
  JobResult r = RunSpec(ss.str());
  ASSERT_EQ(r.state, JobState::kSucceeded) << r.error;
  ExpectValidSchedule(r);
  // Communication (vector lane) and expert matrix work (cube lane) of one
  // device must have run at the same time for a while.
  TimeUs overlap = 0;
  for (const RunRecord& c : r.runs) {
    if (!IsCommKernel(r.graph->spec_task(c.index).kernel)) continue;
    for (const RunRecord& m : r.runs) {
      if (m.kind != CoreKind::kCube || m.device != c.device) continue;
      overlap += std::max<TimeUs>(0, std::min(c.end, m.end) - std::max(c.start, m.start));
    }
  }
  EXPECT_GT(overlap, 0) << "no communication overlapped the experts' work";
}

}  // namespace
}  // namespace hmpmd::testing
