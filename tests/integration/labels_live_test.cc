// Labels with real processes: two workers started with different
// `--label accel=...`, a job whose encoder sub-model requires one of them
// (docs/scheduling.md, "Labels"). The encoder's tasks run only on that
// worker, a task that requires the other label runs on the other, the pool
// and the task table show the labels, and a job that requires a label no
// worker has is refused at submission naming the task and the label.
#include <gtest/gtest.h>

#include <string>

#include "process_cluster_fixture.h"

namespace hmpmd::testing {
namespace {

class LabelsLiveTest : public ProcessClusterFixture,
                       public ::testing::WithParamInterface<std::string> {
 protected:
  LabelsLiveTest() : ProcessClusterFixture("hmpmd-labels") {}
  void Start() {
    ASSERT_TRUE(cluster_->StartController({"--policy", GetParam()}).ok());
    ASSERT_TRUE(cluster_->StartWorker({"--name", "w910b", "--label", "accel=910b"}).ok());
    ASSERT_TRUE(
        cluster_->StartWorker({"--name", "w910c", "--label", "accel=910c", "--label", "zone=a"})
            .ok());
    ASSERT_TRUE(cluster_->WaitWorkers(2, 20000));
  }
};

// Six encoder tasks (the sub-model requires accel=910c), each feeding a
// decoder task that requires nothing, and a head that requires 910b.
std::string EncoderJob() {
  std::string tasks;
  for (int i = 0; i < 6; ++i) {
    const std::string n = std::to_string(i);
    tasks +=
        R"({"id":"enc)" + n + R"(","kernel":"sleep","args":{"us":5000},"submodel":"encoder"},)";
    tasks += R"({"id":"dec)" + n + R"(","kernel":"sleep","args":{"us":5000},"inputs":["enc)" + n +
             R"("]},)";
  }
  tasks += R"({"id":"head","kernel":"noop","inputs":["dec0"],"requires":{"accel":"910b"}})";
  return R"({"name":"labelled","submodels":[{"name":"encoder","kind":"encoder",)"
         R"("requires":{"accel":"910c"}}],"tasks":[)" +
         tasks + "]}";
}

TEST_P(LabelsLiveTest, TasksRunOnlyOnWorkersWithTheLabelsTheyRequire) {
  Start();
  auto pool = cluster_->Get("/api/v1/pool");
  ASSERT_TRUE(pool.is_object()) << pool.dump();
  for (const auto& d : pool["devices"]) {
    const std::string name = d.value("name", "");
    if (name == "w910b") {
      EXPECT_EQ(d["labels"], nlohmann::json({{"accel", "910b"}}));
    } else if (name == "w910c") {
      EXPECT_EQ(d["labels"], nlohmann::json({{"accel", "910c"}, {"zone", "a"}}));
    }
  }
  auto id = cluster_->Submit(EncoderJob());
  ASSERT_TRUE(id.ok()) << id.status().ToString();
  ASSERT_EQ(cluster_->WaitJob(*id, 30000).value("state", ""), "succeeded");
  auto table = cluster_->Get("/api/v1/jobs/" + std::to_string(*id) + "/tasks?limit=100");
  ASSERT_TRUE(table.is_object()) << table.dump();
  int checked = 0;
  for (const auto& t : table["tasks"]) {
    const std::string task = t.value("id", "");
    if (task.starts_with("enc")) {
      EXPECT_EQ(t.value("worker", ""), "w910c") << GetParam() << ": " << t.dump();
      EXPECT_EQ(t["requires"], nlohmann::json({{"accel", "910c"}})) << t.dump();
      ++checked;
    } else if (task == "head") {
      EXPECT_EQ(t.value("worker", ""), "w910b") << GetParam() << ": " << t.dump();
      ++checked;
    } else {
      EXPECT_FALSE(t.contains("requires")) << t.dump();
    }
  }
  EXPECT_EQ(checked, 7) << table.dump();
}

TEST_P(LabelsLiveTest, AJobNoWorkerCanRunIsRefusedNamingTheLabel) {
  Start();
  auto id = cluster_->Submit(R"({"tasks":[{"id":"a","kernel":"noop"},)"
                             R"({"id":"enc","kernel":"noop","requires":{"accel":"910x"}}]})");
  ASSERT_FALSE(id.ok());
  EXPECT_NE(id.status().message().find("HTTP 400"), std::string::npos) << id.status().message();
  EXPECT_NE(id.status().message().find("tasks[1] 'enc': requires accel=910x: no worker has it"),
            std::string::npos)
      << id.status().message();
}

INSTANTIATE_TEST_SUITE_P(Policies, LabelsLiveTest, ::testing::Values("hmpmd", "fifo"));

}  // namespace
}  // namespace hmpmd::testing
