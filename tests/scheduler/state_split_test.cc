// Tests for SplitByWork (scheduler/state_split.{h,cc}): the pool split over
// state parts by work, where a part's data-parallel shards make only some
// holder counts worth their devices.
#include "hmpmd/scheduler/state_split.h"

#include <gtest/gtest.h>

#include <numeric>
#include <vector>

namespace hmpmd {
namespace {

TEST(StateSplit, HoldersShortOfTheShardsAreWorthWhatTheirRoundsGive) {
  const PartDemand stage{1000, 1000, 24};
  EXPECT_EQ(PartThroughput(stage, 24), 24);
  EXPECT_EQ(PartThroughput(stage, 23), 12) << "two rounds, as 12 holders take";
  EXPECT_EQ(PartThroughput(stage, 12), 12);
  EXPECT_EQ(PartThroughput(stage, 9), 8) << "three rounds";
  EXPECT_EQ(PartThroughput(stage, 30), 30) << "past the shards, micro-batches overlap";
  const PartDemand free{1000, 1000, 0};
  EXPECT_EQ(PartThroughput(free, 23), 23);
}

// Proportional to work, 30 devices give the sharded part 23 (worth 12) and
// the other 7. The split gives the shards all 24 and the other part 6:
// the most loaded part's work per device worth is 70 / 6, not 230 / 12.
TEST(StateSplit, APartsShardsGetAWholeRoundWhereThePoolAllows) {
  const std::vector<uint32_t> caps = SplitByWork({{230, 1000, 24}, {70, 1000, 0}}, 30);
  EXPECT_EQ(caps, (std::vector<uint32_t>{24, 6}));
}

TEST(StateSplit, WithoutShardsTheSplitFollowsTheWork) {
  const std::vector<uint32_t> caps = SplitByWork({{600, 100, 0}, {200, 100, 0}}, 8);
  EXPECT_EQ(caps, (std::vector<uint32_t>{6, 2}));
}

TEST(StateSplit, NoPartGoesPastItsWidthNorBelowOne) {
  const std::vector<uint32_t> caps = SplitByWork({{600, 2, 0}, {0, 5, 0}, {100, 3, 0}}, 20);
  EXPECT_EQ(caps, (std::vector<uint32_t>{2, 1, 3}));
  // Fewer devices than parts: one holder each, as the pool allows later.
  EXPECT_EQ(SplitByWork({{1, 5, 0}, {1, 5, 0}, {1, 5, 0}}, 2), (std::vector<uint32_t>(3, 1)));
}

TEST(StateSplit, TheCapsNeverAddUpToMoreThanThePool) {
  for (uint32_t devices : {8u, 17u, 64u, 100u, 1024u}) {
    const std::vector<uint32_t> caps =
        SplitByWork({{900, 4096, 24}, {300, 4096, 8}, {250, 4096, 0}, {75, 4096, 24}}, devices);
    EXPECT_LE(std::accumulate(caps.begin(), caps.end(), 0u), devices) << devices;
  }
}

}  // namespace
}  // namespace hmpmd
