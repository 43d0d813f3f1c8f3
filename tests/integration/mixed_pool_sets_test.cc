// Sub-model device sets on a pool of workers with different cores (the
// README's cube=1,vector=1 and cube=2 workers), with real processes: a set
// laid out on a device without the core kind a task needs takes one that
// has it, so jobs with actor and learner sub-models finish.
#include <gtest/gtest.h>

#include <string>

#include "process_cluster_fixture.h"

namespace hmpmd::testing {
namespace {

class MixedPoolSetsTest : public ProcessClusterFixture {
 protected:
  MixedPoolSetsTest() : ProcessClusterFixture("hmpmd-mixed-sets") {}
  void Start(const std::vector<std::string>& cores) {
    ASSERT_TRUE(cluster_->StartController().ok());
    for (const std::string& c : cores) ASSERT_TRUE(cluster_->StartWorker({}, c).ok());
    ASSERT_TRUE(cluster_->WaitWorkers(cores.size(), 20000));
  }
  std::string Run(const std::string& spec) {
    auto id = cluster_->Submit(spec);
    EXPECT_TRUE(id.ok()) << id.status().ToString();
    if (!id.ok()) return "";
    return cluster_->WaitJob(*id, 20000).value("state", "");
  }
};

// (b) A learner of two with an allreduce gang on vector cores.
TEST_F(MixedPoolSetsTest, LearnerGangRunsOnTheVectorDevices) {
  Start({"cube=1,vector=1", "cube=2", "cube=1,vector=1"});
  EXPECT_EQ(Run(R"({"name":"dp-learner",
 "submodels":[{"name":"learner","kind":"learner","devices":2}],
 "tasks":[{"id":"g0","kernel":"gemm","args":{"m":64,"n":64,"k":64},"submodel":"learner"},
          {"id":"g1","kernel":"gemm","args":{"m":64,"n":64,"k":64},"submodel":"learner"},
          {"id":"ar0","kernel":"allreduce","core":"vector","submodel":"learner","inputs":["g0"],
           "collective":{"group":"grads","op":"allreduce"}},
          {"id":"ar1","kernel":"allreduce","core":"vector","submodel":"learner","inputs":["g1"],
           "collective":{"group":"grads","op":"allreduce"}}]})"),
            "succeeded");
}

// (a) Two pinned actors, each with a vector task; one vector device.
TEST_F(MixedPoolSetsTest, PinnedActorsBothReachTheVectorDevice) {
  Start({"cube=1,vector=1", "cube=2"});
  EXPECT_EQ(Run(R"({"name":"two-actors",
 "submodels":[{"name":"actor0","kind":"actor","devices":1,"elastic":false},
              {"name":"actor1","kind":"actor","devices":1,"elastic":false}],
 "tasks":[{"id":"gen0","kernel":"spin","args":{"us":1000},"submodel":"actor0"},
          {"id":"post0","kernel":"scale","args":{"n":1024},"core":"vector","submodel":"actor0",
           "inputs":["gen0"]},
          {"id":"gen1","kernel":"spin","args":{"us":1000},"submodel":"actor1"},
          {"id":"post1","kernel":"scale","args":{"n":1024},"core":"vector","submodel":"actor1",
           "inputs":["gen1"]}]})"),
            "succeeded");
}

// (d) Store caps: a 1 MiB worker (registered first, so the actor's set
// is laid out on it) and a 64 MiB one; the actor's task scales a 4 MiB
// input, a size known only once its producer ran. Elastic: the set grows by
// the 64 MiB worker and the job succeeds; pinned: the job fails naming the
// store cap. Both waited for ever before.
class MixedStoresTest : public MixedPoolSetsTest {
 protected:
  void StartStores() {
    ASSERT_TRUE(cluster_->StartController().ok());
    ASSERT_TRUE(cluster_->StartWorker({"--memory-mb", "1", "--name", "small"}).ok());
    ASSERT_TRUE(cluster_->WaitWorkers(1, 20000));
    ASSERT_TRUE(cluster_->StartWorker({"--memory-mb", "64", "--name", "large"}).ok());
    ASSERT_TRUE(cluster_->WaitWorkers(2, 20000));
  }
  static std::string Spec(bool elastic) {
    return std::string(R"({"name":"store-actor",
 "submodels":[{"name":"actor","kind":"actor","devices":1,"elastic":)") +
           (elastic ? "true" : "false") + R"(}],
 "tasks":[{"id":"src","kernel":"scale","args":{"n":1048576,"factor":2}},
          {"id":"post","kernel":"scale","args":{"factor":2},"submodel":"actor",
           "inputs":["src"]}]})";
  }
};

TEST_F(MixedStoresTest, ElasticActorGrowsByTheWorkerWhoseStoreHoldsItsOutputs) {
  StartStores();
  EXPECT_EQ(Run(Spec(true)), "succeeded");
}

TEST_F(MixedStoresTest, PinnedActorWhoseStoresAreTooSmallFailsNamingTheCap) {
  StartStores();
  auto id = cluster_->Submit(Spec(false));
  ASSERT_TRUE(id.ok()) << id.status().ToString();
  nlohmann::json job = cluster_->WaitJob(*id, 20000);
  EXPECT_EQ(job.value("state", ""), "failed") << job.dump();
  const std::string error = job.value("error", "");
  EXPECT_NE(error.find("'post'"), std::string::npos) << error;
  EXPECT_NE(error.find("store cap"), std::string::npos) << error;
  EXPECT_NE(error.find("1 MiB"), std::string::npos) << error;
}

}  // namespace
}  // namespace hmpmd::testing
