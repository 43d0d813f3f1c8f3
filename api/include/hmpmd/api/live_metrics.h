// LiveMetrics: what /metrics adds to the controller's counters, gathered
// from the loop's task events: the dispatch latency histogram (controller
// send to worker-reported start), busy time per device, and the masking and
// bubble ratios of each running job's step so far, running work counted
// as busy up to now (StepSoFar; NaN until a run of the step has started;
// recomputed at most once a second per job, as often as the step is old
// while it is younger, and no more than 0.5% of the loop's CPU, since that
// walks the job's runs; steps of more than 20,000 runs show NaN for at
// least their first second, and their recomputations together stay within
// that 0.5%).
// With an offload function (SetOffload), the walk of a step of more than
// 20,000 runs runs there: the loop only copies the job's runs (a memcpy),
// and the figures appear in a later rendering.
// Thread-safety: loop thread only (it reads the controller's scheduler);
// the offloaded walks touch only their copies and a results box of their
// own, under its mutex.
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "hmpmd/controller/controller.h"

namespace hmpmd {

// Appends the job store's write latency histogram and counters (shown only
// when the controller has a store). Any thread.
void AppendStoreMetrics(std::string* out, const StoreWriteLatency& latency, uint64_t batches,
                        uint64_t errors);

class LiveMetrics {
 public:
  // Upper bounds of the dispatch latency buckets, in seconds.
  static constexpr std::array<double, 13> kLatencyBuckets = {
      50e-6, 100e-6, 250e-6, 500e-6, 1e-3, 2.5e-3, 5e-3, 10e-3, 25e-3, 50e-3, 100e-3, 250e-3, 1.0};

  // Runs a closure on another thread, later (e.g. the event feed's ticker).
  using OffloadFn = std::function<void(std::function<void()>)>;

  explicit LiveMetrics(const Controller* controller)
      : controller_(controller), results_(std::make_shared<Results>()) {}

  // Walks the step ratios' copies through `offload` instead of on the loop.
  // Set before the first PrometheusText().
  void SetOffload(OffloadFn offload) { offload_ = std::move(offload); }

  // A run ended; `start` on the controller clock.
  void OnTaskEnded(JobId job, uint32_t run, TimeUs start, TimeUs end);

  // The Prometheus text of everything (the controller's counters included).
  // `extra` is appended as is (e.g. the event feed's counters).
  std::string PrometheusText(TimeUs now, const std::string& extra);

 private:
  struct StepRatios {
    TimeUs since = 0;     // when this step was first seen running
    TimeUs computed = 0;  // 0: not yet (exported as NaN)
    TimeUs period = 0;    // until the next recomputation
    uint32_t step = 0;
    bool pending = false;  // a walk is under way off the loop
    double masking = 0, bubble = 0, utilisation = 0;
  };

  // Figures computed off the loop, picked up by the next rendering.
  struct Result {
    uint32_t step = 0;
    bool known = false;  // some run of the step had run (else: still NaN)
    double masking = 0, bubble = 0, utilisation = 0;
    TimeUs cost_us = 0;  // CPU time of the copy's walk
  };
  struct Results {
    std::mutex mu;
    std::map<JobId, Result> ready;  // guarded by mu
  };
  // Loop: the walk for `job`'s current step, here or through offload_.
  void ComputeRatios(JobId id, const JobRun& job, StepRatios& r, TimeUs now, bool large);
  void TakeResults(TimeUs now);

  const Controller* controller_;
  OffloadFn offload_;
  std::shared_ptr<Results> results_;
  std::array<uint64_t, kLatencyBuckets.size() + 1> latency_counts_{};  // last: +Inf
  double latency_sum_s_ = 0;
  uint64_t latency_count_ = 0;
  std::vector<double> device_busy_s_;  // by DeviceId
  std::map<JobId, StepRatios> ratios_;
  TimeUs next_large_ = 0;  // no step of > 20,000 runs is recomputed before this
};

}  // namespace hmpmd
