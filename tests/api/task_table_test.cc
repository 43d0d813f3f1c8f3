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

// Adds to `s` one device ("w", one cube core) and a job of `tasks` at time
// 0; returns the job's id (0, with a test failure, if it is refused).
JobId AddOneCoreJob(Scheduler& s, std::vector<TaskSpec> tasks) {
  DeviceDesc d;
  d.name = "w";
  d.cores = {1, 0};
  s.AddDevice(d);
  JobSpec spec;
  spec.name = "job";
  spec.tasks = std::move(tasks);
  auto graph = JobGraph::Build(std::move(spec));
  EXPECT_TRUE(graph.ok()) << graph.status().ToString();
  if (!graph.ok()) return 0;
  auto id = s.AddJob(*graph, 0);
  EXPECT_TRUE(id.ok()) << id.status().ToString();
  return id.ok() ? *id : 0;
}

TaskSpec Noop(const char* id, std::vector<std::string> inputs = {}) {
  TaskSpec t;
  t.id = id;
  t.kernel = "noop";
  t.inputs = std::move(inputs);
  return t;
}

// Run `run`'s entry in the task table of job `id`.
nlohmann::json RowOf(const Scheduler& s, JobId id, size_t run) {
  return nlohmann::json::parse(RenderTaskPage(SnapshotTaskPage(*s.job(id), s.pool(), TaskQuery{})))
      .at("tasks")
      .at(run);
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

// A run sent early, queued behind its producer on the producer's core,
// cannot start before that producer ends: it shows as blocked on it (as
// docs/architecture.md#early-dispatch says), not as running, and as
// running once its input is done.
TEST(TaskTableTest, ARunSentEarlyShowsBlockedUntilItsInputIsDone) {
  SchedulerOptions o;
  o.pool.max_queue_per_core = 64;  // the controller's queueing and early dispatch
  o.pool.lookahead_us = 200;
  o.pool.lookahead_waiting_only = true;
  o.early_dispatch = true;
  Scheduler s(o, std::make_unique<HmpmdPolicy>());
  const JobId id = AddOneCoreJob(s, {Noop("a"), Noop("b", {"a"})});
  ASSERT_NE(id, 0u);
  std::vector<Dispatch> out;
  s.Schedule(0, &out);
  ASSERT_EQ(out.size(), 2u) << "b goes early, behind a";
  ASSERT_EQ(s.job(id)->runs[1].state, TaskState::kRunning);
  auto state_of_b = [&] { return RowOf(s, id, 1); };
  nlohmann::json b_row = state_of_b();
  EXPECT_EQ(b_row.at("state"), "blocked") << b_row.dump();
  EXPECT_EQ(b_row.at("waiting").at("for"), "inputs") << b_row.dump();
  TaskQuery blocked;
  blocked.state = TaskState::kBlocked;
  EXPECT_EQ(nlohmann::json::parse(RenderTaskPage(SnapshotTaskPage(*s.job(id), s.pool(), blocked)))
                .at("total"),
            1);
  ASSERT_TRUE(s.OnTaskDone(id, 0, out[0].attempt, 10, 20, 20));
  b_row = state_of_b();
  EXPECT_EQ(b_row.at("state"), "running") << b_row.dump();
  EXPECT_FALSE(b_row.contains("waiting")) << b_row.dump();
}

// A run out on a worker says when it was sent (a page opened mid-run draws
// it from there); a done one says when it ran instead.
TEST(TaskTableTest, ARunningRunSaysWhenItWasDispatched) {
  Scheduler s(SchedulerOptions{}, std::make_unique<HmpmdPolicy>());
  const JobId id = AddOneCoreJob(s, {Noop("a")});
  ASSERT_NE(id, 0u);
  std::vector<Dispatch> out;
  s.Schedule(1000, &out);
  ASSERT_EQ(out.size(), 1u);
  auto row = [&] { return RowOf(s, id, 0); };
  nlohmann::json a_row = row();
  EXPECT_EQ(a_row.at("state"), "running") << a_row.dump();
  EXPECT_EQ(a_row.at("dispatched_us"), 0) << "sent at the job's origin: " << a_row.dump();
  ASSERT_TRUE(s.OnTaskDone(id, 0, out[0].attempt, 1100, 1400, 1400));
  a_row = row();
  EXPECT_FALSE(a_row.contains("dispatched_us")) << a_row.dump();
  EXPECT_EQ(a_row.at("start_us"), 100) << a_row.dump();
  EXPECT_EQ(a_row.at("end_us"), 400) << a_row.dump();
}

}  // namespace
}  // namespace hmpmd
