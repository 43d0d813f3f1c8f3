// LiveMetrics: what /metrics adds to the controller's counters, gathered
// from the loop's task events: the dispatch latency histogram (controller
// send to worker-reported start), busy time per device, and the masking and
// bubble ratios of each running job's step (recomputed at most once a
// second per job, and no more than 0.5% of the loop's CPU, since that walks
// the job's runs; steps of more than 20,000 runs show NaN for at least their
// first second, and their recomputations together stay within that 0.5%).
// Thread-safety: loop thread only (it reads the controller's scheduler).
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "controller.h"

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

  explicit LiveMetrics(const Controller* controller) : controller_(controller) {}

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
    double masking = 0, bubble = 0, utilisation = 0;
  };

  const Controller* controller_;
  std::array<uint64_t, kLatencyBuckets.size() + 1> latency_counts_{};  // last: +Inf
  double latency_sum_s_ = 0;
  uint64_t latency_count_ = 0;
  std::vector<double> device_busy_s_;  // by DeviceId
  std::map<JobId, StepRatios> ratios_;
  TimeUs next_large_ = 0;  // no step of > 20,000 runs is recomputed before this
};

}  // namespace hmpmd
