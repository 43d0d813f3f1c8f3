// State shards (scheduler/state_shards.h): how much of a sub-model's state
// one device holds, and which part a task works on.
#include "hmpmd/scheduler/state_shards.h"

#include <gtest/gtest.h>

#include <vector>

namespace hmpmd {
namespace {

SubmodelSpec Stateful(double bytes, uint32_t shards) {
  SubmodelSpec sm;
  sm.name = "s";
  sm.kind = SubmodelKind::kPipelineStage;
  sm.state_bytes = bytes;
  sm.state_shards = shards;
  return sm;
}

TaskSpec WithShard(ArgValue shard) {
  TaskSpec t;
  t.id = "t";
  t.args.push_back({"shard", shard});
  return t;
}

TEST(StateShardsTest, OneDeviceHoldsItsShardsPartOfAReplica) {
  const std::vector<SubmodelSpec> submodels = {Stateful(8e9, 8), Stateful(3e9, 1), Stateful(0, 4)};
  EXPECT_EQ(StateBytesPerDevice(submodels), (std::vector<double>{1e9, 3e9, 0}));
}

TEST(StateShardsTest, ATaskWorksOnItsShardModuloTheParts) {
  const SubmodelSpec tp8 = Stateful(8e9, 8);
  EXPECT_EQ(StatePartOf(tp8, WithShard(int64_t{3})), 3u);
  EXPECT_EQ(StatePartOf(tp8, WithShard(int64_t{11})), 3u) << "replica 1's part 3";
  EXPECT_EQ(StatePartOf(tp8, WithShard(5.0)), 5u) << "a whole number written as a float";
  EXPECT_EQ(StatePartOf(tp8, TaskSpec{}), 0u) << "no shard: part 0";
  EXPECT_EQ(StatePartOf(tp8, WithShard(int64_t{-2})), 0u);
  EXPECT_EQ(StatePartOf(tp8, WithShard(std::string("x"))), 0u);
  EXPECT_EQ(StatePartOf(Stateful(8e9, 1), WithShard(int64_t{7})), 0u) << "one part";
}

}  // namespace
}  // namespace hmpmd
