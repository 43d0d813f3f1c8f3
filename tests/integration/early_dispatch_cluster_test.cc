// Early dispatch with real workers: tasks queued on a lane behind producers
// that have not finished read those producers' tensors from the local store
// and compute the right result, for a chain and a fan-in; with the switch
// off nothing is dispatched ahead.
#include <cmath>
#include <nlohmann/json.hpp>

#include "cluster_fixture.h"

namespace hmpmd::testing {
namespace {

using json = nlohmann::json;

class EarlyDispatchClusterTest : public ClusterTest {
 protected:
  void Start(bool early) {
    ControllerOptions o;
    o.scheduler.early_dispatch = early;
    StartCluster(1, "cube=1", o);
  }
  uint64_t EarlyDispatched() {
    return cluster_->Call([&] { return cluster_->controller().counters().early_runs; });
  }
  uint64_t LostInputs() {
    return cluster_->Call([&] { return cluster_->controller().counters().lost_inputs; });
  }
  // The tensor run `run` of `job` made.
  std::vector<float> Output(JobId job, uint32_t run) {
    std::vector<Buffer> got = FetchOutputs(job, run);
    EXPECT_EQ(got.size(), 1u) << "run " << run;
    return got.size() == 1 ? Floats(got[0]) : std::vector<float>{};
  }
  static void ExpectNear(const std::vector<float>& got, const std::vector<float>& want) {
    ASSERT_EQ(got.size(), want.size());
    for (size_t i = 0; i < got.size(); ++i) {
      ASSERT_NEAR(got[i], want[i], 1e-4 * (1 + std::abs(want[i]))) << "element " << i;
    }
  }
  // s0 generates n values times 2; s1..s{len-1} scale their input by
  // 0.5, 3, 0.5, 3, ...: the product is 2 * 1.5^(pairs) (times 0.5 left over).
  static std::string ChainSpec(int len, int64_t n, double* product) {
    json tasks = json::array();
    tasks.push_back({{"id", "s0"}, {"kernel", "scale"}, {"args", {{"n", n}, {"factor", 2.0}}}});
    *product = 2.0;
    for (int i = 1; i < len; ++i) {
      const double f = i % 2 ? 0.5 : 3.0;
      *product *= f;
      tasks.push_back({{"id", "s" + std::to_string(i)},
                       {"kernel", "scale"},
                       {"args", {{"factor", f}}},
                       {"inputs", {"s" + std::to_string(i - 1)}}});
    }
    return json{{"name", "chain"}, {"tasks", tasks}}.dump();
  }
};

TEST_F(EarlyDispatchClusterTest, AChainReadsEachTensorItsProducerLeftOnTheLane) {
  Start(/*early=*/true);
  double product = 0;
  JobResult r = RunSpec(ChainSpec(16, 8192, &product));
  ASSERT_EQ(r.state, JobState::kSucceeded) << r.error;
  ExpectValidSchedule(r);
  EXPECT_GT(EarlyDispatched(), 0u) << "some link went behind its running producer";
  EXPECT_EQ(LostInputs(), 0u);
  ExpectNear(Output(r.id, 15), ScaleGenerated(8192, product));
}

TEST_F(EarlyDispatchClusterTest, AFanInReadsBothProducersTensors) {
  Start(/*early=*/true);
  json tasks = json::array({
      {{"id", "a"}, {"kernel", "scale"}, {"args", {{"n", 8192}, {"factor", 2.0}}}},
      {{"id", "b"}, {"kernel", "scale"}, {"args", {{"n", 8192}, {"factor", 6.0}}}},
      {{"id", "sum"}, {"kernel", "add"}, {"inputs", {"a", "b"}}},
      {{"id", "half"}, {"kernel", "scale"}, {"args", {{"factor", 0.5}}}, {"inputs", {"sum"}}},
  });
  for (int round = 0; round < 3; ++round) {
    JobResult r = RunSpec(json{{"name", "fan-in"}, {"tasks", tasks}}.dump());
    ASSERT_EQ(r.state, JobState::kSucceeded) << r.error;
    ExpectValidSchedule(r);
    // (2g + 6g) / 2 = 4g.
    ExpectNear(Output(r.id, 3), ScaleGenerated(8192, 4.0));
  }
  EXPECT_GT(EarlyDispatched(), 0u);
  EXPECT_EQ(LostInputs(), 0u);
}

TEST_F(EarlyDispatchClusterTest, OffNothingGoesAheadAndTheResultIsTheSame) {
  Start(/*early=*/false);
  double product = 0;
  JobResult r = RunSpec(ChainSpec(6, 8192, &product));
  ASSERT_EQ(r.state, JobState::kSucceeded) << r.error;
  EXPECT_EQ(EarlyDispatched(), 0u);
  ExpectNear(Output(r.id, 5), ScaleGenerated(8192, product));
}

}  // namespace
}  // namespace hmpmd::testing
