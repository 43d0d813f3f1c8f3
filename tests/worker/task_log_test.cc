// Tests for TaskLog (worker/include/hmpmd/worker/task_log.h) and
// KernelArgs::Log: a task run's lines, bounded, one line each, with a
// marker for those dropped; lines after Take() are ignored.
#include "hmpmd/worker/task_log.h"

#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "hmpmd/worker/kernel_args.h"

namespace hmpmd::worker {
namespace {

TEST(TaskLogTest, KeepsLinesInOrderAsOneLineEach) {
  TaskLog log;
  log.Add("first");
  log.Add("second\nline");
  std::vector<std::string> lines = log.Take();
  ASSERT_EQ(lines.size(), 2u);
  EXPECT_EQ(lines[0], "first");
  EXPECT_EQ(lines[1].find('\n'), std::string::npos) << lines[1];
}

TEST(TaskLogTest, LinesBeyondTheBoundAreCountedInAMarker) {
  TaskLog log;
  for (size_t i = 0; i < TaskLog::kMaxLines + 5; ++i) log.Add("line " + std::to_string(i));
  std::vector<std::string> lines = log.Take();
  ASSERT_EQ(lines.size(), TaskLog::kMaxLines + 1);
  EXPECT_EQ(lines[TaskLog::kMaxLines - 1], "line " + std::to_string(TaskLog::kMaxLines - 1));
  EXPECT_EQ(lines.back(), "[5 more line(s) dropped: a task run keeps 200 lines, 16384 bytes]");
}

TEST(TaskLogTest, BytesAreBoundedAndALongLineIsCut) {
  TaskLog log;
  for (int i = 0; i < 40; ++i) log.Add(std::string(4000, 'x'));
  std::vector<std::string> lines = log.Take();
  size_t bytes = 0;
  for (size_t i = 0; i + 1 < lines.size(); ++i) {
    EXPECT_LE(lines[i].size(), TaskLog::kMaxLineBytes + 32) << "cut, with its note";
    bytes += lines[i].size();
  }
  EXPECT_LE(bytes, TaskLog::kMaxBytes);
  EXPECT_NE(lines.back().find("more line(s) dropped"), std::string::npos);
}

TEST(TaskLogTest, LinesAfterTakeAreIgnored) {
  TaskLog log;
  log.Add("kept");
  EXPECT_EQ(log.Take().size(), 1u);
  log.Add("late");
  EXPECT_TRUE(log.Take().empty());
}

TEST(TaskLogTest, KernelArgsLogWritesToItsTaskLogAndIsANoOpWithout) {
  Args raw;
  auto log = std::make_shared<TaskLog>();
  KernelArgs with(raw, nullptr, nullptr, nullptr, nullptr, log);
  with.Log("from a kernel");
  KernelArgs without(raw);
  without.Log("nowhere");
  EXPECT_EQ(log->Take(), std::vector<std::string>{"from a kernel"});
}

}  // namespace
}  // namespace hmpmd::worker
