// One simulated run of a job spec under a policy, with what the tests of
// the simulator's state loads, its stores and state affinity look at.
#pragma once

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "hmpmd/sim/schedule_metrics.h"
#include "hmpmd/sim/simulator.h"
#include "test_builders.h"

namespace hmpmd::test {

struct SimRun {
  Status status;
  JobState state = JobState::kQueued;
  std::string error;  // the job's
  ScheduleMetrics metrics;
  std::vector<TaskRecord> runs;
  std::vector<DeviceId> device;  // per run (UINT32_MAX: never placed)
  uint64_t loads = 0;
  double load_us = 0;
  double exposed_us = 0;  // of load_us: tasks waited for it
  double hidden_us = 0;   // of load_us: under compute on its device
  uint64_t prefetches = 0;
  std::vector<uint64_t> loads_on;  // per device
};

inline SimRun Simulate(const JobSpec& spec, const std::string& policy, const PoolSpec& pool,
                       bool charge = true) {
  SimOptions o;
  o.policy = policy;
  o.pool = pool;
  o.charge_state = charge;
  auto sim = Simulator::Create(o);
  EXPECT_TRUE(sim.ok()) << sim.status().message();
  auto id = (*sim)->Submit(test::BuildGraph(spec));
  EXPECT_TRUE(id.ok()) << id.status().message();
  SimRun r;
  r.status = (*sim)->Run();
  const JobRun& job = *(*sim)->scheduler().job(*id);
  const ResourcePool& rp = (*sim)->scheduler().pool();
  r.state = job.state;
  r.error = job.error;
  r.metrics = ComputeMetrics(job, rp, (*sim)->LoadsOf(*id));
  r.runs = job.runs;
  for (const TaskRecord& rec : job.runs) {
    r.device.push_back(rec.core == kNoCore ? UINT32_MAX : rp.core(rec.core).device);
  }
  r.loads = (*sim)->state_loads();
  r.load_us = (*sim)->state_load_us();
  r.exposed_us = (*sim)->state_load_exposed_us();
  r.hidden_us = (*sim)->state_load_hidden_us();
  r.prefetches = (*sim)->state_prefetches();
  for (DeviceId d = 0; d < rp.device_count(); ++d) r.loads_on.push_back((*sim)->state_loads_on(d));
  return r;
}

}  // namespace hmpmd::test
