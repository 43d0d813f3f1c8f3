// The task table's waiting reasons (api/task_table.{h,cc}): a ready
// run that its last placement try found no room for in the object stores of
// the devices it may use waits for "store"; the others for a core.
#include "hmpmd/api/task_table.h"

#include <gtest/gtest.h>

#include <memory>
#include <nlohmann/json.hpp>
#include <vector>

#include "hmpmd/scheduler/hmpmd_policy.h"
#include "hmpmd/scheduler/job_graph.h"
#include "hmpmd/scheduler/scheduler.h"

namespace hmpmd {
namespace {

TaskSpec Scale(const char* id, double n) {
  TaskSpec t;
  t.id = id;
  t.kernel = "scale";
  t.args.push_back({"n", ArgValue(n)});
  return t;
}

TEST(TaskTableTest, ARunRefusedForRoomInTheStoresWaitsForStore) {
  SchedulerOptions o;
  o.pool.count_store = true;  // as the controller runs it
  Scheduler s(o, std::make_unique<HmpmdPolicy>());
  DeviceDesc d;
  d.name = "w";
  d.cores = {2, 0};
  d.memory_mb = 64;
  s.AddDevice(d);
  // x (40 MiB) is kept until z reads it; y (40 MiB) fits beside it on no
  // store and waits for room, while a cube core is free.
  JobSpec spec;
  spec.name = "stores";
  spec.tasks = {Scale("x", 10 * 1024 * 1024), Scale("y", 10 * 1024 * 1024)};
  TaskSpec z;
  z.id = "z";
  z.kernel = "noop";
  z.inputs = {"x"};
  spec.tasks.push_back(z);
  auto graph = JobGraph::Build(std::move(spec));
  ASSERT_TRUE(graph.ok()) << graph.status().ToString();
  auto id = s.AddJob(*graph, 0);
  ASSERT_TRUE(id.ok());
  std::vector<Dispatch> out;
  s.Schedule(0, &out);
  ASSERT_EQ(out.size(), 1u);
  ASSERT_EQ(out[0].run, 0u);
  const nlohmann::json page =
      nlohmann::json::parse(RenderTaskPage(SnapshotTaskPage(*s.job(*id), s.pool(), TaskQuery{})));
  const nlohmann::json& y = page.at("tasks").at(1);
  ASSERT_EQ(y.at("id"), "y");
  EXPECT_EQ(y.at("state"), "ready");
  EXPECT_EQ(y.at("waiting").at("for"), "store") << y.dump();
  EXPECT_NE(y.at("waiting").at("reason").get<std::string>().find("--memory-mb"), std::string::npos);
  EXPECT_EQ(page.at("tasks").at(2).at("waiting").at("for"), "inputs");
}

}  // namespace
}  // namespace hmpmd
