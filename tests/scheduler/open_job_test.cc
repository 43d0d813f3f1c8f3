// Tests for open jobs (driver sessions): JobGraph::BuildOpen/Append and the
// Scheduler's AppendTasks, CancelRun, ReleaseOutput and CloseJob
// (scheduler/job_graph_append.cc, scheduler/scheduler_open.cc).
#include <gtest/gtest.h>

#include "hmpmd/scheduler/hmpmd_policy.h"
#include "hmpmd/scheduler/scheduler.h"
#include "test_builders.h"

namespace hmpmd {
namespace {

TaskSpec Task(std::string id, std::vector<std::string> inputs = {}, std::string kernel = "noop") {
  TaskSpec t;
  t.id = std::move(id);
  t.kernel = std::move(kernel);
  t.inputs = std::move(inputs);
  return t;
}

// Counts OnJobGrown calls.
class GrowPolicy final : public Policy {
 public:
  explicit GrowPolicy(int* grown) : grown_(grown) {}
  std::string_view Name() const override { return "grow"; }
  double Priority(const TaskView&) const override { return 0; }
  Placement Place(const TaskView& t, const ResourcePool& pool, TimeUs) override {
    return EarliestCore(t, t.spec->core, pool, [](DeviceId) { return true; });
  }
  void OnJobGrown(const JobRun&, const ResourcePool&) override { ++*grown_; }

 private:
  int* grown_;
};

class OpenJobTest : public ::testing::Test {
 protected:
  void SetUp() override {
    sched_ = std::make_unique<Scheduler>(SchedulerOptions{}, std::make_unique<GrowPolicy>(&grown_));
    sched_->AddDevice(test::Device("d0", 2, 0, {"noop", "allreduce"}));
    JobSpec spec;
    spec.name = "session";
    auto g = JobGraph::BuildOpen(spec);
    ASSERT_TRUE(g.ok()) << g.status().ToString();
    auto id = sched_->AddJob(*g, 0);
    ASSERT_TRUE(id.ok());
    job_ = *id;
  }
  Status Append(std::vector<TaskSpec> tasks, std::vector<SubmodelSpec> sms = {}) {
    return sched_->AppendTasks(job_, std::move(sms), std::move(tasks), now_);
  }
  std::vector<Dispatch> Schedule() {
    std::vector<Dispatch> out;
    sched_->Schedule(now_, &out);
    return out;
  }
  void Finish(const Dispatch& d, uint64_t bytes = 0) {
    ASSERT_TRUE(sched_->OnTaskDone(d.job, d.run, d.attempt, now_, now_ + 1, now_));
    sched_->RecordOutput(d.job, d.run, d.device, bytes, bytes > 0 ? 1 : 0);
  }
  const JobRun& Job() const { return *sched_->job(job_); }

