// RlLoop: the driver side of the async RL example. One run of one mode on a
// connected session: sub-models, the rollout/reward/train/broadcast loop,
// and what it measured.
//
//   sync:  actors actor0..actorA-1 (1 device each), learner (1 device): each
//          step generates `batch` rollouts split over the actors, scores
//          them, trains once and broadcasts the new weights to every actor
//          (rl.load_weights); the next step's rollouts wait for it.
//   async: one actor sub-model `rollout` over A devices and the learner:
//          rollouts are generated all the time (`inflight` at once); the
//          learner trains as soon as `batch` scored rollouts are ready;
//          new weights go out every `broadcast_every` versions (as an input
//          of the following rollouts, which load them into their actor
//          state once per version and device); a rollout more than
//          `max_staleness` versions behind the weights it would train is
//          dropped (or cancelled while still running), so none ever is.
//
// Thread-safety: one RlLoop per thread.
#pragma once

#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include "hmpmd/client/client.h"

namespace rl {

struct RlOptions {
  /// Devices of the pool (workers with one cube core each). Sync gives
  /// devices - 1 to actors and 1 to the learner; async the same numbers as
  /// elastic sets. Default: 4.
  uint32_t devices = 4;
  /// Learner steps per run. Default: 30.
  uint32_t steps = 30;
  /// Scored rollouts per learner step. Default: 16.
  uint32_t batch = 16;
  /// Async: new weights reach the actors every this many versions. Default: 1.
  uint32_t broadcast_every = 1;
  /// Async: most versions a trained rollout's weights may lag. Default: 2.
  uint32_t max_staleness = 2;
  /// Async: rollouts in flight; 0 means batch + devices. Default: 0.
  uint32_t inflight = 0;
  /// Rollout durations: lognormal around `median_us` with `sigma`, capped at
  /// `max_us`, seeded by `seed` and the rollout's id. Defaults: 4000 us,
  /// 0.8, 40000 us, 1.
  int64_t median_us = 4000;
  double sigma = 0.8;
  int64_t max_us = 40000;
  int64_t seed = 1;
  /// Busy time of one learner step, one weights load, one scoring.
  /// Defaults: 20000, 500, 200 us.
  int64_t train_us = 20000;
  int64_t load_us = 500;
  int64_t reward_us = 200;
  /// Floats of the weights. Default: 4096.
  int64_t params = 4096;
  /// Kernels busy-wait (true) or sleep (false) their durations. Default: true.
  bool spin = true;
  /// How long any one wait may take before the run fails. Default: 60000.
  int64_t timeout_ms = 60000;
};

struct RunStats {
  std::string mode;
  uint32_t steps = 0;
  double wall_s = 0;  // first submit to the last learner step done
  double busy_s = 0;  // cube-core time of the kernels that ran to the end
  uint32_t devices = 0;
  uint64_t rollouts = 0;   // scored rollouts produced
  uint64_t discarded = 0;  // async: too stale when a batch was formed
  uint64_t cancelled = 0;  // async: cancelled while too stale
  int64_t max_lag = 0;     // largest (learner version - rollout version) trained on
  double steps_per_s() const { return wall_s > 0 ? steps / wall_s : 0; }
  double utilisation() const { return wall_s > 0 ? busy_s / (devices * wall_s) : 0; }
};

// Runs `mode` ("sync" or "async") once on `client`'s session. `record`,
// when not null, gets one JSON line per learner step: mode, run, the
// learner's input version, and (id, version) of every rollout it trained.
hmpmd::Result<RunStats> RunMode(hmpmd::client::Client& client, const std::string& mode,
                                const RlOptions& options, int run, std::FILE* record);

}  // namespace rl
