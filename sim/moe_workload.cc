// MoeWorkload (workloads.h): steps of a MoE block whose routing drifts from
// step to step.
#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>

#include "hmpmd/sim/workloads.h"
#include "workload_tasks.h"

namespace hmpmd {

using workload::Comm;
using workload::Compute;
using workload::Id;
using workload::Ordered;
using workload::Submodel;

JobSpec MoeWorkload(const MoeOptions& o) {
  JobSpec job;
  job.name = "moe";
  const uint32_t e_count = std::max(1u, o.experts);
  const uint32_t per = std::max(1u, o.devices / e_count);  // devices per expert
  const uint32_t d = per * e_count;
  const uint32_t steps = std::max(1u, o.steps), layers = std::max(1u, o.layers);
  const uint32_t chunks = std::max(1u, o.chunks);
  std::mt19937_64 rng(o.seed);
  job.submodels.push_back(Submodel("dense", SubmodelKind::kGeneric, d));
  job.submodels.back().state_bytes = o.dense_params * layers * o.bytes_per_param;
  for (uint32_t e = 0; e < e_count; ++e) {
    job.submodels.push_back(Submodel("expert" + std::to_string(e), SubmodelKind::kExpert, per));
    job.submodels.back().state_bytes = o.expert_params * layers * o.bytes_per_param;
  }
  // Popularity per layer as log-weights: Zipf over a shuffled rank at step
  // 0 (which experts are hot differs per layer), then a random walk per
  // step, so the hot experts mostly stay hot and some change.
  std::vector<std::vector<double>> log_weight(layers, std::vector<double>(e_count));
  for (uint32_t l = 0; l < layers; ++l) {
    std::vector<uint32_t> rank(e_count);
    std::iota(rank.begin(), rank.end(), 0);
    std::shuffle(rank.begin(), rank.end(), rng);
    for (uint32_t e = 0; e < e_count; ++e) log_weight[l][e] = -o.skew * std::log(rank[e] + 1.0);
  }
  std::normal_distribution<double> walk(0.0, std::max(0.0, o.drift));
  std::lognormal_distribution<double> tokens(0.0, std::max(0.0, o.token_sigma));
  // Top-k routing makes k * d expert tasks per chunk of median size (one
  // per device per routed copy when balanced).
  const double tasks_per_chunk = static_cast<double>(o.top_k) * d;
  auto member = [](const std::string& op, const std::string& sfx, uint32_t i) {
    return op + sfx + "_" + std::to_string(i);
  };
  for (uint32_t s = 0; s < steps; ++s) {
    for (uint32_t l = 0; s > 0 && l < layers; ++l) {
      for (double& w : log_weight[l]) w += walk(rng);
    }
    for (uint32_t l = 0; l < layers; ++l) {
      std::vector<double> share(e_count);
      const double top = *std::max_element(log_weight[l].begin(), log_weight[l].end());
      for (uint32_t e = 0; e < e_count; ++e) share[e] = std::exp(log_weight[l][e] - top);
      const double sum = std::accumulate(share.begin(), share.end(), 0.0);
      for (double& x : share) x /= sum;
      for (uint32_t c = 0; c < chunks; ++c) {
        // This chunk's tokens over the median chunk's: heavy-tailed.
        const double f = std::clamp(tokens(rng), 0.25, 4.0);
        const std::string sfx = Id("", {s, l, c});
        // Program order: attention, dispatch, experts, combine; a slot per
        // step for its closing all-reduce.
        const uint32_t base = 4 * ((s * layers + l) * chunks + c) + s;
        for (uint32_t i = 0; i < d; ++i) {
          TaskSpec a = Compute(member("a", sfx, i), "dense", o.attn_us * f, i);
          if (l > 0) {
            a.inputs = {member("cb", Id("", {s, l - 1, c}), i)};
          } else if (s > 0) {
            a.inputs = {member("sy", std::to_string(s - 1), i)};
          }
          job.tasks.push_back(Ordered(std::move(a), base));
        }
        for (uint32_t i = 0; i < d; ++i) {
          TaskSpec t =
              Comm(member("dp", sfx, i), "dense", "alltoall", o.alltoall_bytes, i, "dp" + sfx);
          t.inputs = {member("a", sfx, i)};
          job.tasks.push_back(Ordered(std::move(t), base + 1));
        }
        // Combine member i waits for the expert tasks of its slot.
        std::vector<std::vector<std::string>> into(d);
        for (uint32_t e = 0; e < e_count; ++e) {
          const auto n =
              std::max(1u, static_cast<uint32_t>(std::lround(share[e] * tasks_per_chunk * f)));
          for (uint32_t t = 0; t < n; ++t) {
            const uint32_t slot = e * per + t % per;
            std::string id = "x" + sfx + "_" + std::to_string(e) + "_" + std::to_string(t);
            TaskSpec x = Compute(id, "expert" + std::to_string(e), o.expert_us, t % per);
            x.args.push_back({"step", static_cast<int64_t>(s)});
            x.inputs = {member("dp", sfx, slot)};
            into[slot].push_back(id);
            job.tasks.push_back(Ordered(std::move(x), base + 2));
          }
        }
        for (uint32_t i = 0; i < d; ++i) {
          TaskSpec t =
              Comm(member("cb", sfx, i), "dense", "alltoall", o.alltoall_bytes, i, "cb" + sfx);
          t.inputs = into[i].empty() ? std::vector<std::string>{member("dp", sfx, i)} : into[i];
          job.tasks.push_back(Ordered(std::move(t), base + 3));
        }
      }
    }
    // The step ends with an all-reduce over the data-parallel group that
    // the next step's attention waits for (the optimizer's barrier).
    const std::string sy = "sy" + std::to_string(s);
    for (uint32_t i = 0; i < d; ++i) {
      TaskSpec t =
          Comm(member("sy", std::to_string(s), i), "dense", "allreduce", o.sync_bytes, i, sy);
      for (uint32_t c = 0; c < chunks; ++c) {
        t.inputs.push_back(member("cb", Id("", {s, layers - 1, c}), i));
      }
      job.tasks.push_back(Ordered(std::move(t), 4 * (s + 1) * layers * chunks + s));
    }
  }
  return job;
}

}  // namespace hmpmd
