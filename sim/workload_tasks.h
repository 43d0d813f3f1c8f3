// Task and sub-model builders shared by the built-in workload generators
// (private to sim/). Compute is given in flops at the default cube rate
// (PoolSpec), so a pool with other figures changes the times.
#pragma once

#include <algorithm>
#include <cstdint>
#include <initializer_list>
#include <random>
#include <string>
#include <string_view>

#include "hmpmd/protocol/job_spec.h"

namespace hmpmd::workload {

inline constexpr double kCubeFlopsPerUs = 2.5e8;  // PoolSpec's default cube rate

// "prefix" then the parts joined by '_': Id("a", {1, 2}) is "a1_2".
inline std::string Id(std::string_view prefix, std::initializer_list<uint32_t> parts) {
  std::string s(prefix);
  bool first = true;
  for (uint32_t p : parts) {
    s += first ? "" : "_";
    s += std::to_string(p);
    first = false;
  }
  return s;
}

// A gemm of `us` at the default cube rate, pinned to `shard` by static
// policies.
inline TaskSpec Compute(std::string id, std::string submodel, double us, uint32_t shard) {
  TaskSpec t;
  t.id = std::move(id);
  t.submodel = std::move(submodel);
  t.kernel = "gemm";
  t.core = CoreKind::kCube;
  t.cost.flops = us * kCubeFlopsPerUs;
  t.args.push_back({"shard", static_cast<int64_t>(shard)});
  return t;
}

// A communication kernel of `bytes` on a vector core; a gang member of
// `group` when one is named.
inline TaskSpec Comm(std::string id, std::string submodel, std::string kernel, double bytes,
                     uint32_t shard, std::string group = {}) {
  TaskSpec t;
  t.id = std::move(id);
  t.submodel = std::move(submodel);
  t.kernel = kernel;
  t.core = CoreKind::kVector;
  t.cost.bytes = bytes;
  t.args.push_back({"shard", static_cast<int64_t>(shard)});
  if (!group.empty()) t.collective = CollectiveSpec{std::move(group), kernel, bytes};
  return t;
}

// A size factor of mean about 1 (lognormal, mu = -sigma^2 / 2), clamped to
// 0.25x..4x: a heavy tail without a micro-batch of nothing or of everything.
// Mean 1 keeps a static deployment sized from the options' figures tuned on
// the average.
inline double MeanOneFactor(std::mt19937_64& rng, double sigma) {
  if (sigma <= 0) return 1.0;
  std::lognormal_distribution<double> f(-sigma * sigma / 2, sigma);
  return std::clamp(f(rng), 0.25, 4.0);
}

// The op's place in its device's program order (for static policies).
inline TaskSpec Ordered(TaskSpec t, uint32_t order) {
  t.args.push_back({"order", static_cast<int64_t>(order)});
  return t;
}

inline SubmodelSpec Submodel(std::string name, SubmodelKind kind, uint32_t devices = 0) {
  SubmodelSpec s;
  s.name = std::move(name);
  s.kind = kind;
  s.devices = devices;
  return s;
}

}  // namespace hmpmd::workload
