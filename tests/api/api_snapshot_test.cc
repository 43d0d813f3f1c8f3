// ApiSnapshots on its own: the test thread plays the controller loop (the
// controller is never Run), so when a snapshot is published and when it may
// be served is deterministic.
#include "hmpmd/api/api_snapshot.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

namespace hmpmd {
namespace {

using json = nlohmann::json;
using std::chrono::hours;
using std::chrono::milliseconds;

constexpr char kSpec[] = R"({"name":"j","tasks":[{"id":"a","kernel":"noop"}],"repeat":3})";

class ApiSnapshotTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ControllerOptions o;
    o.listen = "tcp://127.0.0.1:0";
    controller_ = std::make_unique<Controller>(o);
  }
  std::unique_ptr<ApiSnapshots> Make(milliseconds period) {
    ApiSnapshotOptions o;
    o.period = period;
    return std::make_unique<ApiSnapshots>(controller_.get(), o, [this](TimeUs now) {
      ++metrics_rendered_;
      return "metrics at " + std::to_string(now);
    });
  }
  JobId Submit() {
    auto id = controller_->Submit({kSpec});
    EXPECT_TRUE(id.ok()) << id.status().ToString();
    return id.ok() ? *id : 0;
  }

  std::unique_ptr<Controller> controller_;
  int metrics_rendered_ = 0;
};

TEST_F(ApiSnapshotTest, RendersOnlyWhileSomeoneReads) {
  auto snaps = Make(hours(1));
  for (int i = 0; i < 3; ++i) snaps->Tick(Controller::NowUs());
  EXPECT_EQ(metrics_rendered_, 0);
  EXPECT_EQ(snaps->Fresh(), nullptr);  // nothing published yet; records the read
  snaps->Tick(Controller::NowUs());
  EXPECT_EQ(metrics_rendered_, 1);
  auto s = snaps->Fresh();
  ASSERT_NE(s, nullptr);
  EXPECT_EQ(json::parse(s->pool)["devices"].size(), 0u);
  EXPECT_EQ(json::parse(s->jobs)["jobs"].size(), 0u);
  // Nothing changed: no new rendering however often the loop ticks.
  for (int i = 0; i < 3; ++i) snaps->Tick(Controller::NowUs());
  EXPECT_EQ(metrics_rendered_, 1);
  EXPECT_EQ(snaps->Fresh(), s);
}

TEST_F(ApiSnapshotTest, ADiscreteChangeIsNeverServedFromAnOlderSnapshot) {
  auto snaps = Make(hours(1));
  (void)snaps->Fresh();
  snaps->Tick(Controller::NowUs());
  ASSERT_NE(snaps->Fresh(), nullptr);
  // A job submitted through the API: the caller marks the change before
  // answering, so the next read waits for the loop.
  JobId id = Submit();
  snaps->MarkChanged();
  EXPECT_EQ(snaps->Fresh(), nullptr);
  auto s = snaps->RefreshOnLoop(Controller::NowUs());
  ASSERT_NE(s, nullptr);
  EXPECT_EQ(snaps->Fresh(), s);
  json list = json::parse(s->jobs);
  ASSERT_EQ(list["jobs"].size(), 1u);
  EXPECT_EQ(list["jobs"][0]["id"], id);
  ASSERT_NE(s->Find(id), nullptr);
  ASSERT_NE(s->Find(id)->full, nullptr);
  EXPECT_EQ(json::parse(*s->Find(id)->full)["state"], "queued");
  EXPECT_EQ(s->Find(id + 1), nullptr);
  // A change the loop makes by itself (here a cancel) is noticed by Tick,
  // which runs before anyone hears of it.
  ASSERT_TRUE(controller_->Cancel(id).ok());
  snaps->Tick(Controller::NowUs());
  auto after = snaps->Fresh();
  ASSERT_NE(after, nullptr);
  EXPECT_NE(after, s);
  EXPECT_EQ(json::parse(after->jobs)["jobs"][0]["state"], "cancelled");
  // An ended job's full summary (with metrics) is rendered on demand, once.
  EXPECT_EQ(after->Find(id)->full, nullptr);
  auto full = snaps->EndedSummary(*controller_->scheduler().job(id));
  EXPECT_EQ(json::parse(*full)["state"], "cancelled");
  EXPECT_EQ(snaps->EndedSummary(*controller_->scheduler().job(id)), full);
  snaps->Tick(Controller::NowUs());
  auto with_full = snaps->Fresh();
  ASSERT_NE(with_full, nullptr);
  EXPECT_EQ(with_full->Find(id)->full, full);
}

