// RunBatches: the runs the controller tells workers about, one message per
// (worker, job), since CancelRuns and FreeRuns each name a single job.
#include "hmpmd/controller/run_batches.h"

#include <gtest/gtest.h>

#include <tuple>
#include <vector>

namespace hmpmd {
namespace {

using Sent = std::tuple<WorkerId, JobId, std::vector<uint32_t>>;

template <typename Msg>
std::vector<Sent> Messages(const RunBatches<Msg>& b) {
  std::vector<Sent> out;
  b.ForEach([&](WorkerId w, const Msg& m) { out.emplace_back(w, m.job, m.runs); });
  return out;
}

TEST(RunBatchesTest, RunsOfTwoJobsOnOneWorkerAreTwoMessagesEachNamingItsJob) {
  RunBatches<CancelRuns> b;
  b.Add(/*worker=*/3, /*job=*/7, /*run=*/1);
  b.Add(3, 9, 4);
  b.Add(3, 7, 2);
  EXPECT_EQ(Messages(b), (std::vector<Sent>{{3, 7, {1, 2}}, {3, 9, {4}}}));
}

TEST(RunBatchesTest, OneJobOnTwoWorkersIsOneMessagePerWorkerRunsInAddOrder) {
  RunBatches<FreeRuns> b;
  EXPECT_TRUE(b.empty());
  b.Add(2, 5, 8);
  b.Add(0, 5, 6);
  b.Add(2, 5, 1);
  EXPECT_FALSE(b.empty());
  EXPECT_EQ(Messages(b), (std::vector<Sent>{{0, 5, {6}}, {2, 5, {8, 1}}}));
}

}  // namespace
}  // namespace hmpmd
