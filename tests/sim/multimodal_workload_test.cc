// Tests for the multimodal generator (sim/workloads.cc): micro-batches of
// heavy-tailed sizes drawn from the seed, and training steps joined by the
// optimizer.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <string>
#include <vector>

#include "hmpmd/sim/workloads.h"

namespace hmpmd {
namespace {

std::map<std::string, const TaskSpec*> ById(const JobSpec& spec) {
  std::map<std::string, const TaskSpec*> out;
  for (const TaskSpec& t : spec.tasks) out[t.id] = &t;
  return out;
}

MultimodalOptions Small(uint64_t seed) {
  MultimodalOptions o;
  o.devices = 32;
  o.micro_batches = 512;
  o.steps = 1;
  o.seed = seed;
  return o;
}

// Each micro-batch's factor: its task's flops (or bytes) over the same
// task's with every sigma 0.
std::vector<double> Factors(const JobSpec& spec, const JobSpec& even, const std::string& prefix,
                            const std::string& suffix, uint32_t m, bool bytes = false) {
  const auto a = ById(spec), b = ById(even);
  std::vector<double> out;
  for (uint32_t j = 0; j < m; ++j) {
    const std::string id = prefix + std::to_string(j) + suffix;
    const TaskSpec& x = *a.at(id);
    const TaskSpec& y = *b.at(id);
    out.push_back(bytes ? x.cost.bytes / y.cost.bytes : x.cost.flops / y.cost.flops);
  }
  return out;
}

TEST(MultimodalWorkload, MicroBatchesDifferWithAMeanOfAboutOneAndFollowTheSeed) {
  MultimodalOptions even = Small(1);
  even.image_sigma = even.audio_sigma = even.token_sigma = 0;
  const JobSpec flat = MultimodalWorkload(even);
  const JobSpec one = MultimodalWorkload(Small(1));
  const uint32_t m = 512;
  for (const auto& [prefix, suffix, sigma] :
       {std::tuple{"vision0_", "_c0", 0.6}, {"audio0_", "_c0", 0.5}, {"f0_0_", "_c0", 0.3}}) {
    const std::vector<double> f = Factors(one, flat, prefix, suffix, m);
    double mean = 0;
    for (double x : f) mean += x / m;
    EXPECT_NEAR(mean, 1.0, 0.08) << prefix << ": the static split is tuned on the average";
    const auto [lo, hi] = std::minmax_element(f.begin(), f.end());
    EXPECT_GE(*lo, 0.25) << prefix;
    EXPECT_LE(*hi, 4.0) << prefix;
    EXPECT_GT(*hi / *lo, 1 + 4 * sigma) << prefix << ": a heavy tail";
  }
  // A micro-batch's tokens size its stages' compute, all-reduces and sends
  // alike.
  const std::vector<double> tokens = Factors(one, flat, "f0_0_", "_c0", m);
  const std::vector<double> backward = Factors(one, flat, "b0_1_", "_c0", m);
  const std::vector<double> reduced = Factors(one, flat, "f0_0_", "_ar0", m, /*bytes=*/true);
  for (uint32_t j = 0; j < m; ++j) {
    EXPECT_NEAR(backward[j], tokens[j], 1e-9) << j;
    EXPECT_NEAR(reduced[j], tokens[j], 1e-9) << j;
  }
  // The same seed gives the same job; another seed other sizes.
  const JobSpec again = MultimodalWorkload(Small(1));
  const JobSpec other = MultimodalWorkload(Small(2));
  EXPECT_EQ(Factors(again, flat, "vision0_", "_c0", m), Factors(one, flat, "vision0_", "_c0", m));
  EXPECT_NE(Factors(other, flat, "vision0_", "_c0", m), Factors(one, flat, "vision0_", "_c0", m));
}

TEST(MultimodalWorkload, AStepsForwardsWaitForTheOptimizerStepBefore) {
  MultimodalOptions o;
  o.devices = 384;  // 72 shards a stage: 9 data-parallel replicas of 8 parts
  o.micro_batches = 3;
  o.steps = 2;
  const JobSpec spec = MultimodalWorkload(o);
  const auto by_id = ById(spec);
  // Step 1's forward of stage 2, shard 5, runs with step 0's update.
  const TaskSpec& f = *by_id.at("f1_2_0_c5");
  EXPECT_NE(std::find(f.inputs.begin(), f.inputs.end(), "o0_2_c5"), f.inputs.end());
  EXPECT_EQ(by_id.count("o1_2_c5"), 1u) << "the last step ends with an update too";
  // The update follows the gradient all-reduce over the part's replicas,
  // which waits for every micro-batch's weight gradient of the shard.
  EXPECT_EQ(by_id.at("o0_2_c5")->inputs, std::vector<std::string>{"g0_2_ar5"});
  const TaskSpec& g = *by_id.at("g0_2_ar5");
  EXPECT_EQ(g.inputs, (std::vector<std::string>{"w0_2_0_c5", "w0_2_1_c5", "w0_2_2_c5"}));
  ASSERT_TRUE(g.collective.has_value());
  size_t members = 0;
  for (const TaskSpec& t : spec.tasks) {
    members += t.collective.has_value() && t.collective->group == g.collective->group;
  }
  EXPECT_EQ(members, 9u) << "shards 5, 13, ..., 69 hold part 5";
  // Encoders are frozen: no step waits for another's encoder.
  EXPECT_TRUE(by_id.at("vision1_0_c0")->inputs.empty());
}

TEST(MultimodalWorkload, OneReplicaHasNoGradientAllReduce) {
  MultimodalOptions o;
  o.devices = 16;  // 3 shards a stage: one replica of 3 parts
  o.micro_batches = 2;
  o.steps = 2;
  const JobSpec spec = MultimodalWorkload(o);
  const auto by_id = ById(spec);
  EXPECT_EQ(by_id.count("g0_0_ar0"), 0u);
  EXPECT_EQ(by_id.at("o0_0_c0")->inputs, (std::vector<std::string>{"w0_0_0_c0", "w0_0_1_c0"}));
}

}  // namespace
}  // namespace hmpmd
