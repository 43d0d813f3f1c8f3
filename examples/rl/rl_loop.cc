#include "rl_loop.h"

#include <algorithm>
#include <chrono>
#include <deque>
#include <exception>
#include <string>
#include <utility>
#include <vector>

#include "rl_format.h"

namespace rl {
namespace {

using hmpmd::Args;
using hmpmd::Buffer;
using hmpmd::CoreKind;
using hmpmd::Result;
using hmpmd::Status;
using hmpmd::SubmodelKind;
using hmpmd::client::Actor;
using hmpmd::client::Call;
using hmpmd::client::Client;
using hmpmd::client::Future;
using Clock = std::chrono::steady_clock;

// The loop state of one run: the session, the sub-models and the counters.
class Runner {
 public:
  Runner(Client& client, const RlOptions& o, std::string mode, int run, std::FILE* record)
      : client_(client), o_(o), run_(run), record_(record) {
    stats_.mode = std::move(mode);
    stats_.devices = o.devices;
  }

  Result<RunStats> Sync();
  Result<RunStats> Async();

 private:
  Args RolloutArgs() {
    return {{"id", next_id_++},  {"seed", o_.seed},     {"median_us", o_.median_us},
            {"sigma", o_.sigma}, {"max_us", o_.max_us}, {"load_us", o_.load_us},
            {"spin", o_.spin}};
  }
  Args TrainArgs() const {
    return {{"train_us", o_.train_us},
            {"max_staleness", static_cast<int64_t>(o_.max_staleness)},
            {"spin", o_.spin}};
  }
  Call Make(Args args, std::vector<Future> inputs, CoreKind core = CoreKind::kCube) const {
    Call c;
    c.args = std::move(args);
    c.inputs = std::move(inputs);
    c.core = core;
    return c;
  }
  Result<Future> Score(const Actor& reward, const Future& rollout) {
    return reward.Call("rl.reward", Make({{"reward_us", o_.reward_us}, {"spin", o_.spin}},
                                         {rollout}, CoreKind::kVector));
  }
  // Reads a finished learner step's record: counts, checks and logs it.
  Status Collect(const Future& train);

