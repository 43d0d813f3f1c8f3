// History across controller restarts (issue 35, items 2 and 3): a job whose
// controller is killed mid-run twice shows every run in its trace and task
// table afterwards, each with its worker and core, and its wall-clock times
// stay what they were (the store keeps them; the monotonic clock of a
// restarted controller is not the one that took them). Real processes:
// the controller runs with --db and is killed with SIGKILL.
#include <gtest/gtest.h>

#include <chrono>
#include <map>
#include <set>
#include <string>

#include "process_cluster_fixture.h"

namespace hmpmd::testing {
namespace {

int64_t UnixNowUs() {
  return std::chrono::duration_cast<std::chrono::microseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

// `n` chained sleep tasks in `width` chains, so every point of the job has
// runs done and runs to come.
std::string ChainsSpec(int n, int width, int sleep_us) {
  nlohmann::json tasks = nlohmann::json::array();
  for (int i = 0; i < n; ++i) {
    nlohmann::json t = {
        {"id", "t" + std::to_string(i)}, {"kernel", "sleep"}, {"args", {{"us", sleep_us}}}};
    if (i >= width) t["inputs"] = {"t" + std::to_string(i - width)};
    tasks.push_back(t);
  }
  return nlohmann::json{{"name", "history"}, {"tasks", tasks}}.dump();
}

class RestartHistoryTest : public ProcessClusterFixture {
 protected:
  RestartHistoryTest() : ProcessClusterFixture("hmpmd-history") {}
};

TEST_F(RestartHistoryTest, EveryRunIsTracedWithItsPlaceAfterTwoControllerRestarts) {
  ASSERT_TRUE(cluster_->StartController().ok());
  for (int i = 0; i < 2; ++i) ASSERT_TRUE(cluster_->StartWorker().ok());
  ASSERT_TRUE(cluster_->WaitWorkers(2, 10000));
  constexpr int kTasks = 48;
  const int64_t before_submit = UnixNowUs();
  auto id = cluster_->Submit(ChainsSpec(kTasks, 4, 20000));
  const int64_t after_submit = UnixNowUs();
  ASSERT_TRUE(id.ok()) << id.status().ToString();
  const std::string path = "/api/v1/jobs/" + std::to_string(*id);
  const nlohmann::json first = cluster_->Get(path);
  ASSERT_TRUE(first["submitted_unix_us"].is_number_integer()) << first.dump();
  const int64_t submitted = first["submitted_unix_us"].get<int64_t>();
  EXPECT_GE(submitted, before_submit) << first.dump();
  EXPECT_LE(submitted, after_submit) << first.dump();
  ASSERT_TRUE(first["submitted_at"].is_string()) << first.dump();
  EXPECT_EQ(first["submitted_at"].get<std::string>().back(), 'Z') << first.dump();

  WaitDone(*id, 12);
  cluster_->KillController();
  ASSERT_TRUE(cluster_->StartController().ok());
  WaitDone(*id, 28);
  cluster_->KillController();
  ASSERT_TRUE(cluster_->StartController().ok());
  const nlohmann::json j = cluster_->WaitJob(*id, 60000);
  const int64_t after_end = UnixNowUs();
  ASSERT_EQ(j.value("state", ""), "succeeded") << j.dump();

  // Its wall-clock times: the submit's as first answered, then in order,
  // all before now.
  EXPECT_EQ(j["submitted_unix_us"], submitted) << j.dump();
  ASSERT_TRUE(j["started_unix_us"].is_number_integer()) << j.dump();
  ASSERT_TRUE(j["finished_unix_us"].is_number_integer()) << j.dump();
  EXPECT_GE(j["started_unix_us"].get<int64_t>(), submitted);
  EXPECT_GE(j["finished_unix_us"].get<int64_t>(), j["started_unix_us"].get<int64_t>());
  EXPECT_LE(j["finished_unix_us"].get<int64_t>(), after_end);
  EXPECT_FALSE(j.contains("history_missing")) << j.dump();

  // Every run is in the trace, those of the killed controllers included.
  const nlohmann::json trace = cluster_->Get(path + "/trace");
  ASSERT_TRUE(trace.is_object()) << trace.dump();
  std::multiset<std::string> traced;
  std::map<int, std::string> device_names;
  int64_t ts0 = -1;
  for (const auto& e : trace["traceEvents"]) {
    if (e["ph"] == "X") traced.insert(e["args"]["task"].get<std::string>());
    if (e["name"] == "process_name") device_names[e["pid"]] = e["args"]["name"];
    if (e["name"] == "clock_sync") ts0 = e["args"]["ts0_unix_us"].get<int64_t>();
    EXPECT_NE(e["name"], "history_missing") << e.dump();
  }
  EXPECT_EQ(traced.size(), static_cast<size_t>(kTasks));
  for (int i = 0; i < kTasks; ++i) {
    EXPECT_EQ(traced.count("t" + std::to_string(i)), 1u) << "t" << i << " in the trace";
  }
  EXPECT_GE(ts0, submitted) << "ts 0 is the first run's start, after the submit";
  int past = 0;
  for (const auto& [pid, name] : device_names) {
    past += name.find("(before a controller restart)") != std::string::npos;
  }
  EXPECT_GT(past, 0) << "runs of the killed controllers are on their devices of then";

  // The task table gives each run its worker and core, and wall-clock times.
  const nlohmann::json tasks = cluster_->Get(path + "/tasks");
  ASSERT_EQ(tasks["tasks"].size(), static_cast<size_t>(kTasks)) << tasks.dump();
  int restored = 0;
  for (const auto& t : tasks["tasks"]) {
    EXPECT_EQ(t["state"], "done") << t.dump();
    EXPECT_TRUE(t.contains("core") && t.contains("worker")) << t.dump();
    ASSERT_TRUE(t["start_unix_us"].is_number_integer()) << t.dump();
    EXPECT_GE(t["start_unix_us"].get<int64_t>(), submitted) << t.dump();
    EXPECT_LE(t["end_unix_us"].get<int64_t>(), after_end) << t.dump();
    restored += t.value("restored", false);
  }
  EXPECT_GE(restored, 12) << "the runs done before the first kill were reloaded";
}

}  // namespace
}  // namespace hmpmd::testing
