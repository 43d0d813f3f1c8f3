// Real controller and worker processes on loopback: two jobs submitted
// together share the cube cores by their spec `weight` (hmpmd policy,
// JobShares) while both have ready work. The simulator's fairness is
// covered by fair_share_test; this checks the live path: the weight
// travels from the spec to the scheduler and measured run times charge it.
#include <algorithm>
#include <array>
#include <chrono>
#include <future>
#include <memory>
#include <nlohmann/json.hpp>

#include "cluster_fixture.h"

namespace hmpmd::testing {
namespace {

using json = nlohmann::json;

// `n` independent `sleep` tasks of `us` each on cube cores: sleeps take the
// same time whatever the machine's load, so the split depends on the
// scheduler alone.
std::string SleepJob(const std::string& name, int weight, int n, int us) {
  json tasks = json::array();
  for (int i = 0; i < n; ++i) {
    tasks.push_back({{"id", "s" + std::to_string(i)},
                     {"kernel", "sleep"},
                     {"args", {{"us", us}}},
                     {"core", "cube"}});
  }
  return json{{"name", name}, {"weight", weight}, {"tasks", tasks}}.dump();
}

struct Held {
  double first = 0, second = 0;  // core time in the window, microseconds
  double share() const { return first / (first + second); }
};

class FairShareLiveTest : public ClusterTest {
 protected:
  // Submits both specs in one loop turn (so the first placements already
  // see both), waits for both to end, and returns the cube core time each
  // held while both still had work (from the first start to the first
  // job's last end).
  Held RunPair(const std::string& first, const std::string& second) {
    // Shared: a callback that fires after a timed-out wait must not touch
    // this frame.
    using Runs = std::vector<std::pair<TimeUs, TimeUs>>;
    auto p = std::make_shared<std::array<std::promise<Runs>, 2>>();
    auto f0 = (*p)[0].get_future(), f1 = (*p)[1].get_future();
    Status st = cluster_->Call([&]() -> Status {
      const std::string* specs[2] = {&first, &second};
      for (int j = 0; j < 2; ++j) {
        auto id = cluster_->controller().Submit({*specs[j]});
        if (!id.ok()) return id.status();
        cluster_->controller().WatchJob(*id, [p, j](const JobRun& job) {
          Runs runs;
          for (const TaskRecord& rec : job.runs) {
            if (rec.state == TaskState::kDone) runs.push_back({rec.start, rec.end});
          }
          if (job.state != JobState::kSucceeded) runs.clear();
          (*p)[j].set_value(std::move(runs));
        });
      }
      return Status::Ok();
    });
    EXPECT_TRUE(st.ok()) << st.ToString();
    if (!st.ok()) return {};
    const auto limit = std::chrono::seconds(60);
    EXPECT_EQ(f0.wait_for(limit), std::future_status::ready);
    EXPECT_EQ(f1.wait_for(limit), std::future_status::ready);
    auto a = f0.get(), b = f1.get();
    EXPECT_FALSE(a.empty() || b.empty()) << "a job did not succeed";
    if (a.empty() || b.empty()) return {};
    TimeUs start = INT64_MAX, end_a = 0, end_b = 0;
    for (auto [s, e] : a) start = std::min(start, s), end_a = std::max(end_a, e);
    for (auto [s, e] : b) start = std::min(start, s), end_b = std::max(end_b, e);
    const TimeUs window = std::min(end_a, end_b);
    auto held = [&](const auto& runs) {
      double us = 0;
      for (auto [s, e] : runs) us += std::max<TimeUs>(0, std::min(e, window) - std::max(s, start));
      return us;
    };
    return {held(a), held(b)};
  }
};

// Weights 3 and 1: the heavier job holds about three quarters of the cube
// time while both run. The job submitted first is the lighter one, so
// arrival order alone would give it everything first.
TEST_F(FairShareLiveTest, WeightsSplitTheCubeCores) {
  StartCluster(2);
  Held h = RunPair(SleepJob("light", 1, 60, 3000), SleepJob("heavy", 3, 60, 3000));
  const double heavy = 1 - h.share();
  EXPECT_GT(heavy, 0.62) << "heavy held " << h.second << " us, light " << h.first;
  EXPECT_LT(heavy, 0.88) << "heavy held " << h.second << " us, light " << h.first;
}

// Equal weights: about half each, whichever came first.
TEST_F(FairShareLiveTest, EqualWeightsSplitEvenly) {
  StartCluster(2);
  Held h = RunPair(SleepJob("one", 1, 60, 3000), SleepJob("two", 1, 60, 3000));
  EXPECT_GT(h.share(), 0.35) << "first held " << h.first << " us, second " << h.second;
  EXPECT_LT(h.share(), 0.65) << "first held " << h.first << " us, second " << h.second;
}

}  // namespace
}  // namespace hmpmd::testing
