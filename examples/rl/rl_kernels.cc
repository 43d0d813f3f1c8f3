#include "rl_kernels.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <memory>
#include <mutex>
#include <random>
#include <span>
#include <string>
#include <thread>
#include <vector>

#include "hmpmd/worker/actor_state.h"
#include "rl_format.h"

namespace rl {
namespace {

using hmpmd::Buffer;
using hmpmd::worker::ActorState;
using hmpmd::worker::KernelArgs;
using Clock = std::chrono::steady_clock;

int64_t PositiveArg(const KernelArgs& args, const char* kernel, const char* name, int64_t fallback,
                    int64_t max) {
  const int64_t v = args.Int(name, fallback);
  if (v < 0 || v > max) {
    throw std::invalid_argument(std::string(kernel) + ": '" + name + "' must be in [0, " +
                                std::to_string(max) + "], got " + std::to_string(v));
  }
  return v;
}

// Busy for `us` microseconds: a spin (the device computing) or a sleep (the
// device computing without the host CPU); stops early, throwing, when the
// task is cancelled.
void Busy(const KernelArgs& args, int64_t us, bool spin, const char* kernel) {
  const Clock::time_point end = Clock::now() + std::chrono::microseconds(us);
  while (Clock::now() < end) {
    if (args.cancelled()) throw std::runtime_error(std::string(kernel) + ": cancelled");
    if (!spin) {
      // Slices of 5 ms: few wake-ups, and a cancel is seen within one.
      std::this_thread::sleep_for(
          std::min<Clock::duration>(end - Clock::now(), std::chrono::milliseconds(5)));
    }
  }
}

int64_t VersionOf(const Buffer& b, const std::string& what) {
  std::vector<int64_t> v = ReadI64(b, what);
  if (v.size() != 1) throw std::invalid_argument(what + ": expected one version");
  return v[0];
}

std::vector<Buffer> Init(const KernelArgs& args, std::span<const Buffer>) {
  const int64_t params = PositiveArg(args, "rl.init", "params", 4096, int64_t{1} << 24);
  std::mt19937_64 rng(static_cast<uint64_t>(args.Int("seed", 1)));
  std::normal_distribution<float> normal(0.0f, 0.1f);
  std::vector<float> w(static_cast<size_t>(params));
  for (float& x : w) x = normal(rng);
  return {F32(w), I64({0}), I64({0, 0, 0})};
}

// Stores weights and version in the actor's state unless it holds this
// version or a newer one already; returns true when it stored them. Loads
// on this worker are serialised and put the weights before the version, so
// a reader that reads the version first, then the weights, gets weights of
// that version or newer: the tag it reports never overstates freshness.
bool Load(ActorState& state, const Buffer& weights, const Buffer& version) {
  static std::mutex mu;
  const int64_t v = VersionOf(version, "weights version");
  ReadF32(weights, "weights");  // checks the dtype
  std::lock_guard<std::mutex> lock(mu);
  std::shared_ptr<const Buffer> held = state.Get("version");
  if (held != nullptr && VersionOf(*held, "held version") >= v) return false;
  state.Put("weights", weights);
  state.Put("version", version);
  return true;
}

std::vector<Buffer> LoadWeights(const KernelArgs& args, std::span<const Buffer> inputs) {
  if (inputs.size() < 2) throw std::invalid_argument("rl.load_weights: needs weights and version");
  Busy(args, PositiveArg(args, "rl.load_weights", "load_us", 500, 10'000'000),
       args.Bool("spin", true), "rl.load_weights");
  Load(args.state(), inputs[0], inputs[1]);
  return {};
}

std::vector<Buffer> Rollout(const KernelArgs& args, std::span<const Buffer> inputs) {
  const char* k = "rl.rollout";
  const int64_t id = args.Int("id", -1);
  if (id < 0) throw std::invalid_argument("rl.rollout: 'id' must be given and >= 0");
  const int64_t median = PositiveArg(args, k, "median_us", 4000, 60'000'000);
  const int64_t cap = PositiveArg(args, k, "max_us", 10 * median, 600'000'000);
  const double sigma = args.Number("sigma", 0.8);
  if (!(sigma >= 0 && sigma <= 4)) throw std::invalid_argument("rl.rollout: 'sigma' not in [0, 4]");
  const bool spin = args.Bool("spin", true);
  const Clock::time_point start = Clock::now();

  ActorState& state = args.state();
  if (inputs.size() >= 2 && inputs[0].dtype == "f32") {
    std::shared_ptr<const Buffer> held = state.Get("version");
    const int64_t offered = VersionOf(inputs[1], "rl.rollout: inputs[1]");
    if (held == nullptr || VersionOf(*held, "held version") < offered) {
      Busy(args, PositiveArg(args, k, "load_us", 500, 10'000'000), spin, k);
      Load(state, inputs[0], inputs[1]);
    }
  }
  std::shared_ptr<const Buffer> version = state.Get("version");
  std::shared_ptr<const Buffer> weights = state.Get("weights");
  if (version == nullptr || weights == nullptr) {
    throw std::runtime_error(
        "rl.rollout: this actor holds no weights on this device; run rl.load_weights on it "
        "first or pass the weights and version as inputs");
  }
  const int64_t used = VersionOf(*version, "held version");

  // The duration: lognormal, seeded by (seed, id), so a run is repeatable.
  std::mt19937_64 rng(static_cast<uint64_t>(args.Int("seed", 1)) * 0x9E3779B97F4A7C15ull ^
                      static_cast<uint64_t>(id));
  std::normal_distribution<double> normal(0.0, 1.0);
  const int64_t us = std::min<int64_t>(
      cap, static_cast<int64_t>(static_cast<double>(median) * std::exp(sigma * normal(rng))));
  Busy(args, us, spin, k);

  const std::vector<float> w = ReadF32(*weights, "held weights");
  const int64_t tokens = std::max<int64_t>(1, us / 50);
  std::vector<float> traj(static_cast<size_t>(tokens));
  for (size_t j = 0; j < traj.size(); ++j) {
    traj[j] = w.empty() ? 0.0f : w[j % w.size()] * static_cast<float>(j % 7 + 1);
  }
  const int64_t busy =
      std::chrono::duration_cast<std::chrono::microseconds>(Clock::now() - start).count();
  return {I64({id, used, busy, tokens}), F32(traj)};
}

std::vector<Buffer> Reward(const KernelArgs& args, std::span<const Buffer> inputs) {
  if (inputs.size() != 2) throw std::invalid_argument("rl.reward: needs one rollout (2 buffers)");
  std::vector<int64_t> meta = ReadI64(inputs[0], "rl.reward: inputs[0]");
  if (meta.size() != kRolloutFields) throw std::invalid_argument("rl.reward: bad rollout fields");
  const std::vector<float> traj = ReadF32(inputs[1], "rl.reward: inputs[1]");
  Busy(args, PositiveArg(args, "rl.reward", "reward_us", 200, 10'000'000), args.Bool("spin", true),
       "rl.reward");
  double sum = 0;
  for (float x : traj) sum += x;
  const float score = traj.empty() ? 0.0f : static_cast<float>(sum / traj.size());
  return {I64(meta), F32({score})};
}

std::vector<Buffer> Train(const KernelArgs& args, std::span<const Buffer> inputs) {
  const char* k = "rl.train";
  // Inputs: the outputs of rl.init or rl.train (weights, version, record),
  // then each scored rollout (2 buffers).
  if (inputs.size() < 5 || inputs.size() % 2 != 1) {
    throw std::invalid_argument(
        "rl.train: needs the weights (3 buffers of rl.init or rl.train) and at least one scored "
        "rollout (2 buffers each)");
  }
  const Clock::time_point start = Clock::now();
  std::vector<float> w = ReadF32(inputs[0], "rl.train: inputs[0] (weights)");
  const int64_t version = VersionOf(inputs[1], "rl.train: inputs[1] (version)");
  const int64_t max_staleness = args.Int("max_staleness", -1);
  const size_t batch = (inputs.size() - 3) / 2;
  std::vector<int64_t> record = {version + 1, 0, static_cast<int64_t>(batch)};
  double mean_score = 0;
  for (size_t i = 0; i < batch; ++i) {
    const std::string what = "rl.train: rollout " + std::to_string(i);
    std::vector<int64_t> meta = ReadI64(inputs[3 + 2 * i], what);
    if (meta.size() != kRolloutFields) throw std::invalid_argument(what + ": bad fields");
    const std::vector<float> score = ReadF32(inputs[4 + 2 * i], what + " score");
    if (score.size() != 1) throw std::invalid_argument(what + ": expected one score");
    if (max_staleness >= 0 && version - meta[1] > max_staleness) {
      throw std::runtime_error(
          "rl.train: rollout " + std::to_string(meta[0]) + " used weights version " +
          std::to_string(meta[1]) + ", " + std::to_string(version - meta[1]) + " behind version " +
          std::to_string(version) + " (max_staleness " + std::to_string(max_staleness) + ")");
    }
    record.push_back(meta[0]);
    record.push_back(meta[1]);
    record.push_back(meta[2]);
    mean_score += score[0] / static_cast<double>(batch);
  }
  Busy(args, PositiveArg(args, k, "train_us", 20000, 600'000'000), args.Bool("spin", true), k);

  // Momentum SGD on a toy objective; the momentum is the learner's state.
  const float lr = static_cast<float>(args.Number("lr", 0.01));
  ActorState& state = args.state();
  std::shared_ptr<const Buffer> held = state.Get("momentum");
  std::vector<float> m = held != nullptr ? ReadF32(*held, "momentum") : std::vector<float>{};
  if (m.size() != w.size()) m.assign(w.size(), 0.0f);
  for (size_t j = 0; j < w.size(); ++j) {
    const float grad = w[j] - static_cast<float>(mean_score);
    m[j] = 0.9f * m[j] + grad;
    w[j] -= lr * m[j];
  }
  state.Put("momentum", F32(m));
  state.Put("version", I64({version + 1}));
  record[1] = std::chrono::duration_cast<std::chrono::microseconds>(Clock::now() - start).count();
  return {F32(w), I64({version + 1}), I64(record)};
}

}  // namespace

void RegisterKernels(hmpmd::worker::Worker& worker) {
  worker.RegisterKernel("rl.init", Init);
  worker.RegisterKernel("rl.load_weights", LoadWeights);
  worker.RegisterKernel("rl.rollout", Rollout);
  worker.RegisterKernel("rl.reward", Reward);
  worker.RegisterKernel("rl.train", Train);
}

}  // namespace rl
