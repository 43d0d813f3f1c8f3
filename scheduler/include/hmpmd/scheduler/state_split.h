// SplitByWork: how many holders each part of the floating stateful
// sub-models gets when state affinity splits the pool by work
// (state_affinity.h, rule 3): the caps that make the most loaded part's
// work over its throughput smallest, within the pool.
//
// A part's runs with distinct `shard` args are one op's data-parallel
// slices, which run side by side (a pipeline stage's 24 shards of a
// micro-batch's forward, each beside the other parts of its
// tensor-parallel group). With S such shards, c < S holders run an op in
// ceil(S / c) rounds, so they do the work of S / ceil(S / c) devices: 23
// holders for 24 shards are worth 12. A split proportional to work
// rounded a stage to 23 at 1,024 devices and made multimodal 1.9x as
// slow as the static pipeline; only counts that divide the shards into
// fewer rounds are worth their devices.
// Cost: O((parts + devices) log parts).
// Thread-safety: a pure function.
#pragma once

#include <cstdint>
#include <vector>

namespace hmpmd {

struct PartDemand {
  double work = 0;      // estimated compute of its runs, us
  uint32_t width = 1;   // the most of its runs that can run at once: no cap above
  uint32_t shards = 0;  // distinct `shard` args of its runs (0: none)
};

// The devices `c` holders of `part` are worth.
double PartThroughput(const PartDemand& part, uint32_t c);

// A cap per part, each at least 1, adding up to at most `devices` where
// that allows 1 each: from 1, the most loaded part (work over
// throughput) takes its next count worth more devices, while it fits.
std::vector<uint32_t> SplitByWork(const std::vector<PartDemand>& parts, uint32_t devices);

}  // namespace hmpmd
