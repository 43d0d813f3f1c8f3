// RecoveryWindow: how long a restarted controller holds dispatch back.
#include <gtest/gtest.h>

#include "hmpmd/controller/recovery.h"

namespace hmpmd {
namespace {

TEST(RecoveryWindowTest, ClosedUntilOpened) {
  RecoveryWindow w;
  EXPECT_FALSE(w.open());
  EXPECT_FALSE(w.Waiting(0));
  EXPECT_FALSE(w.Close(0));
  EXPECT_EQ(w.how(), RecoveryWindow::End::kNone);
}

TEST(RecoveryWindowTest, EndsWhenEveryExpectedWorkerIsBack) {
  RecoveryWindow w;
  w.Open(std::vector<std::string>{"a", "b"}, /*deadline=*/1000);
  EXPECT_TRUE(w.Waiting(10));
  w.OnRegistered("a");
  w.OnRegistered("a");  // twice counts once
  w.OnRegistered("x");  // not expected: changes nothing
  EXPECT_TRUE(w.Waiting(20));
  EXPECT_FALSE(w.Close(20));
  w.OnRegistered("b");
  EXPECT_FALSE(w.Waiting(30));
  EXPECT_TRUE(w.Close(30));
  EXPECT_FALSE(w.open());
  EXPECT_EQ(w.how(), RecoveryWindow::End::kWorkersBack);
  EXPECT_TRUE(w.missing().empty());
  EXPECT_FALSE(w.Close(40)) << "closes once";
}

TEST(RecoveryWindowTest, TheDeadlineEndsItForWorkersThatDoNotComeBack) {
  RecoveryWindow w;
  w.Open(std::vector<std::string>{"a", "b", "c"}, /*deadline=*/1000);
  w.OnRegistered("b");
  EXPECT_TRUE(w.Waiting(999));
  EXPECT_FALSE(w.Waiting(1000));
  ASSERT_TRUE(w.Close(1000));
  EXPECT_EQ(w.how(), RecoveryWindow::End::kDeadline);
  EXPECT_EQ(w.missing(), (std::vector<std::string>{"a", "c"}));
  EXPECT_EQ(w.returned_count(), 1u);
  EXPECT_EQ(w.expected_count(), 3u);
}

TEST(RecoveryWindowTest, UnknownWorkersWaitForTheDeadline) {
  RecoveryWindow w;
  w.Open(std::nullopt, /*deadline=*/500);
  w.OnRegistered("a");
  EXPECT_TRUE(w.Waiting(499));
  ASSERT_TRUE(w.Close(500));
  EXPECT_EQ(w.how(), RecoveryWindow::End::kDeadline);
}

TEST(RecoveryWindowTest, NoWorkersExpectedEndsAtOnce) {
  RecoveryWindow w;
  w.Open(std::vector<std::string>{}, /*deadline=*/500);
  EXPECT_FALSE(w.Waiting(0));
  ASSERT_TRUE(w.Close(0));
  EXPECT_EQ(w.how(), RecoveryWindow::End::kWorkersBack);
}

TEST(WorkerKeyTest, NamesTheProcessNotTheConnection) {
  RegisterMsg a{.name = "host:1", .pid = 1, .data_endpoint = "tcp://127.0.0.1:9000"};
  RegisterMsg again = a;
  again.sent_us = 12345;
  again.held = {{1, 2, 0, CoreKind::kCube, 0}};
  EXPECT_EQ(WorkerKey(a), WorkerKey(again));
  RegisterMsg other = a;
  other.data_endpoint = "tcp://127.0.0.1:9001";
  EXPECT_NE(WorkerKey(a), WorkerKey(other));
}

}  // namespace
}  // namespace hmpmd