  int grown_ = 0;
  std::unique_ptr<Scheduler> sched_;
  JobId job_ = 0;
  TimeUs now_ = 10;
};

TEST_F(OpenJobTest, GrowsAndRunsAppendedTasksAndEndsOnlyWhenClosed) {
  ASSERT_TRUE(Append({Task("a")}).ok());
  EXPECT_EQ(grown_, 1);
  auto d = Schedule();
  ASSERT_EQ(d.size(), 1u);
  Finish(d[0]);
  EXPECT_FALSE(IsTerminal(Job().state)) << "an open job waits for more tasks";
  ASSERT_TRUE(Append({Task("b", {"a"}), Task("c", {"b"})}).ok());
  d = Schedule();
  ASSERT_EQ(d.size(), 1u);
  EXPECT_EQ(d[0].run, 1u);
  Finish(d[0]);
  ASSERT_TRUE(sched_->CloseJob(job_, false, "", now_).ok());
  EXPECT_FALSE(IsTerminal(Job().state)) << "c has not run";
  d = Schedule();
  ASSERT_EQ(d.size(), 1u);
  Finish(d[0]);
  EXPECT_EQ(Job().state, JobState::kSucceeded);
  EXPECT_EQ(Job().graph->size(), 3u);
  EXPECT_EQ(sched_->held_runs(), 3u) << "appended runs count toward --max-held-runs";
  sched_->EraseJob(job_);
  EXPECT_EQ(sched_->held_runs(), 0u);
}

TEST_F(OpenJobTest, BadAppendsAreRefusedWholeWithOneLineNamingTaskAndField) {
  ASSERT_TRUE(Append({Task("a")}).ok());
  Status s = Append({Task("b"), Task("c", {"later"}), Task("later")});
  EXPECT_EQ(s.message(),
            "tasks[2] 'c': inputs: unknown task 'later' (inputs must be submitted before their "
            "consumers)");
  EXPECT_EQ(Job().graph->size(), 1u) << "nothing of a refused append is kept";
  EXPECT_EQ(Append({Task("a")}).message(), "tasks[1] 'a': id: duplicate of tasks[0]");
  TaskSpec x = Task("x");
  x.submodel = "ghost";
  EXPECT_EQ(Append({x}).message(),
            "tasks[1] 'x': submodel: unknown submodel 'ghost' (declare it under submodels)");
  EXPECT_EQ(Append({Task("k", {}, "no_such")}).message(),
            "tasks[1] 'k': kernel: no worker runs 'no_such' on a cube core");
  EXPECT_EQ(Append({}, {{"big", SubmodelKind::kActor, 5}}).message(),
            "submodels[1] 'big': devices: asks for 5, the pool has 1");
  // A collective group must be complete in one append.
  TaskSpec g1 = Task("g1", {}, "allreduce");
  g1.collective = CollectiveSpec{"grp", "allreduce", 8};
  ASSERT_TRUE(Append({g1}).ok());
  TaskSpec g2 = Task("g2", {}, "allreduce");
  g2.collective = CollectiveSpec{"grp", "allreduce", 8};
  EXPECT_EQ(Append({g2}).message(),
            "tasks[2] 'g2': collective.group: group 'grp' was completed by an earlier submit");
  // Members need distinct devices; the pool has one.
  TaskSpec h1 = Task("h1", {}, "allreduce"), h2 = Task("h2", {}, "allreduce");
  h1.collective = h2.collective = CollectiveSpec{"pair", "allreduce", 8};
  EXPECT_EQ(Append({h1, h2}).message(),
            "tasks[2] 'h1': collective.group: group 'pair' has 2 members, which need distinct "
            "devices; devices that run 'allreduce' on a cube core: 1");
}

TEST(OpenJobGraphTest, AppendRefusesGangsThatWaitForThemselves) {
  auto g = JobGraph::BuildOpen(JobSpec{});
  ASSERT_TRUE(g.ok()) << g.status().ToString();
  ASSERT_TRUE((*g)->Append({}, {Task("a")}).ok());
  // w2 waits for w1 of its own gang through mid: the gang could never start.
  TaskSpec w1 = Task("w1", {"a"}, "allreduce"), w2 = Task("w2", {"mid"}, "allreduce");
  w1.collective = w2.collective = CollectiveSpec{"wait", "allreduce", 8};
  EXPECT_EQ((*g)->Append({}, {w1, Task("mid", {"w1"}), w2}).message(),
            "tasks[3] 'w2': inputs: collective gangs wait for each other: w1 -> mid -> w2 "
            "(gang 'wait' with w1); a gang starts only when all its members can");
  EXPECT_EQ((*g)->size(), 1u);  // all or nothing
  w2.inputs = {"a"};
  EXPECT_TRUE((*g)->Append({}, {w1, w2, Task("mid", {"w1", "w2"})}).ok());
  EXPECT_EQ((*g)->size(), 4u);
}

TEST(OpenJobGraphTest, AppendRefusesControlCharactersInIdsAndNames) {
  // Driver tasks come from the wire, not through the JSON parser.
  auto g = JobGraph::BuildOpen(JobSpec{});
  ASSERT_TRUE(g.ok()) << g.status().ToString();
  EXPECT_EQ((*g)->Append({}, {Task("a\nb")}).message(),
            "tasks[0]: id: contains the control character U+000A");
  EXPECT_EQ((*g)->Append({}, {Task("a", {}, "k\x1b")}).message(),
            "tasks[0]: kernel: contains the control character U+001B");
  EXPECT_EQ((*g)->Append({{"bad\x7f"}}, {}).message(),
            "submodels[1].name: contains the control character U+007F");
  EXPECT_EQ((*g)->Append({}, {Task("a\xc3")}).message(), "tasks[0]: id: is not valid UTF-8");
  EXPECT_EQ((*g)->size(), 0u);
}

TEST_F(OpenJobTest, AFailedRunFailsItsDependentsNotTheJob) {
  ASSERT_TRUE(Append({Task("a"), Task("b", {"a"}), Task("c", {"b"}), Task("d")}).ok());
  auto d = Schedule();
  ASSERT_EQ(d.size(), 2u);  // a and d
  ASSERT_TRUE(sched_->OnTaskFailed(job_, d[0].run, d[0].attempt, "boom", false, now_));
  auto ended = sched_->TakeEnded();
  ASSERT_EQ(ended.size(), 3u);
  EXPECT_EQ(ended[0].error, "boom");
  EXPECT_EQ(Job().runs[2].state, TaskState::kFailed);
  EXPECT_FALSE(IsTerminal(Job().state));
  // A task appended on a failed input ends at once.
  ASSERT_TRUE(Append({Task("e", {"c"})}).ok());
  ended = sched_->TakeEnded();
  ASSERT_EQ(ended.size(), 1u);
  EXPECT_EQ(ended[0].error, "input 'c' failed");
  Finish(d[1]);
  ASSERT_TRUE(sched_->CloseJob(job_, false, "", now_).ok());
  EXPECT_EQ(Job().state, JobState::kFailed);
  EXPECT_EQ(Job().error, "4 task(s) did not succeed; first task 'a': boom");
}

TEST_F(OpenJobTest, CancelRunStopsARunningOneAndItsDependents) {
  ASSERT_TRUE(Append({Task("a"), Task("b", {"a"})}).ok());
  auto d = Schedule();
  ASSERT_EQ(d.size(), 1u);
  ASSERT_TRUE(sched_->CancelRun(job_, 0, now_).ok());
  auto ended = sched_->TakeEnded();
  ASSERT_EQ(ended.size(), 2u);
  EXPECT_EQ(ended[0].device, d[0].device) << "a was running: its worker must stop it";
  EXPECT_EQ(ended[1].state, TaskState::kCancelled);
  EXPECT_EQ(ended[1].error, "input 'a' was cancelled");
  EXPECT_FALSE(sched_->OnTaskDone(job_, 0, d[0].attempt, now_, now_, now_)) << "late result";
  EXPECT_TRUE(sched_->CancelRun(job_, 0, now_).ok()) << "cancelling twice is a no-op";
}

TEST_F(OpenJobTest, OutputsAreHeldUntilReleasedAndRead) {
  ASSERT_TRUE(Append({Task("a")}).ok());
  auto d = Schedule();
  Finish(d[0], 100);
  EXPECT_TRUE(Job().runs[0].held);
  ASSERT_TRUE(Append({Task("b", {"a"})}).ok());
  sched_->ReleaseOutput(job_, 0);
  EXPECT_TRUE(sched_->TakeFreed().empty()) << "b still reads a";
  d = Schedule();
  ASSERT_EQ(d.size(), 1u);
  Finish(d[0], 0);
  auto freed = sched_->TakeFreed();
  ASSERT_EQ(freed.size(), 1u);
  EXPECT_EQ(freed[0].run, 0u);
  EXPECT_FALSE(Job().runs[0].held);
}

TEST_F(OpenJobTest, AbortCancelsWhatIsLeft) {
  ASSERT_TRUE(Append({Task("a"), Task("b", {"a"})}).ok());
  Schedule();
  ASSERT_TRUE(sched_->CloseJob(job_, true, "driver gone", now_).ok());
  EXPECT_EQ(Job().state, JobState::kCancelled);
  EXPECT_EQ(Job().error, "driver gone");
  EXPECT_FALSE(Append({Task("c")}).ok());
}

TEST_F(OpenJobTest, AnAbortWithNothingLeftStillCancels) {
  // Aborted before any task reached the controller: it read as succeeded.
  ASSERT_TRUE(sched_->CloseJob(job_, true, "the driver aborted", now_).ok());
  EXPECT_EQ(Job().state, JobState::kCancelled);
  EXPECT_EQ(Job().error, "the driver aborted");
}

TEST_F(OpenJobTest, AnAbortAfterEveryTaskEndedCancels) {
  ASSERT_TRUE(Append({Task("a")}).ok());
  auto d = Schedule();
  ASSERT_EQ(d.size(), 1u);
  Finish(d[0], 64);
  ASSERT_TRUE(sched_->CloseJob(job_, true, "the driver aborted", now_).ok());
  EXPECT_EQ(Job().state, JobState::kCancelled);
  EXPECT_FALSE(Job().runs[0].held) << "its outputs are freed with the session";
}

TEST_F(OpenJobTest, AnAbortAfterAFailedTaskFails) {
  ASSERT_TRUE(Append({Task("a")}).ok());
  auto d = Schedule();
  ASSERT_EQ(d.size(), 1u);
  Finish(d[0]);
  sched_->CountRejected(job_, 1, "task 'x': bad");
  ASSERT_TRUE(sched_->CloseJob(job_, true, "the driver aborted", now_).ok());
  EXPECT_EQ(Job().state, JobState::kFailed) << Job().error;
  EXPECT_NE(Job().error.find("task 'x': bad"), std::string::npos) << Job().error;
}

TEST_F(OpenJobTest, ALostDriverFailsTheJobWithOrWithoutTasksLeft) {
  // With nothing pending, a crashed driver's session read as succeeded.
  ASSERT_TRUE(Append({Task("a")}).ok());
  auto d = Schedule();
  ASSERT_EQ(d.size(), 1u);
  Finish(d[0], 64);
  ASSERT_TRUE(sched_->FailOpenJob(job_, "driver session lost", now_).ok());
  EXPECT_EQ(Job().state, JobState::kFailed);
  EXPECT_EQ(Job().error, "driver session lost");
  EXPECT_FALSE(Job().runs[0].held) << "its outputs are freed with the session";
  EXPECT_FALSE(Append({Task("b")}).ok());
}

TEST_F(OpenJobTest, AppendIsAmortisedOverManyTasks) {
  // 20,000 single-task appends in a chain: each costs its own size.
  std::string prev;
  for (int i = 0; i < 20000; ++i) {
    std::string id = "t" + std::to_string(i);
    ASSERT_TRUE(Append({Task(id, prev.empty() ? std::vector<std::string>{}
                                              : std::vector<std::string>{prev})})
                    .ok());
    prev = id;
  }
  EXPECT_EQ(Job().graph->size(), 20000u);
  EXPECT_EQ(Job().graph->Find("t19999"), 19999);
}

}  // namespace
}  // namespace hmpmd
