// DeviceStates (sim/device_states.h): state parts resident on a simulated
// device, and the memory rule: parts plus held outputs never exceed it.
#include "hmpmd/sim/device_states.h"

#include <gtest/gtest.h>

#include <vector>

namespace hmpmd {
namespace {

constexpr uint64_t kCap = 100;
const StatePart kA{1, 0, 0}, kB{1, 1, 0}, kC{1, 2, 0}, kA1{1, 0, 1};

TEST(DeviceStatesTest, ALoadedPartStaysAndTouchingItMakesItTheMostRecent) {
  DeviceStates s;
  EXPECT_FALSE(s.Touch(0, kA));
  ASSERT_EQ(*s.Load(0, kA, 30, kCap, 0), 0u);
  ASSERT_EQ(*s.Load(0, kB, 30, kCap, 0), 0u);
  EXPECT_TRUE(s.Touch(0, kA));
  EXPECT_FALSE(s.Touch(0, kA1)) << "another shard's part is another part";
  EXPECT_FALSE(s.Touch(1, kA)) << "another device";
  EXPECT_EQ(s.Parts(0), (std::vector<StatePart>{kB, kA}));
  EXPECT_EQ(s.Bytes(0), 60);
}

TEST(DeviceStatesTest, ALoadEvictsTheLeastRecentlyUsedToFitBesideHeldOutputs) {
  DeviceStates s;
  ASSERT_TRUE(s.Load(0, kA, 40, kCap, 0).ok());
  ASSERT_TRUE(s.Load(0, kB, 40, kCap, 0).ok());
  ASSERT_TRUE(s.Touch(0, kA));
  // 40 + 40 + 30 of outputs leave no room for 30 more: B, the older, goes.
  Result<uint32_t> c = s.Load(0, kC, 30, kCap, 30);
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(*c, 1u);
  EXPECT_EQ(s.Parts(0), (std::vector<StatePart>{kA, kC}));
  EXPECT_LE(s.Bytes(0) + 30, kCap);
}

TEST(DeviceStatesTest, APartThatCannotFitIsRefusedAndEvictsNothing) {
  DeviceStates s;
  ASSERT_TRUE(s.Load(0, kA, 40, kCap, 0).ok());
  Result<uint32_t> big = s.Load(0, kB, 80, kCap, 30);
  ASSERT_FALSE(big.ok());
  EXPECT_EQ(big.status().message(),
            "80 bytes of state do not fit: 30 bytes of outputs held, 100 of memory (memory_mb)");
  EXPECT_EQ(s.Parts(0), (std::vector<StatePart>{kA})) << "nothing evicted in vain";
  EXPECT_TRUE(s.Load(0, kB, 80, UINT64_MAX, 30).ok()) << "no cap: anything fits";
}

TEST(DeviceStatesTest, OutputsMakeRoomByEvictingPartsButNeverTheOneKept) {
  DeviceStates s;
  ASSERT_TRUE(s.Load(0, kA, 40, kCap, 0).ok());
  ASSERT_TRUE(s.Load(0, kB, 40, kCap, 0).ok());
  EXPECT_TRUE(s.MakeRoom(0, 20, kCap, 0, kA)) << "fits beside both";
  EXPECT_EQ(s.Parts(0).size(), 2u);
  EXPECT_TRUE(s.MakeRoom(0, 50, kCap, 0, kA));
  EXPECT_EQ(s.Parts(0), (std::vector<StatePart>{kA})) << "A is kept though least recent";
  EXPECT_FALSE(s.MakeRoom(0, 70, kCap, 0, kA)) << "only evicting A would make room";
  EXPECT_EQ(s.Parts(0), (std::vector<StatePart>{kA}));
}

// Rule 4: a prefetch takes free room or parts a task used and no run
// uses now; it never evicts a part prefetched for a task that has not run
// yet, nor one in use, and when that is not enough it starts nothing.
TEST(DeviceStatesTest, APrefetchNeverEvictsWhatIsInUseOrNotYetUsedAndNeverOverCommits) {
  DeviceStates s;
  ASSERT_EQ(s.Prefetch(0, kA, 40, kCap, 0, {}), 0u);
  EXPECT_TRUE(s.Holds(0, kA));
  EXPECT_FALSE(s.Prefetch(0, kB, 70, kCap, 0, {})) << "only evicting A, not yet used, makes room";
  EXPECT_EQ(s.Parts(0), (std::vector<StatePart>{kA}));
  ASSERT_TRUE(s.Touch(0, kA));  // a task runs with A
  EXPECT_FALSE(s.Prefetch(0, kB, 70, kCap, 0, {kA})) << "A is in use";
  EXPECT_EQ(s.Prefetch(0, kB, 70, kCap, 0, {}), 1u) << "A was used and is idle now";
  EXPECT_EQ(s.Parts(0), (std::vector<StatePart>{kB}));
  EXPECT_LE(s.Bytes(0), kCap);
  EXPECT_FALSE(s.Prefetch(0, kC, 40, kCap, 0, {})) << "B is not used yet";
  EXPECT_EQ(s.Bytes(0), 70);
}

}  // namespace
}  // namespace hmpmd
