// A pinned actor's runs stay on its one device under each policy, live:
// real controller and worker processes. Placed on any worker, a stateful
// kernel (examples/rl's rl.rollout after rl.load_weights) would fail with
// "this actor holds no weights on this device".
#include <gtest/gtest.h>

#include <set>
#include <string>

#include "hmpmd/scheduler/policy.h"
#include "process_cluster_fixture.h"

namespace hmpmd::testing {
namespace {

class PolicySetsLiveTest : public ProcessClusterFixture,
                           public ::testing::WithParamInterface<std::string> {
 protected:
  PolicySetsLiveTest() : ProcessClusterFixture("hmpmd-policy-sets") {}
};

TEST_P(PolicySetsLiveTest, APinnedActorsRunsAllLandOnOneDevice) {
  ASSERT_TRUE(cluster_->StartController({"--policy", GetParam()}).ok());
  ASSERT_TRUE(cluster_->StartWorker().ok());
  ASSERT_TRUE(cluster_->StartWorker().ok());
  ASSERT_TRUE(cluster_->WaitWorkers(2, 20000));
  // Four independent 20 ms sleeps: on two idle workers, a policy without
  // the set spreads them.
  std::string tasks;
  for (int i = 0; i < 4; ++i) {
    tasks += std::string(i ? "," : "") + R"({"id":"s)" + std::to_string(i) +
             R"(","kernel":"sleep","args":{"us":20000},"submodel":"actor"})";
  }
  auto id = cluster_->Submit(
      R"({"name":"pinned-actor","submodels":[{"name":"actor","kind":"actor","devices":1,)"
      R"("elastic":false}],"tasks":[)" +
      tasks + "]}");
  ASSERT_TRUE(id.ok()) << id.status().ToString();
  ASSERT_EQ(cluster_->WaitJob(*id, 20000).value("state", ""), "succeeded");
  auto table = cluster_->Get("/api/v1/jobs/" + std::to_string(*id) + "/tasks");
  ASSERT_TRUE(table.is_object()) << table.dump();
  std::set<int> devices;
  for (const auto& t : table["tasks"]) devices.insert(t.value("device", -1));
  EXPECT_EQ(devices.size(), 1u) << GetParam() << ": " << table.dump();
}

// hmpmd, live: elastic sub-models that declare state_bytes float by state
// affinity (scheduler/state_affinity.h). On three workers a chain keeps
// one (its width is 1: one state), and four independent sleeps of another
// sub-model spread over the other two.
TEST_F(PolicySetsLiveTest, UnderHmpmdAChainKeepsOneWorkerAndWideWorkSpreads) {
  ASSERT_TRUE(cluster_->StartController({"--policy", "hmpmd"}).ok());
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(cluster_->StartWorker().ok());
  ASSERT_TRUE(cluster_->WaitWorkers(3, 20000));
  std::string tasks;
  for (int i = 0; i < 4; ++i) {
    tasks += R"({"id":"c)" + std::to_string(i) +
             R"(","kernel":"sleep","args":{"us":20000},"submodel":"chain")" +
             (i ? R"(,"inputs":["c)" + std::to_string(i - 1) + R"("])" : std::string()) + "},";
    tasks += R"({"id":"w)" + std::to_string(i) +
             R"(","kernel":"sleep","args":{"us":20000},"submodel":"wide"})" + (i < 3 ? "," : "");
  }
  auto id = cluster_->Submit(
      R"({"name":"floating","submodels":[)"
      R"({"name":"chain","kind":"learner","devices":1,"state_bytes":1000000},)"
      R"({"name":"wide","kind":"actor","devices":1,"state_bytes":1000000}],"tasks":[)" +
      tasks + "]}");
  ASSERT_TRUE(id.ok()) << id.status().ToString();
  ASSERT_EQ(cluster_->WaitJob(*id, 20000).value("state", ""), "succeeded");
  auto table = cluster_->Get("/api/v1/jobs/" + std::to_string(*id) + "/tasks");
  ASSERT_TRUE(table.is_object()) << table.dump();
  std::set<int> chain, wide;
  for (const auto& t : table["tasks"]) {
    (t.value("id", "")[0] == 'c' ? chain : wide).insert(t.value("device", -1));
  }
  EXPECT_EQ(chain.size(), 1u) << table.dump();
  EXPECT_EQ(wide.size(), 2u) << table.dump();
  EXPECT_EQ(chain.count(*wide.begin()) + chain.count(*wide.rbegin()), 0u) << table.dump();
}

// Every policy the controller takes (the SPMD baselines included).
INSTANTIATE_TEST_SUITE_P(Policies, PolicySetsLiveTest, ::testing::ValuesIn(PolicyNames()),
                         [](const auto& p) {
                           std::string name = p.param;
                           for (char& ch : name) ch = ch == '-' ? '_' : ch;
                           return name;
                         });

}  // namespace
}  // namespace hmpmd::testing
