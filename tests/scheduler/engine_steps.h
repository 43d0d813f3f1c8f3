// Helpers for tests that drive a Scheduler by hand with the fifo policy
// (no threads, no clock): shared by the lineage and gang-restart tests.
#pragma once

#include <gtest/gtest.h>

#include <memory>
#include <vector>

#include "hmpmd/scheduler/policy.h"
#include "hmpmd/scheduler/scheduler.h"

namespace hmpmd::test {

inline std::unique_ptr<Scheduler> MakeFifoScheduler() {
  return std::make_unique<Scheduler>(SchedulerOptions{}, std::move(MakePolicy("fifo")).value());
}

// Ends dispatched run `d` well at `now` (it ran the 10 us before), with
// `bytes` of outputs on its device.
inline void FinishRun(Scheduler& s, const Dispatch& d, TimeUs now, uint64_t bytes) {
  ASSERT_TRUE(s.OnTaskDone(d.job, d.run, d.attempt, now - 10, now, now));
  s.RecordOutput(d.job, d.run, d.device, bytes, bytes > 0 ? 1 : 0);
}

// Schedules at `now` and returns the runs dispatched.
inline std::vector<Dispatch> Step(Scheduler& s, TimeUs now) {
  std::vector<Dispatch> out;
  s.Schedule(now, &out);
  return out;
}

}  // namespace hmpmd::test
