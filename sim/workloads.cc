#include "hmpmd/sim/workloads.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>

#include "workload_tasks.h"

namespace hmpmd {

using workload::Comm;
using workload::Compute;
using workload::Id;
using workload::Ordered;
using workload::Submodel;

namespace {

std::string TpGroup(const std::string& op, uint32_t i) {
  return op + "_tp" + std::to_string(i / 8);
}

void StepArgs(TaskSpec& t, uint32_t step, uint32_t j, char pass) {
  t.args.push_back({"step", static_cast<int64_t>(step)});
  t.args.push_back({"mb", static_cast<int64_t>(j)});
  t.args.push_back({"pass", std::string(1, pass)});
}

// One multimodal job's shape (MultimodalWorkload) and the tasks of each
// phase of a training step, appended to `job`.
struct MultimodalSteps {
  const MultimodalOptions& o;
  JobSpec& job;
  uint32_t p = 0, m = 0;       // stages, micro-batches
  uint32_t wv = 0, wa = 0;     // vision and audio shards
  uint32_t ws = 0, parts = 0;  // shards and state parts of a stage
  double unit_us = 0;          // one unit of work, all shards together

  // Pipeline op names: Id(pass, {step, stage, micro-batch}).
  static std::string Op(char pass, uint32_t step, uint32_t st, uint32_t j) {
    return Id(std::string(1, pass), {step, st, j});
  }

  // Micro-batch j's encoder `name` (frozen, forward only: it waits for
  // nothing of the step before), its work times `f`.
  void Encoder(const std::string& name, uint32_t width, double cost, uint32_t step, uint32_t j,
               double f) {
    const std::string op = Id(name, {step, j});
    const uint32_t order = 2 * (step * m + j);
    for (uint32_t i = 0; i < width; ++i) {
      TaskSpec c = Compute(op + "_c" + std::to_string(i), name, cost * unit_us / width * f, i);
      c.args.push_back({"step", static_cast<int64_t>(step)});
      job.tasks.push_back(Ordered(std::move(c), order));
    }
    for (uint32_t i = 0; i < width; ++i) {
      TaskSpec ag = Comm(op + "_ag" + std::to_string(i), name, "allgather", o.send_bytes * f, i,
                         TpGroup(op, i));
      ag.inputs = {op + "_c" + std::to_string(i)};
      ag.args.push_back({"step", static_cast<int64_t>(step)});
      job.tasks.push_back(Ordered(std::move(ag), order + 1));
    }
  }

  // One pass (forward 'f' or backward 'b', with its W) of stage st on
  // micro-batch j: compute per shard, the tensor-parallel all-reduce, the
  // send on; its size times the micro-batch's token factor `f`.
  void StagePass(char c, uint32_t step, uint32_t st, uint32_t j, double f) {
    const std::string op = Op(c, step, st, j), sm = "llm" + std::to_string(st);
    const double us = unit_us / ws * f;
    for (uint32_t i = 0; i < ws; ++i) {
      TaskSpec t = Compute(op + "_c" + std::to_string(i), sm, us, i);
      StepArgs(t, step, j, c);
      if (c == 'f' && st == 0) {
        t.inputs = {Id("vision", {step, j}) + "_ag" + std::to_string(i % wv),
                    Id("audio", {step, j}) + "_ag" + std::to_string(i % wa)};
      } else if (c == 'f') {
        t.inputs = {Op('f', step, st - 1, j) + "_tx" + std::to_string(i)};
      } else {
        t.inputs = {Op('f', step, st, j) + "_ar" + std::to_string(i)};
        if (st + 1 < p) t.inputs.push_back(Op('b', step, st + 1, j) + "_tx" + std::to_string(i));
      }
      // A forward runs with the weights the last optimizer step made.
      if (c == 'f' && step > 0) {
        t.inputs.push_back(Id("o", {step - 1, st}) + "_c" + std::to_string(i));
      }
      if (c == 'b') {  // W reads what B reads
        TaskSpec w = Compute(Op('w', step, st, j) + "_c" + std::to_string(i), sm, us, i);
        StepArgs(w, step, j, 'w');
        w.inputs = t.inputs;
        job.tasks.push_back(std::move(t));
        job.tasks.push_back(std::move(w));
        continue;
      }
      job.tasks.push_back(std::move(t));
    }
    for (uint32_t i = 0; i < ws; ++i) {
      TaskSpec ar = Comm(op + "_ar" + std::to_string(i), sm, "allreduce", o.allreduce_bytes * f, i,
                         TpGroup(op, i));
      ar.inputs = {op + "_c" + std::to_string(i)};
      StepArgs(ar, step, j, c);
      job.tasks.push_back(std::move(ar));
    }
    const bool hands_on = c == 'f' ? st + 1 < p : st > 0;
    for (uint32_t i = 0; hands_on && i < ws; ++i) {
      TaskSpec tx = Comm(op + "_tx" + std::to_string(i), sm, "send", o.send_bytes * f, i);
      tx.inputs = {op + "_ar" + std::to_string(i)};
      StepArgs(tx, step, j, c);
      job.tasks.push_back(std::move(tx));
    }
  }

