// Tests for ReadyQueue (scheduler/ready_queue.{h,cc}), driven directly as a
// Schedule() pass drives it: the order items come out in, wait classes
// (one item asked per blocked class and pass, the others still in priority
// order), sleeping items woken by key, items parked on a core, deferred
// items, lazy re-keying and the counts.
#include "hmpmd/scheduler/ready_queue.h"

#include <gtest/gtest.h>

#include <vector>

namespace hmpmd {
namespace {

using Item = ReadyQueue::Item;

class ReadyQueueTest : public ::testing::Test {
 protected:
  // Pushes an item of priority `priority` for run `run` on `kind`.
  void Add(double priority, uint32_t run, CoreKind kind = CoreKind::kCube) {
    q_.Push(kind, Item{priority, q_.NextSeq(), /*job=*/1, run, /*ready_at=*/0});
  }
  // One pass over `kind` that drops (places) every item it takes; the runs
  // in the order taken.
  std::vector<uint32_t> DrainPass(CoreKind kind = CoreKind::kCube) {
    std::vector<uint32_t> runs;
    q_.BeginPass(kind);
    while (q_.HasNext()) {
      runs.push_back(q_.Next().run);
      q_.Drop();
    }
    q_.EndPass();
    return runs;
  }

  ReadyQueue q_;
};

TEST_F(ReadyQueueTest, ItemsComeOutByPriorityThenInTheOrderTheyBecameReady) {
  Add(1, 0);
  Add(5, 1);
  Add(5, 2);
  Add(3, 3);
  EXPECT_EQ(DrainPass(), (std::vector<uint32_t>{1, 2, 3, 0}));
  EXPECT_EQ(q_.size(CoreKind::kCube), 0u);
}

TEST_F(ReadyQueueTest, EachCoreKindHasItsOwnHeapAndCount) {
  Add(1, 0, CoreKind::kCube);
  Add(9, 1, CoreKind::kVector);
  Add(2, 2, CoreKind::kVector);
  EXPECT_EQ(q_.size(CoreKind::kCube), 1u);
  EXPECT_EQ(q_.size(CoreKind::kVector), 2u);
  EXPECT_EQ(DrainPass(CoreKind::kVector), (std::vector<uint32_t>{1, 2}));
  EXPECT_EQ(q_.size(CoreKind::kCube), 1u);
  EXPECT_EQ(q_.size(CoreKind::kVector), 0u);
}

TEST_F(ReadyQueueTest, DeferredItemsComeBackWhenThePassEnds) {
  Add(2, 0);
  Add(1, 1);
  q_.BeginPass(CoreKind::kCube);
  ASSERT_TRUE(q_.HasNext());
  EXPECT_EQ(q_.Next().run, 0u);
  EXPECT_EQ(q_.Defer(), 1u);
  EXPECT_EQ(q_.Next().run, 1u);
  EXPECT_EQ(q_.Defer(), 2u);
  EXPECT_FALSE(q_.HasNext()) << "a deferred item is not asked twice in one pass";
  EXPECT_EQ(q_.size(CoreKind::kCube), 0u);
  q_.EndPass();
  EXPECT_EQ(q_.size(CoreKind::kCube), 2u);
  EXPECT_EQ(DrainPass(), (std::vector<uint32_t>{0, 1}));
}

TEST_F(ReadyQueueTest, ABlockedClassIsAskedOncePerPassAndRunsInPriorityOrder) {
  constexpr uint64_t kClass = 7;
  Add(9, 0);  // class 7
  Add(8, 1);  // no class
  Add(7, 2);  // class 7
  Add(6, 3);  // class 7
  // Pass 1: run 0 is told "retry later": its class is blocked, so runs 2
  // and 3 are set aside unasked; run 1 (no class) is placed.
  q_.BeginPass(CoreKind::kCube);
  std::vector<uint32_t> asked;
  while (q_.HasNext()) {
    const Item item = q_.Next();
    const uint64_t cls = item.run == 1 ? 0 : kClass;
    if (q_.WaitInClass(cls)) continue;
    asked.push_back(item.run);
    if (cls != 0) {
      EXPECT_EQ(q_.Block(), 1u);
    } else {
      q_.Drop();
    }
  }
  q_.EndPass();
  EXPECT_EQ(asked, (std::vector<uint32_t>{0, 1}));
  EXPECT_EQ(q_.size(CoreKind::kCube), 3u) << "set-aside items still count";
  // Pass 2: the class is blocked again at its lead, once.
  q_.BeginPass(CoreKind::kCube);
  asked.clear();
  while (q_.HasNext()) {
    const Item item = q_.Next();
    if (q_.WaitInClass(kClass)) continue;
    asked.push_back(item.run);
    q_.Block();
  }
  q_.EndPass();
  EXPECT_EQ(asked, (std::vector<uint32_t>{0}));
  // Pass 3: the class can be placed: each lead placed brings the next.
  EXPECT_EQ(DrainPass(), (std::vector<uint32_t>{0, 2, 3}));
  EXPECT_EQ(q_.size(CoreKind::kCube), 0u);
}

TEST_F(ReadyQueueTest, SleepingItemsComeBackOnlyWhenTheirKeyWakes) {
  Add(5, 0);
  Add(4, 1);
  q_.BeginPass(CoreKind::kCube);
  q_.Next();
  ASSERT_FALSE(q_.WaitInClass(0));
  q_.Sleep(/*key=*/42);
  q_.Next();
  q_.Drop();
  q_.EndPass();
  EXPECT_TRUE(q_.AnySleeping());
  EXPECT_EQ(q_.size(CoreKind::kCube), 1u) << "a sleeping item still counts";
  EXPECT_EQ(DrainPass(), std::vector<uint32_t>{}) << "asleep: not in the heap";
  const uint64_t other[] = {41};
  q_.Wake(other);
  EXPECT_EQ(DrainPass(), std::vector<uint32_t>{});
  const uint64_t key[] = {42};
  q_.Wake(key);
  EXPECT_FALSE(q_.AnySleeping());
  EXPECT_EQ(DrainPass(), (std::vector<uint32_t>{0}));
}

TEST_F(ReadyQueueTest, ParkedItemsReturnWhenTheirCoreReleasesAndNotBefore) {
  q_.Park(/*core=*/3, Item{5, q_.NextSeq(), 1, /*run=*/0, 0});
  q_.Park(/*core=*/4, Item{6, q_.NextSeq(), 1, /*run=*/1, 0});
  EXPECT_TRUE(q_.AnyParked());
  EXPECT_EQ(q_.size(CoreKind::kCube), 0u) << "parked items do not count";
  q_.Unpark(/*core=*/5, CoreKind::kCube);  // nothing parked there
  EXPECT_EQ(DrainPass(), std::vector<uint32_t>{});
  q_.Unpark(/*core=*/3, CoreKind::kCube);
  EXPECT_EQ(DrainPass(), (std::vector<uint32_t>{0}));
  q_.DropParked(4);
  EXPECT_FALSE(q_.AnyParked());
  q_.Unpark(/*core=*/4, CoreKind::kCube);
  EXPECT_EQ(DrainPass(), std::vector<uint32_t>{});
}

TEST_F(ReadyQueueTest, AnItemIsReKeyedOnlyWhenItsPriorityFallsBelowTheNextInLine) {
  Add(10, 0);
  Add(8, 1);
  q_.BeginPass(CoreKind::kCube);
  EXPECT_EQ(q_.Next().run, 0u);
  EXPECT_FALSE(q_.Rekey(9)) << "still ahead of the next in line";
  EXPECT_FALSE(q_.Rekey(11)) << "a rise is not re-keyed";
  EXPECT_TRUE(q_.Rekey(7));
  EXPECT_EQ(q_.Next().run, 1u);
  q_.Drop();
  const Item rekeyed = q_.Next();
  EXPECT_EQ(rekeyed.run, 0u);
  EXPECT_EQ(rekeyed.priority, 7);
  q_.Drop();
  EXPECT_FALSE(q_.HasNext());
  q_.EndPass();
}

TEST_F(ReadyQueueTest, AReKeyedLeadStillLeadsItsClass) {
  constexpr uint64_t kClass = 3;
  Add(10, 0);
  Add(9, 1);
  Add(1, 2);  // no class
  // Block the class at run 0; run 1 waits in it.
  q_.BeginPass(CoreKind::kCube);
  q_.Next();
  ASSERT_FALSE(q_.WaitInClass(kClass));
  q_.Block();
  q_.Next();
  ASSERT_TRUE(q_.WaitInClass(kClass));
  q_.Next();
  q_.Defer();
  q_.EndPass();
  // Next pass: the lead (run 0) falls below run 2 and goes back; when it
  // is placed at last, run 1 follows it as the class's next lead.
  q_.BeginPass(CoreKind::kCube);
  EXPECT_EQ(q_.Next().run, 0u);
  EXPECT_TRUE(q_.Rekey(0.5));
  EXPECT_EQ(q_.Next().run, 2u);
  q_.Drop();
  EXPECT_EQ(q_.Next().run, 0u);
  ASSERT_FALSE(q_.WaitInClass(kClass));
  q_.Drop();
  ASSERT_TRUE(q_.HasNext());
  EXPECT_EQ(q_.Next().run, 1u);
  q_.Drop();
  EXPECT_FALSE(q_.HasNext());
  q_.EndPass();
}

}  // namespace
}  // namespace hmpmd
