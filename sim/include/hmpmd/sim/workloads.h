// Built-in workload generators for `hmpmd sim` and the benchmarks: job specs
// shaped like the three levels of MPMD (docs/architecture.md), sized for a pool.
//
// Every generator is deterministic for a seed. Tasks that a static SPMD
// deployment pins to one device carry an integer arg `shard`; pipeline
// compute carries `mb` and `pass` ("f", "b", "w") for the pipeline order. Compute is
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
// State (state_bytes, state_shards 8: one tensor-parallel group of 8 holds
// a replica): parameters times `bytes_per_param`, 16 for mixed-precision
// Adam (bf16 weights and gradients, fp32 master weights and two moments:
// 2 + 2 + 12 bytes, Rajbhandari et al., "ZeRO", SC'20, section 3.1). The
// backbone is an 8B-class decoder (Llama-3-8B: 8.0e9 parameters) split
// evenly over its stages; the vision encoder a ViT-H/14 (6.3e8, Dosovitskiy
// et al., ICLR'21); the audio encoder a Whisper-medium encoder (about
// 3.0e8 of its 7.7e8, Radford et al., 2022).
// Micro-batches differ, as real samples do: each one's vision work (images
// per sample), audio work (seconds of audio) and backbone work (tokens, so
// the stages' compute, all-reduces and sends) is the option's figure times
// a lognormal factor of mean about 1 (sigma `image_sigma`, `audio_sigma`,
// `token_sigma`; clamped to 0.25x..4x), drawn from `seed`. The static
// deployment is sized from the figures, so it is tuned on the average. The
// sigmas are chosen, not fitted: right-skewed, as image counts and audio
// lengths per sample are; the backbone's smaller, as packing sequences to
// a token budget evens micro-batches out.
// `steps` training steps, in sequence: the encoders are frozen (forward
// only), so their work of a step waits for nothing before it; each step
// ends, per backbone stage shard, with its weight gradients
// (`grad_bytes_per_param`) all-reduced over the stage's data-parallel
// replicas (the shards that hold the same part; a gang per part, none with
// one replica), then an optimizer step that reads and writes the part's
// state once at `hbm_bytes_per_us`, which the next step's forwards of that
// shard wait for. Tasks carry an int arg `step`; ids start with it
// (`vision1_6_c0`, `f1_0_6_c0`: step 1, stage 0, micro-batch 6).
struct MultimodalOptions {
  uint32_t devices = 384;
  uint32_t stages = 4;          // default 4
  uint32_t micro_batches = 16;  // default 16
  double fwd_us = 2000;         // a stage's forward shard at the default cube rate
  double vision_cost = 3;       // encoder work per micro-batch, in stage-forward units
  double audio_cost = 1;
  double allreduce_bytes = 16 << 20;  // per tensor-parallel all-reduce member
  double send_bytes = 8 << 20;        // activations between stages, per shard
  double backbone_params = 8.0e9;
  double vision_params = 6.3e8;
  double audio_params = 3.0e8;
  double bytes_per_param = 16;
  uint32_t steps = 4;               // training steps, sizes redrawn each
  double grad_bytes_per_param = 2;  // bf16 gradients
  double hbm_bytes_per_us = 3.0e6;  // device memory bandwidth, 3 TB/s
  double image_sigma = 0.6;
  double audio_sigma = 0.5;
  double token_sigma = 0.3;
  uint64_t seed = 1;
};
JobSpec MultimodalWorkload(const MultimodalOptions& o);

// `steps` training steps of a MoE block of `layers` layers over `chunks`
// token chunks (sim/moe_workload.cc): attention on every device, an
// all-to-all dispatch, experts with skewed top-k routing, an all-to-all
// combine; each step ends with an all-reduce over the data-parallel group
// (the optimizer's barrier; backward is not modelled) that the next step
// waits for. Expert work comes in tasks of equal size (a block of tokens),
// `devices`/`experts` devices per expert in a static deployment, which is
// tuned on the average: routing is uniform in expectation.
// Routing: per layer, expert popularity is Zipf with `skew` over a shuffled
// rank at step 0 (hot experts differ per layer); between steps each
// expert's log-popularity takes a normal step of sigma `drift`, so hot
// experts mostly stay hot and some change. A chunk's tokens (attention
// time and expert tasks) are its median times a lognormal factor of sigma
// `token_sigma` (heavy-tailed sequence lengths), clamped to 0.25x..4x.
// Expert tasks carry an int arg `step`. Everything is drawn from `seed`.
// State: each expert sub-model is one routed expert of every layer, sized
// as DeepSeek-V3's (a SwiGLU FFN of hidden 7168 and intermediate 2048: 3 x
// 7168 x 2048 = 4.4e7 parameters a layer; DeepSeek-AI, "DeepSeek-V3
// Technical Report", 2024, section 4.2); a device running one of its tasks
// holds a whole replica. The dense part (attention and the shared expert,
// about 2.3e8 parameters a layer there) is data parallel: every device
// holds a replica. Bytes per parameter as MultimodalOptions.
struct MoeOptions {
  uint32_t devices = 384;
  uint32_t experts = 48;  // divides devices
  uint32_t steps = 4;     // training steps, routing redrawn each
  uint32_t layers = 2;
  uint32_t chunks = 2;
  uint32_t top_k = 2;
  double skew = 0.8;                         // Zipf exponent of expert popularity
  double drift = 0.3;                        // sigma of log-popularity per step
  double token_sigma = 0.5;                  // sigma of a chunk's lognormal token factor
  double attn_us = 3000;                     // attention per device per median chunk
  double expert_us = 1200;                   // one expert task
  double alltoall_bytes = 8 << 20;           // per member
  double sync_bytes = 4096;                  // the step's closing all-reduce, per member
  double expert_params = 3.0 * 7168 * 2048;  // per layer
  double dense_params = 2.3e8;               // per layer
  double bytes_per_param = 16;
  uint64_t seed = 1;
};
JobSpec MoeWorkload(const MoeOptions& o);

