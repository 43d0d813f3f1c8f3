// Real controller, real worker processes, loopback: DAG jobs of several
// shapes run to completion with every dependency and core respected.
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>
#include <sstream>

#include "cluster_fixture.h"

namespace hmpmd::testing {
namespace {

using json = nlohmann::json;

json Task(const std::string& id, const std::string& kernel, json args = json::object(),
          std::vector<std::string> inputs = {}, const std::string& core = "cube") {
  return {{"id", id}, {"kernel", kernel}, {"args", args}, {"inputs", inputs}, {"core", core}};
}

class DagRunTest : public ClusterTest {};

TEST_F(DagRunTest, ChainAcrossCoreKindsRunsInOrder) {
  StartCluster(2);
  json tasks = json::array();
  for (int i = 0; i < 30; ++i) {
    std::vector<std::string> in;
    if (i > 0) in.push_back("t" + std::to_string(i - 1));
    tasks.push_back(
        Task("t" + std::to_string(i), "spin", {{"us", 200}}, in, i % 3 == 2 ? "vector" : "cube"));
  }
  JobResult r = RunSpec(json{{"name", "chain"}, {"tasks", tasks}}.dump());
  ASSERT_EQ(r.state, JobState::kSucceeded) << r.error;
  ExpectValidSchedule(r);
}

TEST_F(DagRunTest, FanOutFanInUsesEveryWorker) {
  StartCluster(3);
  json tasks = json::array({Task("root", "noop")});
  std::vector<std::string> mids;
  for (int i = 0; i < 24; ++i) {
    mids.push_back("m" + std::to_string(i));
    tasks.push_back(Task(mids.back(), "spin", {{"us", 2000}}, {"root"}));
  }
  tasks.push_back(Task("sink", "noop", json::object(), mids));
  JobResult r = RunSpec(json{{"name", "fan"}, {"tasks", tasks}}.dump());
  ASSERT_EQ(r.state, JobState::kSucceeded) << r.error;
  ExpectValidSchedule(r);
  std::set<DeviceId> devices;
  for (const RunRecord& run : r.runs) devices.insert(run.device);
  EXPECT_EQ(devices.size(), 3u) << "independent work should spread over the pool";
}

TEST_F(DagRunTest, RandomLayeredDagsRespectEveryEdge) {
  StartCluster(3, "cube=1,vector=2");
  const uint32_t seed = 20261121;
  std::mt19937 rng(seed);
  SCOPED_TRACE("seed " + std::to_string(seed));
  json tasks = json::array();
  const char* kernels[] = {"noop", "spin", "gemm", "add", "scale", "sleep"};
  for (int i = 0; i < 80; ++i) {
    std::vector<std::string> in;
    int fan_in = i == 0 ? 0 : std::uniform_int_distribution<int>(0, 3)(rng);
    for (int k = 0; k < fan_in; ++k) {
      in.push_back("n" + std::to_string(std::uniform_int_distribution<int>(0, i - 1)(rng)));
    }
    std::string kernel = kernels[rng() % 6];
    json args = json::object();
    if (kernel == "spin" || kernel == "sleep") args["us"] = 100 + rng() % 400;
    if (kernel == "gemm") args = {{"m", 32}, {"n", 48}, {"k", 40}};
    if (kernel == "add" || kernel == "scale") args["n"] = 4096;
    tasks.push_back(Task("n" + std::to_string(i), kernel, args, in, rng() % 2 ? "cube" : "vector"));
  }
  JobResult r = RunSpec(json{{"name", "random"}, {"repeat", 3}, {"tasks", tasks}}.dump());
  ASSERT_EQ(r.state, JobState::kSucceeded) << r.error;
  ExpectValidSchedule(r);
}

TEST_F(DagRunTest, MultimodalExampleCompletes) {
  StartCluster(4);
  std::ifstream in(std::string(HMPMD_SOURCE_DIR) + "/examples/multimodal.json");
  ASSERT_TRUE(in) << "examples/multimodal.json";
  std::stringstream ss;
  ss << in.rdbuf();
  JobResult r = RunSpec(ss.str());
  ASSERT_EQ(r.state, JobState::kSucceeded) << r.error;
  ExpectValidSchedule(r);
  EXPECT_GT(r.graph->steps(), 1u);
}

TEST_F(DagRunTest, CubeAndVectorLanesOfOneDeviceRunAtOnce) {
  StartCluster(1);
  json tasks = json::array(
      {Task("c", "spin", {{"us", 30000}}), Task("v", "spin", {{"us", 30000}}, {}, "vector")});
  JobResult r = RunSpec(json{{"tasks", tasks}}.dump());
  ASSERT_EQ(r.state, JobState::kSucceeded) << r.error;
  const RunRecord& c = r.runs[0];
  const RunRecord& v = r.runs[1];
  EXPECT_EQ(c.device, v.device);
  EXPECT_LT(std::max(c.start, v.start), std::min(c.end, v.end))
      << "cube and vector work of one device should overlap in time";
}

}  // namespace
}  // namespace hmpmd::testing
