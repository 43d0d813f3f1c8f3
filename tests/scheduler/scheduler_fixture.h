// SchedulerTest: a Scheduler driven by hand (no threads, no clock), with
// helpers to add jobs and read their state; shared by the engine's tests.
#pragma once

#include <gtest/gtest.h>

#include <initializer_list>
#include <memory>
#include <string>
#include <vector>

#include "hmpmd/scheduler/hmpmd_policy.h"
#include "hmpmd/scheduler/scheduler.h"
#include "test_builders.h"

namespace hmpmd::test {

class SchedulerTest : public ::testing::Test {
 protected:
  void Make(std::unique_ptr<Policy> policy = std::make_unique<HmpmdPolicy>()) {
    sched_ = std::make_unique<Scheduler>(opts_, std::move(policy));
  }
  JobId Add(const JobSpec& spec, TimeUs now = 0) {
    auto g = test::BuildGraph(spec);
    if (!g) return 0;
    Result<JobId> id = sched_->AddJob(g, now);
    EXPECT_TRUE(id.ok()) << id.status().ToString();
    return id.ok() ? *id : 0;
  }
  Status AddStatus(const JobSpec& spec) {
    auto g = test::BuildGraph(spec);
    if (!g) return Status::Internal("spec did not build");
    Result<JobId> id = sched_->AddJob(g, 0);
    return id.ok() ? Status::Ok() : id.status();
  }
  std::vector<Dispatch> ScheduleAt(TimeUs now) {
    std::vector<Dispatch> out;
    sched_->Schedule(now, &out);
    return out;
  }
  const JobRun& Job(JobId id) const {
    const JobRun* j = sched_->job(id);
    EXPECT_NE(j, nullptr);
    return *j;
  }
  std::string TaskOf(JobId job, uint32_t run) const {
    const JobRun& j = Job(job);
    return j.graph->spec_task(run % j.graph->size()).id;
  }
  static void ExpectHas(const std::string& msg, std::initializer_list<std::string> needles) {
    for (const std::string& n : needles) {
      EXPECT_NE(msg.find(n), std::string::npos) << "message '" << msg << "' lacks '" << n << "'";
    }
  }

  SchedulerOptions opts_;
  std::unique_ptr<Scheduler> sched_;
};

}  // namespace hmpmd::test
