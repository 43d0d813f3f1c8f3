// Tests for Placement::RetryWhen: a task the policy says cannot be placed
// before some key is woken (Policy::TakeWoken) is set aside unasked until
// then, still counts as ready, and runs once woken; spmd-1f1b uses it for
// tasks waiting for their turn in a program order or for their one device,
// so it asks about each such task a bounded number of times, not once per
// Schedule() pass.
#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "hmpmd/scheduler/scheduler.h"
#include "hmpmd/scheduler/spmd_policy.h"
#include "hmpmd/sim/workloads.h"
#include "test_builders.h"

namespace hmpmd {
namespace {

using test::Device;
using test::SpecBuilder;
using test::TaskBuilder;
using test::VirtualLoop;

// Task "late" sleeps on key 7 until `open` is set and the key woken; the
// others run anywhere. Counts Place() calls for "late".
class GatePolicy final : public Policy {
 public:
  std::string_view Name() const override { return "gate"; }
  double Priority(const TaskView& task) const override { return -static_cast<double>(task.index); }
  Placement Place(const TaskView& task, const ResourcePool& pool, TimeUs /*now*/) override {
    if (task.spec->id == "late") {
      ++late_calls;
      if (!open) return Placement::RetryWhen(7);
    }
    return EarliestCore(task, CoreKind::kCube, pool, [](DeviceId) { return true; });
  }
  void TakeWoken(std::vector<uint64_t>* keys) override {
    keys->insert(keys->end(), woken.begin(), woken.end());
    woken.clear();
  }
  int late_calls = 0;
  bool open = false;
  std::vector<uint64_t> woken;
};

TEST(RetryWhenTest, ASleepingTaskIsNotAskedUntilItsKeyIsWoken) {
  auto policy = std::make_unique<GatePolicy>();
  GatePolicy* p = policy.get();
  Scheduler sched(SchedulerOptions{}, std::move(policy));
  sched.AddDevice(Device("d0", 1));
  SpecBuilder s;
  s.Add(TaskBuilder("late").Us(10));
  for (int i = 0; i < 6; ++i) s.Add(TaskBuilder("t" + std::to_string(i)).Us(10));
  auto graph = test::BuildGraph(s);
  Result<JobId> id = sched.AddJob(graph, 0);
  ASSERT_TRUE(id.ok());
  VirtualLoop loop(&sched);
  loop.Schedule();
  EXPECT_EQ(p->late_calls, 1);
  for (int events = 0; events < 100 && loop.DeliverNext(); ++events) loop.Schedule();
  // Every other task ran; "late" was asked once and still waits, as ready.
  EXPECT_EQ(sched.job(*id)->done, 6u);
  EXPECT_EQ(p->late_calls, 1);
  EXPECT_EQ(sched.ready_count(), 1u);
  // A key nobody sleeps on wakes nothing; the gate's key runs it.
  p->woken = {8};
  loop.Schedule();
  EXPECT_EQ(p->late_calls, 1);
  p->open = true;
  p->woken = {7};
  loop.Schedule();
  EXPECT_EQ(p->late_calls, 2);
  for (int events = 0; events < 10 && loop.DeliverNext(); ++events) loop.Schedule();
  EXPECT_EQ(sched.job(*id)->done, 7u);
  EXPECT_EQ(sched.ready_count(), 0u);
}

// spmd-1f1b behind a counter of Place() calls.
class CountingSpmd final : public Policy {
 public:
  std::string_view Name() const override { return inner_.Name(); }
  void OnJobAdded(const JobRun& job, const ResourcePool& pool) override {
    inner_.OnJobAdded(job, pool);
  }
  void OnJobRemoved(JobId job) override { inner_.OnJobRemoved(job); }
  double Priority(const TaskView& task) const override { return inner_.Priority(task); }
  Placement Place(const TaskView& task, const ResourcePool& pool, TimeUs now) override {
    ++calls;
    return inner_.Place(task, pool, now);
  }
  void OnPlaced(const TaskView& task, CoreId core) override { inner_.OnPlaced(task, core); }
  void OnReleased(JobId job, uint32_t run, CoreId core, const ResourcePool& pool) override {
    inner_.OnReleased(job, run, core, pool);
  }
  bool Allows(const TaskView& task, DeviceId device) const override {
    return inner_.Allows(task, device);
  }
  uint64_t WaitClass(const TaskView& task) const override { return inner_.WaitClass(task); }
  void TakeWoken(std::vector<uint64_t>* keys) override { inner_.TakeWoken(keys); }
  uint64_t calls = 0;

 private:
  SpmdPolicy inner_;
};

TEST(RetryWhenTest, SpmdAsksAboutATaskWaitingForItsTurnABoundedNumberOfTimes) {
  // 4 uniform stages on 4 devices over 32 micro-batches: every forward of
  // stage 0 is ready at once, but 1F1B lets one run at a time.
  auto policy = std::make_unique<CountingSpmd>();
  CountingSpmd* p = policy.get();
  Scheduler sched(SchedulerOptions{}, std::move(policy));
  for (int d = 0; d < 4; ++d) sched.AddDevice(Device("d" + std::to_string(d), 1));
  auto graph = test::BuildGraph(PipelineWorkload(4, 32, 100, 200));
  Result<JobId> id = sched.AddJob(graph, 0);
  ASSERT_TRUE(id.ok());
  VirtualLoop loop(&sched);
  loop.Schedule();
  for (int events = 0; events < 10000 && loop.DeliverNext(); ++events) loop.Schedule();
  const uint64_t tasks = graph->size();
  ASSERT_EQ(sched.job(*id)->done, tasks);
  // Asked once when ready, once when its turn comes, and again when its
  // device frees if it was busy then: 413 calls for these 256 tasks.
  // Asking every waiting task at every pass took 3,575.
  EXPECT_LE(p->calls, 2 * tasks);
}

}  // namespace
}  // namespace hmpmd
