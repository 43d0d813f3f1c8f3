// Built-in workload generators for `hmpmd sim` and the benchmarks: job specs
// shaped like the three levels of MPMD (DESIGN.md), sized for a pool.
//
// Every generator is deterministic for a seed. Tasks that a static SPMD
// deployment pins to one device carry an integer arg `shard`; pipeline
// compute carries `mb` and `pass` ("f"/"b") for the 1F1B order. Compute is
// given in flops at the default cube throughput (PoolSpec), communication
// in bytes, so a pool with other figures changes the times.
// Thread-safety: pure functions.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "hmpmd/protocol/job_spec.h"
#include "hmpmd/protocol/status.h"

namespace hmpmd {

// Vision and audio encoders of unequal cost feed an LLM backbone of
// `stages` pipeline stages over `micro_batches` micro-batches (forward and
// backward). Each op is split over tensor-parallel shards sized so that a
// static deployment proportional to work fills `devices`; shards of an op
// all-reduce in groups of 8 on vector cores, stages hand activations on
// with `send`.
struct MultimodalOptions {
  uint32_t devices = 384;
  uint32_t stages = 4;          // default 4
  uint32_t micro_batches = 16;  // default 16
  double fwd_us = 2000;         // a stage's forward shard at the default cube rate
  double vision_cost = 3;       // encoder work per micro-batch, in stage-forward units
  double audio_cost = 1;
  double allreduce_bytes = 16 << 20;  // per tensor-parallel all-reduce member
  double send_bytes = 8 << 20;        // activations between stages, per shard
};
JobSpec MultimodalWorkload(const MultimodalOptions& o);

// A MoE block of `layers` layers over `chunks` token chunks: attention on
// every device, an all-to-all dispatch, experts with skewed top-k routing
// (Zipf with `skew`, hot experts reshuffled per layer), an all-to-all
// combine. Expert work comes in tasks of equal size, `devices`/`experts`
// devices per expert in a static deployment.
struct MoeOptions {
  uint32_t devices = 384;
  uint32_t experts = 48;  // divides devices
  uint32_t layers = 2;
  uint32_t chunks = 8;
  uint32_t top_k = 2;
  double skew = 0.8;                // Zipf exponent of expert popularity
  double attn_us = 3000;            // attention per device per chunk
  double expert_us = 1200;          // one expert task
  double alltoall_bytes = 8 << 20;  // per member
  uint64_t seed = 1;
};
JobSpec MoeWorkload(const MoeOptions& o);

// Asynchronous RL over `iterations`: actors produce rollouts of variable
// length, a reward model scores them, learner shards update and all-reduce
// gradients, weights are broadcast to the actors; a rollout of iteration t
// uses weights of iteration t - 1 - staleness at the latest, and follows
// the same actor's rollout of iteration t - 1 (an actor steps its
// environments in order).
struct RlOptions {
  uint32_t devices = 384;
  uint32_t iterations = 4;
  uint32_t staleness = 1;
  double rollout_us = 4000;  // mean rollout (lengths from 0.25x to 4x)
  double reward_us = 800;
  double learn_us = 3000;
  double allreduce_bytes = 64 << 20;
  double broadcast_bytes = 32 << 20;
  uint64_t seed = 1;
};
JobSpec RlWorkload(const RlOptions& o);

// `stages` uniform pipeline stages, one device each, over `micro_batches`
// micro-batches: forward `fwd_us`, backward `bwd_us` (spin tasks).
JobSpec PipelineWorkload(uint32_t stages, uint32_t micro_batches, double fwd_us, double bwd_us);

// "multimodal", "moe", "rl", "pipeline".
std::vector<std::string> WorkloadNames();
// A built-in workload for `devices` devices with default options.
Result<JobSpec> MakeWorkload(std::string_view name, uint32_t devices, uint64_t seed = 1);

}  // namespace hmpmd