TEST_F(ApiSnapshotTest, ProgressIsServedUntilItIsAPeriodOld) {
  // Progress without a discrete change: the test bumps a counter as the
  // loop would on a dispatch (the counters are the loop's to change).
  auto dispatch_one = [this] {
    ++const_cast<ControllerCounters&>(controller_->counters()).tasks_dispatched;
  };
  // A zero period: progress makes the snapshot unservable at once.
  auto snaps = Make(milliseconds(0));
  Submit();
  (void)snaps->Fresh();
  snaps->Tick(Controller::NowUs());
  ASSERT_NE(snaps->Fresh(), nullptr);
  snaps->Tick(Controller::NowUs());  // publishes again only if it must
  EXPECT_EQ(metrics_rendered_, 1);
  // Nobody reads now: the loop notices progress but renders nothing.
  snaps = Make(milliseconds(0));
  (void)snaps->Fresh();
  snaps->Tick(Controller::NowUs());
  EXPECT_EQ(metrics_rendered_, 2);
  dispatch_one();
  snaps->Tick(Controller::NowUs());
  EXPECT_EQ(metrics_rendered_, 2);
  EXPECT_EQ(snaps->Fresh(), nullptr);  // dirty for >= 0 ms: ask the loop
  snaps->Tick(Controller::NowUs());    // someone read: rendered again
  EXPECT_EQ(metrics_rendered_, 3);
  EXPECT_NE(snaps->Fresh(), nullptr);
  // With an hour's period the same progress is served from the old snapshot.
  auto lazy = Make(hours(1));
  (void)lazy->Fresh();
  lazy->Tick(Controller::NowUs());
  auto s = lazy->Fresh();
  ASSERT_NE(s, nullptr);
  dispatch_one();
  lazy->Tick(Controller::NowUs());
  EXPECT_EQ(lazy->Fresh(), s);
}

TEST_F(ApiSnapshotTest, DetachStopsAllRendering) {
  auto snaps = Make(hours(1));
  (void)snaps->Fresh();
  snaps->Detach();
  snaps->Tick(Controller::NowUs());
  EXPECT_EQ(snaps->RefreshOnLoop(Controller::NowUs()), nullptr);
  EXPECT_EQ(metrics_rendered_, 0);
}

// A tenant's view: its own jobs in the list, and of the per-job metric
// series only its jobs'; the pool's figures stay.
TEST(ApiSnapshotTenantTest, ATenantsViewHoldsItsOwnJobsOnly) {
  ApiSnapshot s;
  auto brief = [](int id) {
    return std::make_shared<const std::string>("{\"id\":" + std::to_string(id) + "}");
  };
  s.summaries = {{1, "vision", brief(1), nullptr},
                 {2, "audio", brief(2), nullptr},
                 {3, "vision", brief(3), nullptr}};
  EXPECT_EQ(s.JobsOf("vision"), R"({"jobs":[{"id":1},{"id":3}]})");
  EXPECT_EQ(s.JobsOf("audio"), R"({"jobs":[{"id":2}]})");
  EXPECT_EQ(s.JobsOf("nobody"), R"({"jobs":[]})");
  s.metrics =
      "# TYPE hmpmd_tasks_dispatched_total counter\n"
      "hmpmd_tasks_dispatched_total 42\n"
      "hmpmd_step_bubble_ratio{job=\"1\",step=\"0\"} 0.1\n"
      "hmpmd_step_bubble_ratio{job=\"2\",step=\"4\"} 0.2\n"
      "hmpmd_step_bubble_ratio{job=\"9\",step=\"0\"} 0.3\n"
      "hmpmd_step_utilisation{job=\"3\",step=\"1\"} NaN";
  EXPECT_EQ(s.MetricsOf("vision"),
            "# TYPE hmpmd_tasks_dispatched_total counter\n"
            "hmpmd_tasks_dispatched_total 42\n"
            "hmpmd_step_bubble_ratio{job=\"1\",step=\"0\"} 0.1\n"
            "hmpmd_step_utilisation{job=\"3\",step=\"1\"} NaN");
  EXPECT_EQ(s.MetricsOf("audio"),
            "# TYPE hmpmd_tasks_dispatched_total counter\n"
            "hmpmd_tasks_dispatched_total 42\n"
            "hmpmd_step_bubble_ratio{job=\"2\",step=\"4\"} 0.2\n");
}

}  // namespace
}  // namespace hmpmd