  // The step's end for stage st, per shard: its weight gradients
  // all-reduced over the stage's data-parallel replicas (a gang per part;
  // none with one replica), then the optimizer step the next step's
  // forwards wait for.
  void StepEnd(uint32_t step, uint32_t st) {
    const double part_params = o.backbone_params / p / parts;
    const double grad_bytes = part_params * o.grad_bytes_per_param;
    const double optimizer_us = 2 * part_params * o.bytes_per_param / o.hbm_bytes_per_us;
    const std::string sm = "llm" + std::to_string(st);
    for (uint32_t i = 0; i < ws; ++i) {
      std::vector<std::string> w_done;
      for (uint32_t j = 0; j < m; ++j)
        w_done.push_back(Op('w', step, st, j) + "_c" + std::to_string(i));
      TaskSpec opt = Compute(Id("o", {step, st}) + "_c" + std::to_string(i), sm, optimizer_us, i);
      opt.args.push_back({"step", static_cast<int64_t>(step)});
      if (ws > parts) {
        TaskSpec g = Comm(Id("g", {step, st}) + "_ar" + std::to_string(i), sm, "allreduce",
                          grad_bytes, i, Id("g", {step, st}) + "_dp" + std::to_string(i % parts));
        g.inputs = std::move(w_done);
        g.args.push_back({"step", static_cast<int64_t>(step)});
        opt.inputs = {g.id};
        job.tasks.push_back(std::move(g));
      } else {
        opt.inputs = std::move(w_done);
      }
      job.tasks.push_back(std::move(opt));
    }
  }
};

}  // namespace

JobSpec MultimodalWorkload(const MultimodalOptions& o) {
  JobSpec job;
  job.name = "multimodal";
  MultimodalSteps b{o, job};
  b.p = std::max(1u, o.stages);
  b.m = std::max(1u, o.micro_batches);
  // Shards in units of k: vision vision_cost*k, audio audio_cost*k, each stage
  // 3k (forward 1 unit + backward 2 units, one shard per device).
  const double units = o.vision_cost + o.audio_cost + 3.0 * b.p;
  const uint32_t k = std::max(1u, static_cast<uint32_t>(o.devices / units));
  b.wv = std::max(1u, static_cast<uint32_t>(std::lround(o.vision_cost * k)));
  b.wa = std::max(1u, static_cast<uint32_t>(std::lround(o.audio_cost * k)));
  b.ws = 3 * k;
  // Data-parallel replicas of a stage: shards i, i + parts, ... hold part i.
  b.parts = std::min(8u, b.ws);
  // A shard of any op does fwd_us of work per stage-forward unit / k... at
  // equal work per shard: a stage forward is 1 unit over 3k shards.
  b.unit_us = o.fwd_us * b.ws;
  // The static deployment a user would write: one device per shard.
  // A tensor-parallel group of 8 shards (TpGroup) holds a replica.
  auto stateful = [&](SubmodelSpec sm, double params, uint32_t width) {
    sm.state_bytes = params * o.bytes_per_param;
    sm.state_shards = std::min(8u, width);
    return sm;
  };
  job.submodels.push_back(
      stateful(Submodel("vision", SubmodelKind::kEncoder, b.wv), o.vision_params, b.wv));
  job.submodels.push_back(
      stateful(Submodel("audio", SubmodelKind::kEncoder, b.wa), o.audio_params, b.wa));
  for (uint32_t s = 0; s < b.p; ++s) {
    job.submodels.push_back(
        stateful(Submodel("llm" + std::to_string(s), SubmodelKind::kPipelineStage, b.ws),
                 o.backbone_params / b.p, b.ws));
  }
  std::mt19937_64 rng(o.seed);
  for (uint32_t step = 0; step < std::max(1u, o.steps); ++step) {
    // Per micro-batch: vision, audio and backbone size factors.
    std::vector<double> fv(b.m), fa(b.m), ft(b.m);
    for (uint32_t j = 0; j < b.m; ++j) {
      fv[j] = workload::MeanOneFactor(rng, o.image_sigma);
      fa[j] = workload::MeanOneFactor(rng, o.audio_sigma);
      ft[j] = workload::MeanOneFactor(rng, o.token_sigma);
    }
    for (uint32_t j = 0; j < b.m; ++j) {
      b.Encoder("vision", b.wv, o.vision_cost, step, j, fv[j]);
      b.Encoder("audio", b.wa, o.audio_cost, step, j, fa[j]);
    }
    // Forward then backward of every (stage, micro-batch); the pipeline
    // order is the policy's business. The backward is B (input gradient:
    // its all-reduce and send feed the stage before) and W (weight
    // gradient: only the step's gradient all-reduce waits for it), a unit
    // each.
    for (uint32_t j = 0; j < b.m; ++j) {
      for (uint32_t st = 0; st < b.p; ++st) b.StagePass('f', step, st, j, ft[j]);
    }
    for (uint32_t j = 0; j < b.m; ++j) {
      for (uint32_t st = b.p; st-- > 0;) b.StagePass('b', step, st, j, ft[j]);
    }
    for (uint32_t st = 0; st < b.p; ++st) b.StepEnd(step, st);
  }
  return job;
}

constexpr uint32_t kActorsPerReceiver = 8;

RlShape RlShapeFor(const RlOptions& o) {
  RlShape sh;
  const uint32_t d = std::max(1u, o.devices);
  sh.actors = std::max(1u, d * 5 / 8);
  sh.rewards = std::max(1u, d / 4);
  sh.learners = d > sh.actors + sh.rewards ? d - sh.actors - sh.rewards : 1;
  sh.rollouts = sh.actors * std::max(1u, o.rollouts_per_actor);
  return sh;
}

JobSpec RlWorkload(const RlOptions& o) {
  JobSpec job;
  job.name = "rl";
  const RlShape sh = RlShapeFor(o);
  const uint32_t per_actor = std::max(1u, o.rollouts_per_actor);
  const uint32_t mbs = std::max(1u, o.micro_batches), buckets = std::max(1u, o.buckets);
  const uint32_t groups = mbs * sh.learners;  // (micro-batch, learner shard) pairs
  std::mt19937_64 rng(o.seed);
  std::lognormal_distribution<double> len(0.0, o.length_sigma);
  // The static deployment a user would write, proportional to each
  // sub-model's compute per iteration (RlShapeFor).
  auto stateful = [&](std::string name, SubmodelKind kind, uint32_t devices, double bytes) {
    SubmodelSpec sm = Submodel(std::move(name), kind, devices);
    sm.state_bytes = bytes;
    job.submodels.push_back(std::move(sm));
  };
  stateful("actor", SubmodelKind::kActor, sh.actors, o.weight_bytes);
  stateful("reward", SubmodelKind::kReward, sh.rewards, o.weight_bytes);
  stateful("learner", SubmodelKind::kLearner, sh.learners,
           o.weight_bytes * std::max(1.0, o.learner_state_factor));
  // Forming micro-batches from scored rollouts: bookkeeping, no state.
  job.submodels.push_back(Submodel("data", SubmodelKind::kGeneric));
  const uint32_t actor_slots = per_actor + 1;            // a broadcast, then its rollouts
  const uint32_t learner_slots = mbs * 2 * buckets + 1;  // chunk, bucket, ..., optimizer
  auto suffix = [](uint32_t t, uint32_t i) { return std::to_string(t) + "_" + std::to_string(i); };
  for (uint32_t t = 0; t < o.iterations; ++t) {
    // Rollouts: independent generation tasks of lognormal length, each with
    // weights of version t - staleness at the oldest (broadcast t-s-1).
    const bool needs_weights = t >= o.staleness + 1;
    const uint32_t version = needs_weights ? t - o.staleness - 1 : 0;
    for (uint32_t k = 0; k < sh.rollouts; ++k) {
      const uint32_t a = k % sh.actors;
      double f = std::clamp(len(rng), 0.25, 4.0);
      TaskSpec r = Compute("roll" + suffix(t, k), "actor", o.rollout_us * f, a);
      if (needs_weights) r.inputs = {"bc" + suffix(version, a / kActorsPerReceiver)};
      job.tasks.push_back(Ordered(std::move(r), t * actor_slots + 1 + k / sh.actors));
      // Scored as soon as it ends, on any reward device (no program order).
      TaskSpec w = Compute("rw" + suffix(t, k), "reward", o.reward_us, k % sh.rewards);
      w.inputs = {"roll" + suffix(t, k)};
      job.tasks.push_back(std::move(w));
    }
    // Learner: micro-batch j forms when its rollouts (k = j*L .. j*L+L-1,
    // mod M*L) are scored and is split over the L shards, which start its
    // forward together, as a DDP step does; its backward yields `buckets`
    // gradient buckets in order, each all-reduced over the shards as soon
    // as it is ready (overlapping the next bucket's compute); then an
    // optimizer step per shard.
    const std::string it = std::to_string(t);
    for (uint32_t j = 0; j < mbs; ++j) {
      TaskSpec batch;
      batch.id = "mb" + suffix(t, j);
      batch.submodel = "data";
      batch.kernel = "noop";
      for (uint32_t k = 0; k < sh.rollouts; ++k) {
        if ((k % groups) / sh.learners == j) batch.inputs.push_back("rw" + suffix(t, k));
      }
      if (batch.inputs.empty()) batch.inputs.push_back("rw" + suffix(t, j % sh.rollouts));
      job.tasks.push_back(std::move(batch));
      for (uint32_t l = 0; l < sh.learners; ++l) {
        for (uint32_t b = 0; b < buckets; ++b) {
          std::string id = "ln" + it + "_" + suffix(j, l) + "_" + std::to_string(b);
          TaskSpec c = Compute(id, "learner", o.learn_us / buckets, l);
          if (b > 0) {
            c.inputs = {"ln" + it + "_" + suffix(j, l) + "_" + std::to_string(b - 1)};
          } else {
            c.inputs = {"mb" + suffix(t, j)};
            // Update t starts from the weights of update t - 1.
            if (t > 0) c.inputs.push_back("opt" + suffix(t - 1, l));
          }
          const uint32_t slot = t * learner_slots + j * 2 * buckets + 2 * b;
          job.tasks.push_back(Ordered(std::move(c), slot));
          TaskSpec ar =
              Comm("ar" + it + "_" + suffix(j, l) + "_" + std::to_string(b), "learner", "allreduce",
                   o.gradient_bytes / buckets, l, "ar" + it + "_" + suffix(j, b));
          ar.inputs = {id};
          job.tasks.push_back(Ordered(std::move(ar), slot + 1));
        }
      }
    }
    for (uint32_t l = 0; l < sh.learners; ++l) {
      TaskSpec opt = Compute("opt" + suffix(t, l), "learner", o.optimizer_us, l);
      for (uint32_t j = 0; j < mbs; ++j) {
        for (uint32_t b = 0; b < buckets; ++b) {
          opt.inputs.push_back("ar" + it + "_" + suffix(j, l) + "_" + std::to_string(b));
        }
      }
      job.tasks.push_back(Ordered(std::move(opt), t * learner_slots + mbs * 2 * buckets));
    }
    if (t + o.staleness + 1 >= o.iterations) continue;  // no rollout would use it
    // The new weights go to every actor device while its rollouts of later
    // iterations (older weights, within the bound) are still generating.
    // One receiver per group of kActorsPerReceiver actor devices (a node's
    // inference group), which hands the weights on inside its node.
    const uint32_t receivers = (sh.actors + kActorsPerReceiver - 1) / kActorsPerReceiver;
    for (uint32_t r = 0; r < receivers; ++r) {
      TaskSpec bc = Comm("bc" + suffix(t, r), "actor", "broadcast", o.weight_bytes,
                         r * kActorsPerReceiver, "bc" + it);
      bc.inputs = {"opt" + suffix(t, r % sh.learners)};
      // Received just before the rollouts that need these weights.
      job.tasks.push_back(Ordered(std::move(bc), (t + o.staleness + 1) * actor_slots));
    }
  }
  return job;
}

JobSpec PipelineWorkload(uint32_t stages, uint32_t micro_batches, double fwd_us, double bwd_us,
                         double wgt_us) {
  JobSpec job;
  job.name = "pipeline";
  for (uint32_t s = 0; s < stages; ++s) {
    job.submodels.push_back(Submodel("stage" + std::to_string(s), SubmodelKind::kPipelineStage, 1));
  }
  auto task = [&](char pass, uint32_t s, uint32_t j, double us) {
    TaskSpec t;
    t.id = Id(std::string(1, pass), {s, j});
    t.submodel = "stage" + std::to_string(s);
    t.kernel = "spin";
    t.args = {{"us", us},
              {"shard", int64_t{0}},
              {"mb", static_cast<int64_t>(j)},
              {"pass", std::string(1, pass)}};
    return t;
  };
  for (uint32_t j = 0; j < micro_batches; ++j) {
    for (uint32_t s = 0; s < stages; ++s) {
      TaskSpec f = task('f', s, j, fwd_us);
      if (s > 0) f.inputs = {Id("f", {s - 1, j})};
      job.tasks.push_back(std::move(f));
    }
    for (uint32_t si = 0; si < stages; ++si) {
      uint32_t s = stages - 1 - si;
      TaskSpec b = task('b', s, j, bwd_us);
      b.inputs = {Id("f", {s, j})};
      if (s + 1 < stages) b.inputs.push_back(Id("b", {s + 1, j}));
      if (wgt_us > 0) {
        TaskSpec w = task('w', s, j, wgt_us);
        w.inputs = b.inputs;  // the stage's activations and the gradient from the next
        job.tasks.push_back(std::move(b));
        job.tasks.push_back(std::move(w));
        continue;
      }
      job.tasks.push_back(std::move(b));
    }
  }
  return job;
}

std::vector<std::string> WorkloadNames() { return {"multimodal", "moe", "rl", "pipeline"}; }

Result<JobSpec> MakeWorkload(std::string_view name, uint32_t devices, uint64_t seed) {
  if (devices == 0) return Status::InvalidArgument("devices: must be at least 1");
  if (name == "multimodal") {
    MultimodalOptions o;
    o.devices = devices;
    o.seed = seed;
    return MultimodalWorkload(o);
  }
  if (name == "moe") {
    MoeOptions o;
    o.devices = devices;
    o.experts = std::clamp(devices / 8, 1u, 64u);
    o.seed = seed;
    return MoeWorkload(o);
  }
  if (name == "rl") {
    RlOptions o;
    o.devices = devices;
    o.seed = seed;
    return RlWorkload(o);
  }
  if (name == "pipeline") return PipelineWorkload(std::min(devices, 8u), 16, 1000, 1000, 1000);
  return Status::NotFound("workload: unknown workload '" + std::string(name) +
                          "' (built-in: multimodal, moe, rl, pipeline)");
}

}  // namespace hmpmd