// Asynchronous RL with bounded staleness over `iterations` learner updates.
// Per iteration t:
//  - rollouts: `rollouts_per_actor` independent generation tasks per actor
//    device, lengths lognormal (median `rollout_us`, sigma `length_sigma`,
//    clamped to 0.25x..4x); a rollout of iteration t >= staleness + 1 takes
//    the weight broadcast of update t - staleness - 1 as input (weights at
//    most `staleness` versions older than the learner's), earlier ones use
//    the initial weights; rollouts of later iterations run while the
//    learner trains (no barrier but that bound);
//  - a reward task per rollout, as soon as that rollout ends;
//  - the learner, data parallel over its shards: micro-batch j of shard l
//    takes a fixed slice of the iteration's rewards; its backward yields
//    `buckets` gradient buckets in order, each all-reduced over the shards
//    (a gang) while the next bucket (or micro-batch) computes, as DDP does;
//    then an optimizer step per shard;
//  - a broadcast of the new weights to every actor device (a gang), which
//    overlaps rollouts still generating with older weights.
// Sub-models actor, reward and learner keep state (`state_bytes`: the
// weights; the learner's times `learner_state_factor` for optimizer state).
// Static deployment (`devices` of each sub-model, see RlShapeFor): devices
// proportional to each one's compute per iteration with the defaults.
// Static program order (arg `order`): per actor device, a broadcast then its
// rollouts of the iteration; per learner shard, chunk, bucket all-reduce,
// ..., optimizer step. Rewards carry only `shard` (scored in arrival order).
struct RlOptions {
  uint32_t devices = 384;
  uint32_t iterations = 4;           // learner updates
  uint32_t staleness = 1;            // versions a rollout's weights may lag
  uint32_t rollouts_per_actor = 4;   // generation tasks per actor device per iteration
  double rollout_us = 4000;          // median rollout (mean about 1.2x)
  double length_sigma = 0.6;         // lognormal sigma of rollout lengths
  double reward_us = 1920;           // scoring one rollout
  uint32_t micro_batches = 4;        // learner micro-batches per iteration
  uint32_t buckets = 4;              // gradient buckets per micro-batch
  double learn_us = 4400;            // one micro-batch on one shard (forward + backward)
  double optimizer_us = 1600;        // optimizer step per shard
  double gradient_bytes = 16 << 20;  // per shard per micro-batch (all buckets)
  double weight_bytes = 32 << 20;    // the broadcast; actor and reward state
  double learner_state_factor = 4;   // learner state: weights x this (master, moments)
  uint64_t seed = 1;
};
// Devices per sub-model in the static deployment: actors 5/8 of `devices`,
// reward 1/4, learner the rest (each at least 1); rollouts per iteration.
struct RlShape {
  uint32_t actors = 0, rewards = 0, learners = 0, rollouts = 0;
};
RlShape RlShapeFor(const RlOptions& o);
JobSpec RlWorkload(const RlOptions& o);

// `stages` uniform pipeline stages, one device each, over `micro_batches`
// micro-batches: forward `fwd_us`, backward `bwd_us` (spin tasks). With
// `wgt_us` > 0 the backward is two tasks: B (pass "b", `bwd_us`, the input
// gradient the stage before waits for) and W (pass "w", `wgt_us`, the
// weight gradient), as zero-bubble schedules split it.
JobSpec PipelineWorkload(uint32_t stages, uint32_t micro_batches, double fwd_us, double bwd_us,
                         double wgt_us = 0);

// "multimodal", "moe", "rl", "pipeline".
std::vector<std::string> WorkloadNames();
// A built-in workload for `devices` devices with default options.
Result<JobSpec> MakeWorkload(std::string_view name, uint32_t devices, uint64_t seed = 1);

}  // namespace hmpmd
