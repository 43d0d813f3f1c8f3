// Tests for TaskLogs (controller/include/hmpmd/controller/task_logs.h):
// each ended attempt of a run with its lines and error, bounded per run,
// forgotten with its job.
#include "hmpmd/controller/task_logs.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace hmpmd {
namespace {

TEST(TaskLogsTest, KeepsEachAttemptWithItsLinesAndError) {
  TaskLogs logs;
  logs.Add(1, 0, 0, false, "ValueError: x", {"a"});
  logs.Add(1, 0, 1, true, "", {"b", "c"});
  const TaskLogs::Run* r = logs.Find(1, 0);
  ASSERT_NE(r, nullptr);
  ASSERT_EQ(r->attempts.size(), 2u);
  EXPECT_FALSE(r->attempts[0].ok);
  EXPECT_EQ(r->attempts[0].error, "ValueError: x");
  EXPECT_EQ(r->attempts[1].lines, (std::vector<std::string>{"b", "c"}));
  EXPECT_EQ(logs.Find(1, 1), nullptr);
}

TEST(TaskLogsTest, AnAttemptThatSucceededSilentlyIsNotKept) {
  TaskLogs logs;
  logs.Add(1, 0, 0, true, "", {});
  EXPECT_EQ(logs.Find(1, 0), nullptr);
  EXPECT_EQ(logs.bytes(), 0u);
}

TEST(TaskLogsTest, LinesPastThePerRunBoundAreCountedAndLinesMadeOneLine) {
  TaskLogs logs;
  std::vector<std::string> many(TaskLogs::kMaxLinesPerRun + 3, "x\ny");
  logs.Add(2, 5, 0, true, "", many);
  const TaskLogs::Run* r = logs.Find(2, 5);
  ASSERT_NE(r, nullptr);
  EXPECT_EQ(r->attempts[0].lines.size(), TaskLogs::kMaxLinesPerRun);
  EXPECT_EQ(r->dropped, 3u);
  EXPECT_EQ(r->attempts[0].lines[0], "x\\ny");
}

TEST(TaskLogsTest, ForgettingAJobDropsItsRunsOnly) {
  TaskLogs logs;
  logs.Add(1, 0, 0, false, "e", {});
  logs.Add(2, 0, 0, false, "e", {"l"});
  logs.Forget(1);
  EXPECT_EQ(logs.Find(1, 0), nullptr);
  EXPECT_NE(logs.Find(2, 0), nullptr);
  logs.Forget(2);
  EXPECT_EQ(logs.bytes(), 0u);
}

}  // namespace
}  // namespace hmpmd
