// A pinned actor's runs stay on its one device under each policy, live:
// real controller and worker processes. Before, `--policy fifo` placed them
// on any worker, so a stateful kernel (examples/rl's rl.rollout after
// rl.load_weights) failed with "this actor holds no weights on this device".
#include <gtest/gtest.h>

#include <set>
#include <string>

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

INSTANTIATE_TEST_SUITE_P(Policies, PolicySetsLiveTest, ::testing::Values("fifo", "spmd-1f1b"),
                         [](const auto& p) {
                           std::string name = p.param;
                           for (char& ch : name) ch = ch == '-' ? '_' : ch;
                           return name;
                         });

}  // namespace
}  // namespace hmpmd::testing
