// A test fixture that stands up a real controller (a Service, as `hmpmd
// controller` runs it) and real hmpmd-worker processes on loopback, runs job
// specs, and checks the recorded schedule.
#pragma once

#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "hmpmd/controller/job_spec_parser.h"
#include "hmpmd/launch/local_cluster.h"
#include "hmpmd/protocol/buffer.h"

namespace hmpmd::testing {

// One finished task run as the controller recorded it.
struct RunRecord {
  uint32_t run = 0, index = 0, step = 0;
  TaskState state = TaskState::kBlocked;
  CoreId core = 0;
  DeviceId device = 0;
  CoreKind kind = CoreKind::kCube;
  TimeUs start = 0, end = 0;
};

struct JobResult {
  JobId id = 0;
  JobState state = JobState::kQueued;
  std::string error;
  std::shared_ptr<const JobGraph> graph;
  std::vector<RunRecord> runs;
};

class ClusterTest : public ::testing::Test {
 protected:
  void StartCluster(int workers, const std::string& cores = "cube=1,vector=1",
                    ControllerOptions controller = {});
  void TearDown() override;

  // Parses, submits and waits for `spec_json`; fails the test on refusal.
  JobResult RunSpec(const std::string& spec_json, int timeout_ms = 60000);
  // Submits on the loop and returns what Controller::Submit said.
  Status Submit(const std::string& spec_json);

  // Every edge respected, steps in order, no core running two runs at once.
  static void ExpectValidSchedule(const JobResult& r);

  // The outputs of (job, run), fetched from the worker that holds them;
  // empty (and the test failed) when none does.
  std::vector<Buffer> FetchOutputs(JobId job, uint32_t run);
  // The controller's data token (what FetchOutputs carries).
  const DataToken& data_token() const { return cluster_->controller().data_token(); }

  std::unique_ptr<LocalCluster> cluster_;
  // Flags StartCluster passes to every hmpmd-worker (set before it).
  std::vector<std::string> extra_worker_args_;
  // The service StartCluster runs, but for its controller's options (set
  // before it): serve_http and the HTTP side's options.
  ServiceOptions service_options_;
};

// The float32 elements of `b`.
std::vector<float> Floats(const Buffer& b);
// What the built-in `scale` kernel makes with no input: `n` elements
// generated and multiplied by `factor`.
std::vector<float> ScaleGenerated(int64_t n, double factor);

}  // namespace hmpmd::testing
