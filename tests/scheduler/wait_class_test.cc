// Tests for the engine's policy wait classes (Policy::WaitClass): once a
// class is told RetryLater, its other waiting tasks are set aside unasked
// until its best one is placed, so a Schedule() pass asks the policy once
// per blocked class, not once per waiting task; order and counts stay.
#include <gtest/gtest.h>

#include <algorithm>
#include <memory>
#include <string>
#include <vector>

#include "hmpmd/scheduler/scheduler.h"
#include "test_builders.h"

namespace hmpmd {
namespace {

using test::Device;
using test::SpecBuilder;
using test::TaskBuilder;
using test::VirtualLoop;

// Tasks of sub-model "pinned" run only on device 0 and only when its core
// is idle; the others run anywhere. Counts Place() calls per sub-model.
class PinnedPolicy final : public Policy {
 public:
  explicit PinnedPolicy(bool classes) : classes_(classes) {}
  std::string_view Name() const override { return "pinned"; }
  // Task order inside the spec: the first listed goes first.
  double Priority(const TaskView& task) const override { return -static_cast<double>(task.index); }
  uint64_t WaitClass(const TaskView& task) const override {
    return classes_ && Pinned(task) ? 7 : 0;
  }
  Placement Place(const TaskView& task, const ResourcePool& pool, TimeUs now) override {
    if (!Pinned(task)) {
      ++other_calls;
      return EarliestCore(task, CoreKind::kCube, pool, [](DeviceId d) { return d != 0; });
    }
    ++pinned_calls;
    for (CoreId c : pool.device(0).cores) {
      const ResourcePool::Core& core = pool.core(c);
      if (core.queued == 0 && core.busy_until <= now && pool.HasCapacity(c)) {
        return Placement::Placed(c);
      }
    }
    return Placement::RetryLater();
  }
  int pinned_calls = 0;
  int other_calls = 0;

 private:
  static bool Pinned(const TaskView& task) {
    return task.graph->spec().submodels[task.task->submodel].name == "pinned";
  }
  bool classes_;
};

JobSpec PinnedJob(int pinned, int free) {
  SpecBuilder s;
  s.Submodel("pinned").Submodel("free");
  for (int i = 0; i < pinned; ++i)
    s.Add(TaskBuilder("p" + std::to_string(i)).Us(10).Submodel("pinned"));
  for (int i = 0; i < free; ++i)
    s.Add(TaskBuilder("f" + std::to_string(i)).Us(25).Submodel("free"));
  return s;
}

struct Outcome {
  std::vector<int> pinned_calls_per_pass;
  std::vector<std::string> pinned_order;  // dispatch order of the pinned tasks
  size_t ready_after_first_pass = 0;
  uint64_t done = 0;
};

Outcome RunPinned(bool classes, int pinned, int free) {
  auto policy = std::make_unique<PinnedPolicy>(classes);
  PinnedPolicy* p = policy.get();
  Scheduler sched(SchedulerOptions{}, std::move(policy));
  sched.AddDevice(Device("d0", 1));
  sched.AddDevice(Device("d1", 1));
  auto graph = test::BuildGraph(PinnedJob(pinned, free));
  Result<JobId> id = sched.AddJob(graph, 0);
  EXPECT_TRUE(id.ok());
  VirtualLoop loop(&sched);
  Outcome o;
  int before = 0;
  loop.Schedule();
  o.pinned_calls_per_pass.push_back(p->pinned_calls - before);
  o.ready_after_first_pass = sched.ready_count();
  for (int events = 0; events < 10000 && loop.DeliverNext(); ++events) {
    before = p->pinned_calls;
    loop.Schedule();
    o.pinned_calls_per_pass.push_back(p->pinned_calls - before);
  }
  for (const auto& st : loop.log()) {
    const std::string& tid = graph->spec_task(st.d.run % graph->size()).id;
    if (tid[0] == 'p') o.pinned_order.push_back(tid);
  }
  o.done = sched.job(*id)->done;
  return o;
}

TEST(WaitClassTest, ABlockedClassIsAskedOncePerPassNotOncePerWaitingTask) {
  Outcome o = RunPinned(/*classes=*/true, 40, 6);
  EXPECT_EQ(o.done, 46u);
  // At most one placed and one refused per pass (a pass where device 0
  // frees places one pinned task, then finds the class blocked again).
  ASSERT_FALSE(o.pinned_calls_per_pass.empty());
  EXPECT_LE(*std::max_element(o.pinned_calls_per_pass.begin(), o.pinned_calls_per_pass.end()), 2);
  // The set-aside tasks still count as ready: 39 pinned + 5 free wait.
  EXPECT_EQ(o.ready_after_first_pass, 44u);
  // Without classes the first pass asks about every waiting pinned task:
  // the test can tell the two apart.
  Outcome without = RunPinned(/*classes=*/false, 40, 6);
  EXPECT_EQ(without.done, 46u);
  EXPECT_EQ(without.pinned_calls_per_pass.front(), 40);
}

TEST(WaitClassTest, SetAsideTasksRunInPriorityOrderAndNoneIsLost) {
  Outcome with = RunPinned(/*classes=*/true, 25, 9);
  Outcome without = RunPinned(/*classes=*/false, 25, 9);
  ASSERT_EQ(with.pinned_order.size(), 25u);
  EXPECT_EQ(with.pinned_order, without.pinned_order);
  for (size_t i = 0; i < with.pinned_order.size(); ++i) {
    EXPECT_EQ(with.pinned_order[i], "p" + std::to_string(i));
  }
}

}  // namespace
}  // namespace hmpmd