  Client& client_;
  const RlOptions& o_;
  const int run_;
  std::FILE* const record_;
  RunStats stats_;
  int64_t next_id_ = 0;
};

Status Runner::Collect(const Future& train) {
  Result<std::vector<Buffer>> out = train.Get(o_.timeout_ms);
  if (!out.ok()) return out.status();
  if (out->size() != 3) return Status::Internal("rl.train: expected 3 outputs");
  std::vector<int64_t> rec;
  try {
    rec = ReadI64((*out)[2], "rl.train record");
  } catch (const std::exception& e) {
    return Status::Internal(e.what());
  }
  if (rec.size() < kRecordHeader ||
      rec.size() != kRecordHeader + kRecordFields * static_cast<size_t>(rec[2])) {
    return Status::Internal("rl.train: malformed record");
  }
  const int64_t learner_version = rec[0] - 1;
  stats_.busy_s += rec[1] / 1e6;
  ++stats_.steps;
  std::string rollouts;
  for (size_t i = kRecordHeader; i < rec.size(); i += kRecordFields) {
    stats_.max_lag = std::max(stats_.max_lag, learner_version - rec[i + 1]);
    if (stats_.mode == "sync") stats_.busy_s += rec[i + 2] / 1e6;  // async counts at scoring
    rollouts += (rollouts.empty() ? "[" : ",[") + std::to_string(rec[i]) + "," +
                std::to_string(rec[i + 1]) + "]";
  }
  if (record_ != nullptr) {
    std::fprintf(record_,
                 "{\"mode\": \"%s\", \"run\": %d, \"learner_version\": %lld, \"max_staleness\": "
                 "%u, \"rollouts\": [%s]}\n",
                 stats_.mode.c_str(), run_, static_cast<long long>(learner_version),
                 o_.max_staleness, rollouts.c_str());
  }
  return Status::Ok();
}

Result<RunStats> Runner::Sync() {
  const uint32_t n_actors = std::max<uint32_t>(1, o_.devices - 1);
  std::vector<Actor> actors;
  for (uint32_t i = 0; i < n_actors; ++i) {
    ASSIGN_OR_RETURN(Actor a, client_.CreateActor({.name = "actor" + std::to_string(i),
                                                   .kind = SubmodelKind::kActor,
                                                   .devices = 1,
                                                   .elastic = false}));
    actors.push_back(std::move(a));
  }
  ASSIGN_OR_RETURN(
      Actor learner,
      client_.CreateActor(
          {.name = "learner", .kind = SubmodelKind::kLearner, .devices = 1, .elastic = false}));
  ASSIGN_OR_RETURN(
      Actor reward,
      client_.CreateActor({.name = "reward", .kind = SubmodelKind::kReward, .devices = 0}));
  const Clock::time_point t0 = Clock::now();
  ASSIGN_OR_RETURN(Future weights,
                   learner.Call("rl.init", Make({{"params", o_.params}, {"seed", o_.seed}}, {})));
  const Args load = {{"load_us", o_.load_us}, {"spin", o_.spin}};
  std::vector<Future> loaded;
  for (const Actor& a : actors) {
    ASSIGN_OR_RETURN(Future f, a.Call("rl.load_weights", Make(load, {weights})));
    loaded.push_back(std::move(f));
  }
  std::deque<Future> trains;
  for (uint32_t step = 0; step < o_.steps; ++step) {
    // Generate and score; each actor's rollouts wait for its weights. They
    // also get the weights as an input, which a rollout loads only when its
    // device lacks them (a device the scheduler moved into the actor's set).
    std::vector<Future> inputs = {weights};
    for (uint32_t j = 0; j < o_.batch; ++j) {
      const uint32_t a = j % n_actors;
      ASSIGN_OR_RETURN(Future r,
                       actors[a].Call("rl.rollout", Make(RolloutArgs(), {loaded[a], weights})));
      ASSIGN_OR_RETURN(Future s, Score(reward, r));
      inputs.push_back(std::move(s));
    }
    ASSIGN_OR_RETURN(weights, learner.Call("rl.train", Make(TrainArgs(), std::move(inputs))));
    // Broadcast: every actor loads the new weights before its next rollout.
    for (uint32_t a = 0; a < n_actors; ++a) {
      ASSIGN_OR_RETURN(loaded[a], actors[a].Call("rl.load_weights", Make(load, {weights})));
    }
    // One load per actor per step: the first ones before step 0 run in the
    // measured time; the last broadcast, after the last step, is not waited for.
    stats_.busy_s += n_actors * o_.load_us / 1e6;
    stats_.rollouts += o_.batch;
    trains.push_back(weights);
    // Submitted one step ahead, so the driver's round trip hides under it.
    if (trains.size() > 1) {
      RETURN_IF_ERROR(Collect(trains.front()));
      trains.pop_front();
    }
  }
  while (!trains.empty()) {
    RETURN_IF_ERROR(Collect(trains.front()));
    trains.pop_front();
  }
  stats_.wall_s = std::chrono::duration<double>(Clock::now() - t0).count();
  return stats_;
}

Result<RunStats> Runner::Async() {
  const uint32_t n_actor_devices = std::max<uint32_t>(1, o_.devices - 1);
  const uint32_t inflight = o_.inflight > 0 ? o_.inflight : o_.batch + o_.devices;
  const int64_t s = o_.max_staleness;
  const int64_t k = std::max<uint32_t>(1, o_.broadcast_every);
  ASSIGN_OR_RETURN(Actor actors, client_.CreateActor({.name = "rollout",
                                                      .kind = SubmodelKind::kActor,
                                                      .devices = n_actor_devices}));
  ASSIGN_OR_RETURN(
      Actor learner,
      client_.CreateActor({.name = "learner", .kind = SubmodelKind::kLearner, .devices = 1}));
  ASSIGN_OR_RETURN(
      Actor reward,
      client_.CreateActor({.name = "reward", .kind = SubmodelKind::kReward, .devices = 0}));
  const Clock::time_point t0 = Clock::now();
  ASSIGN_OR_RETURN(Future weights,
                   learner.Call("rl.init", Make({{"params", o_.params}, {"seed", o_.seed}}, {})));
  int64_t version = 0;  // of `weights`: what the next learner step reads
  Future broadcast = weights;
  int64_t broadcast_version = 0;

  struct Generating {
    Future rollout, scored;
    int64_t launched_with;  // the broadcast version it was given
  };
  struct Scored {
    Future scored;
    int64_t version;  // the weights version it used (its tag)
  };
  std::vector<Generating> generating;
  std::vector<Scored> ready;
  std::deque<Future> trains;
  uint32_t submitted = 0;

  while (stats_.steps < o_.steps) {
    // Keep the actors busy.
    while (submitted < o_.steps && generating.size() < inflight) {
      ASSIGN_OR_RETURN(Future r, actors.Call("rl.rollout", Make(RolloutArgs(), {broadcast})));
      ASSIGN_OR_RETURN(Future sc, Score(reward, r));
      generating.push_back({std::move(r), std::move(sc), broadcast_version});
    }
    // Train as soon as a batch is ready (one step queued behind the running one).
    if (submitted < o_.steps && trains.size() < 2) {
      // Bounded staleness: drop what is too old for the version it would train.
      const size_t before = ready.size();
      std::erase_if(ready, [&](const Scored& r) { return version - r.version > s; });
      stats_.discarded += before - ready.size();
      if (ready.size() >= o_.batch) {
        std::stable_sort(ready.begin(), ready.end(),
                         [](const Scored& a, const Scored& b) { return a.version > b.version; });
        std::vector<Future> inputs = {weights};
        for (uint32_t i = 0; i < o_.batch; ++i) inputs.push_back(ready[i].scored);
        ready.erase(ready.begin(), ready.begin() + o_.batch);
        ASSIGN_OR_RETURN(weights, learner.Call("rl.train", Make(TrainArgs(), std::move(inputs))));
        ++version;
        ++submitted;
        trains.push_back(weights);
        if (version - broadcast_version >= k) {
          broadcast = weights;
          broadcast_version = version;
        }
        // Rollouts given weights too old for any later step are cancelled.
        for (Generating& g : generating) {
          if (version - g.launched_with > s && !g.rollout.ready()) {
            if (client_.Cancel(g.rollout).ok()) ++stats_.cancelled;
          }
        }
        continue;
      }
    }
    // Wait for a scored rollout or the oldest learner step.
    std::vector<Future> waiting;
    for (const Generating& g : generating) waiting.push_back(g.scored);
    if (!trains.empty()) waiting.push_back(trains.front());
    if (waiting.empty()) return Status::Internal("rl: nothing in flight and no batch ready");
    Result<size_t> any = client_.WaitAny(waiting, o_.timeout_ms);
    if (!any.ok()) return any.status();
    if (!trains.empty() && trains.front().ready()) {
      RETURN_IF_ERROR(Collect(trains.front()));
      trains.pop_front();
    }
    for (auto it = generating.begin(); it != generating.end();) {
      if (!it->scored.ready()) {
        ++it;
        continue;
      }
      Result<std::vector<Buffer>> out = it->scored.Get(o_.timeout_ms);
      if (out.ok() && out->size() == 2) {
        std::vector<int64_t> meta;
        try {
          meta = ReadI64((*out)[0], "rl.reward output");
        } catch (const std::exception& e) {
          return Status::Internal(e.what());
        }
        if (meta.size() != kRolloutFields) return Status::Internal("rl.reward: bad output");
        stats_.busy_s += meta[2] / 1e6;
        ++stats_.rollouts;
        ready.push_back({it->scored, meta[1]});
      } else if (out.ok() || out.status().code() != hmpmd::StatusCode::kCancelled) {
        // Cancelled ones were counted when cancelled; anything else is an error.
        if (!out.ok()) return out.status();
        return Status::Internal("rl.reward: expected 2 outputs");
      }
      it = generating.erase(it);
    }
  }
  stats_.wall_s = std::chrono::duration<double>(Clock::now() - t0).count();
  // What is still generating is not needed any more.
  for (Generating& g : generating) {
    if (!g.rollout.ready() && client_.Cancel(g.rollout).ok()) ++stats_.cancelled;
  }
  return stats_;
}

}  // namespace

Result<RunStats> RunMode(Client& client, const std::string& mode, const RlOptions& options, int run,
                         std::FILE* record) {
  if (options.devices < 2) return Status::InvalidArgument("--devices: needs at least 2");
  if (options.batch < 1 || options.steps < 1) {
    return Status::InvalidArgument("--batch and --steps: must be at least 1");
  }
  Runner runner(client, options, mode, run, record);
  if (mode == "sync") return runner.Sync();
  if (mode == "async") return runner.Async();
  return Status::InvalidArgument("--mode: '" + mode + "' is not sync or async");
}

}  // namespace rl
