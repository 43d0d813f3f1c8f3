// EventFeed on its own: the test thread plays the controller loop (the
// controller is never Run), so every step is deterministic.
#include "hmpmd/api/event_feed.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

namespace hmpmd {
namespace {

using json = nlohmann::json;

// Parses "event: x\ndata: y\n\n..." into (event, data) pairs.
std::vector<std::pair<std::string, json>> Events(const std::string& chunk) {
  std::vector<std::pair<std::string, json>> out;
  size_t i = 0;
  while ((i = chunk.find("event: ", i)) != std::string::npos) {
    size_t nl = chunk.find('\n', i);
    std::string name = chunk.substr(i + 7, nl - i - 7);
    size_t d = chunk.find("data: ", nl) + 6, end = chunk.find("\n\n", d);
    out.emplace_back(name, json::parse(chunk.substr(d, end - d)));
    i = end;
  }
  return out;
}

class EventFeedTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ControllerOptions o;
    o.listen = "tcp://127.0.0.1:0";
    controller_ = std::make_unique<Controller>(o);
    auto id = controller_->Submit({
        R"({"name":"j","tasks":[{"id":"a","kernel":"noop"},{"id":"b","kernel":"noop","inputs":["a"]}],
            "repeat":10})"});
    ASSERT_TRUE(id.ok()) << id.status().ToString();
    job_ = *id;
  }
  std::unique_ptr<EventFeed> MakeFeed(EventFeedOptions o = {}) {
    return std::make_unique<EventFeed>(
        controller_.get(), o, [this](std::string c) { sent_.push_back(std::move(c)); },
        [] { return size_t{1}; });
  }
  std::vector<Dispatch> Dispatches(uint32_t n) {
    std::vector<Dispatch> d(n);
    for (uint32_t i = 0; i < n; ++i) {
      d[i].job = job_;
      d[i].run = i;
      d[i].core = kNoCore;
    }
    return d;
  }

  std::unique_ptr<Controller> controller_;
  JobId job_ = 0;
  std::vector<std::string> sent_;
};

TEST_F(EventFeedTest, RecordsNothingWithoutClients) {
  auto feed = MakeFeed();
  auto d = Dispatches(5);
  feed->OnDispatched(d.data(), d.size(), 100);
  feed->Flush(false, 200);
  EXPECT_TRUE(sent_.empty());
}

TEST_F(EventFeedTest, BatchesTaskRecordsAndJobChangesIntoOneBroadcast) {
  auto feed = MakeFeed();
  feed->Flush(true, 100);  // a client is there: the job is announced
  ASSERT_EQ(sent_.size(), 1u);
  auto first = Events(sent_[0]);
  ASSERT_EQ(first.size(), 1u);  // no workers yet: no pool change
  EXPECT_EQ(first[0].first, "jobs");
  EXPECT_EQ(first[0].second["jobs"][0]["id"], job_);
  EXPECT_EQ(first[0].second["jobs"][0]["state"], "queued");

  auto d = Dispatches(5);
  feed->OnDispatched(d.data(), d.size(), 1000);
  feed->OnTaskEnded(job_, 0, true, 1100, 1200, 1300);
  feed->Flush(true, 2000);
  ASSERT_EQ(sent_.size(), 2u);
  auto ev = Events(sent_[1]);
  ASSERT_EQ(ev.size(), 1u);  // no job or pool change: tasks only
  EXPECT_EQ(ev[0].first, "tasks");
  const json& t = ev[0].second;
  EXPECT_EQ(t["dropped"], 0);
  ASSERT_EQ(t["tasks"].size(), 6u);
  EXPECT_EQ(t["tasks"][0], json::array({job_, 0, 0, -1, -1, 1000, 0, "a", "default"}));
  EXPECT_EQ(t["tasks"][1][7], "b");
  EXPECT_EQ(t["tasks"][5], json::array({job_, 0, 1, -1, -1, 1100, 1200, "a", "default"}));

  feed->Flush(true, 3000);  // nothing new: nothing sent
  EXPECT_EQ(sent_.size(), 2u);
}

TEST_F(EventFeedTest, CapsEachFlushAndCountsWhatItDrops) {
  EventFeedOptions o;
  o.max_records_per_flush = 3;
  o.max_buffered_records = 8;
  auto feed = MakeFeed(o);
  feed->Flush(true, 100);
  auto d = Dispatches(12);
  feed->OnDispatched(d.data(), d.size(), 1000);
  feed->Flush(true, 2000);
  ASSERT_EQ(sent_.size(), 2u);
  auto ev = Events(sent_[1]);
  ASSERT_EQ(ev[0].first, "tasks");
  // 8 buffered (4 dropped on arrival), the newest 3 sent (5 more dropped).
  ASSERT_EQ(ev[0].second["tasks"].size(), 3u);
  EXPECT_EQ(ev[0].second["tasks"][0][1], 5);
  EXPECT_EQ(ev[0].second["dropped"], 9);
  EXPECT_EQ(feed->dropped_records(), 9u);
  EXPECT_NE(feed->PrometheusText(3000).find("hmpmd_event_records_dropped_total 9\n"),
            std::string::npos);
}

TEST_F(EventFeedTest, SwitchingOffClearsTheBuffer) {
  auto feed = MakeFeed();
  feed->Flush(true, 100);
  auto d = Dispatches(4);
  feed->OnDispatched(d.data(), d.size(), 1000);
  feed->Flush(false, 2000);
  feed->OnDispatched(d.data(), d.size(), 2500);  // off: not recorded
  size_t before = sent_.size();
  feed->Flush(true, 3000);
  ASSERT_EQ(sent_.size(), before + 1);
  for (const auto& [name, data] : Events(sent_.back())) EXPECT_NE(name, "tasks");
}

}  // namespace
}  // namespace hmpmd
