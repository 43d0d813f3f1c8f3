// Reads served from the loop's snapshots, over real HTTP: concurrent reads of
// one snapshot get the same bytes (one shared body, sent to every reader),
// and a change a client could have seen is in the very next read (README,
// "REST API": a snapshot is never older than a change you could have seen).
#include <gtest/gtest.h>

#include <atomic>
#include <latch>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "hmpmd/http/cpu_budget.h"
#include "rest_api_fixture.h"

namespace hmpmd::testing {
namespace {

TEST_F(RestApiTest, ConcurrentReadsOfOneSnapshotGetIdenticalBodies) {
  uint64_t id = SubmitOk(Chain(12));
  WaitJob(id, [](const json& s) { return s["state"] == "succeeded"; });
  const std::string job = "/api/v1/jobs/" + std::to_string(id);
  // Nothing changes now, so the loop publishes no new snapshot and every
  // pair of reads below is answered from the same one.
  const std::vector<std::string> targets = {
      "/api/v1/pool", "/api/v1/jobs",         job,
      "/metrics",     job + "/tasks?limit=5", "/dashboard/style.css"};
  for (const std::string& target : targets) {
    for (int round = 0; round < 5; ++round) {
      HttpResponse got[2];
      std::latch start(2);
      std::vector<std::thread> readers;
      for (int i = 0; i < 2; ++i) {
        readers.emplace_back([&, i] {
          start.arrive_and_wait();  // both requests in flight together
          got[i] = Call("GET", target);
        });
      }
      for (auto& t : readers) t.join();
      ASSERT_EQ(got[0].status, 200) << target << ": " << got[0].body;
      ASSERT_EQ(got[1].status, 200) << target << ": " << got[1].body;
      ASSERT_FALSE(got[0].body.empty()) << target;
      EXPECT_EQ(got[0].body, got[1].body) << target << " round " << round;
      EXPECT_EQ(got[0].content_type, got[1].content_type) << target;
      if (target.rfind("/api/", 0) == 0) {
        EXPECT_FALSE(json::parse(got[0].body, nullptr, false).is_discarded()) << target;
      }
    }
  }
  // A repeated read gets the same bytes too (nothing was re-rendered or
  // rewritten in place while being sent).
  EXPECT_EQ(Call("GET", "/api/v1/pool").body, Call("GET", "/api/v1/pool").body);
}

TEST_F(RestApiTest, AChangeIsInTheNextReadWhileOthersHammerTheSnapshots) {
  // Readers keep the snapshots in demand (and published every period) the
  // whole time, so the reads below race with publishing.
  std::atomic<bool> stop{false};
  std::atomic<int> reads{0};
  std::vector<std::thread> hammer;
  struct Join {  // also when an assertion returns early
    std::atomic<bool>& stop;
    std::vector<std::thread>& threads;
    ~Join() {
      stop = true;
      for (auto& t : threads) t.join();
    }
  } join{stop, hammer};
  for (int i = 0; i < 4; ++i) {
    hammer.emplace_back([&, i] {
      const char* targets[] = {"/api/v1/jobs", "/metrics", "/api/v1/pool"};
      for (int n = 0; !stop && n < 5000; ++n) {
        auto r =
            HttpCall(url_, "GET", targets[(n + i) % 3], "", Bearer(), std::chrono::seconds(10));
        if (r.ok() && r->status == 200) ++reads;
      }
    });
  }
  for (int round = 0; round < 5; ++round) {
    uint64_t id = 0;
    std::string job;
    bool ended = false;
    // The stream is open before the job is submitted, so its end is heard.
    Status st = StreamSse(
        url_, "/api/v1/events", Bearer(),
        [&](std::string_view event, std::string_view data) {
          if (event == "hello") {
            // Submitted (201): the next reads know the job.
            id = SubmitOk(Chain(9));
            job = "/api/v1/jobs/" + std::to_string(id);
            EXPECT_EQ(GetJson(job)["id"], id);
            bool listed = false;
            json list = GetJson("/api/v1/jobs");
            for (const auto& j : list["jobs"]) listed |= j["id"] == id;
            EXPECT_TRUE(listed) << "round " << round << ": job " << id
                                << " not in the list after its 201: " << list.dump();
            return true;
          }
          if (event != "jobs" || id == 0) return true;
          // Ended, as the event stream tells: the next reads say so, with
          // every task done (an end is a discrete change, never served late).
          const json d = json::parse(data);  // kept: a range-for over a temporary's member dangles
          for (const auto& j : d["jobs"]) {
            if (j["id"] != id || j["state"] != "succeeded") continue;
            json now = GetJson(job);
            EXPECT_EQ(now["state"], "succeeded") << "round " << round << ": " << now.dump();
            EXPECT_EQ(now["done"], 9) << "round " << round;
            const json list = GetJson("/api/v1/jobs");
            for (const auto& e : list["jobs"]) {
              if (e["id"] == id) {
                EXPECT_EQ(e["state"], "succeeded") << "round " << round;
              }
            }
            ended = true;
          }
          return !ended;
        },
        std::chrono::seconds(30));
    ASSERT_TRUE(st.ok()) << st.ToString();
    ASSERT_TRUE(ended) << "round " << round;
  }
  EXPECT_GT(reads.load(), 0);
}

// Reads that find the snapshot out of date wait for the loop's next
// refresh; the loop does one refresh per wave of them, however many wait
// (counted, not timed), and answers none of them itself.
TEST_F(RestApiTest, WaitingReadsCostTheLoopOneRefreshPerWaveWhateverTheirNumber) {
  Controller& c = cluster_->controller();
  auto wave = [&](int readers, uint64_t job) {
    const RestApiStats before = api_->stats();
    std::vector<HttpResponse> got(readers);
    std::vector<std::thread> threads;
    {
      // No snapshot can be published while the loop is held, so every read
      // below must wait.
      LoopBlocker blocker(c);
      const char* targets[] = {"/api/v1/jobs", "/metrics", "/api/v1/pool"};
      for (int i = 0; i < readers; ++i) {
        threads.emplace_back([&, i] { got[i] = Call("GET", targets[i % 3]); });
      }
      for (int i = 0; i < 1000 && api_->stats().parked - before.parked < uint64_t(readers); ++i) {
        std::this_thread::sleep_for(std::chrono::milliseconds(5));
      }
      EXPECT_EQ(api_->stats().parked - before.parked, uint64_t(readers));
    }
    for (auto& t : threads) t.join();
    const RestApiStats after = api_->stats();
    EXPECT_EQ(after.refreshes - before.refreshes, 1u) << readers << " readers";
    EXPECT_EQ(after.loop_requests, before.loop_requests) << readers << " readers";
    for (int i = 0; i < readers; ++i) {
      ASSERT_EQ(got[i].status, 200) << i << ": " << got[i].body;
      if (i % 3 != 0) continue;
      // The list is the one published for them: it holds the job made
      // before they read.
      bool listed = job == 0;
      const json list = json::parse(got[i].body);  // kept: see above
      for (const auto& j : list["jobs"]) listed |= j["id"] == job;
      EXPECT_TRUE(listed) << "job " << job << ", " << readers << " readers: " << got[i].body;
    }
  };
  // Nothing was published yet: the first reads wait.
  wave(12, 0);
  // A job submitted on the loop makes the published snapshot out of date
  // (a discrete change) until someone reads.
  for (int readers : {30, 90}) {
    auto id = cluster_->Call([&c] { return c.Submit({Chain(6)}); });
    ASSERT_TRUE(id.ok()) << id.status().ToString();
    wave(readers, *id);
  }
}

// A step of more than 20,000 runs gets its ratios walked off the loop (on
// the event feed's thread, from a copy): they still come back as numbers
// while the step runs.
TEST_F(RestApiTest, ALargeStepsRatiosComeBackFromTheFeedsThread) {
  json spec = {{"name", "large"}, {"tasks", json::array()}};
  // One long task keeps the step running after the noops are done.
  spec["tasks"].push_back({{"id", "long"}, {"kernel", "sleep"}, {"args", {{"us", 8000000}}}});
  for (int i = 0; i < 20'500; ++i) {
    spec["tasks"].push_back({{"id", "n" + std::to_string(i)}, {"kernel", "noop"}});
  }
  const uint64_t id = SubmitOk(spec.dump());
  WaitJob(id, [](const json& s) { return s["running"].get<int>() >= 1; });
  const std::string label =
      "hmpmd_step_bubble_ratio{job=\"" + std::to_string(id) + "\",step=\"0\"} ";
  std::string value;
  // The first figures of a large step come after its first second; poll the
  // feed's text (rendered on the loop) for up to 6 s, well inside the long
  // task's 8.
  for (int i = 0; i < 120; ++i) {
    const std::string text =
        cluster_->Call([this] { return feed_->PrometheusText(Controller::NowUs()); });
    const size_t at = text.find(label);
    ASSERT_NE(at, std::string::npos) << "the running step is not exported";
    value = text.substr(at + label.size(), text.find('\n', at) - at - label.size());
    if (value != "NaN") break;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  EXPECT_NE(value, "NaN");
  const double v = std::stod(value);
  EXPECT_GE(v, 0.0);
  EXPECT_LE(v, 1.0);
  EXPECT_EQ(Call("DELETE", "/api/v1/jobs/" + std::to_string(id)).status, 200);
}

// A read waiting for a fresh snapshot is answered on a thread of its own:
// on the formatting thread it waited behind the pause a trace's CPU cost
// under the budget (13 s for a 200,000-run trace at 10%). Here the budget
// is 0.1% of a core, so a trace of 6,000 runs leaves the formatter in debt
// for seconds; reads while a job makes progress (each waits for a fresh
// snapshot) must not wait for that. The job is small so that it finishes
// in seconds under TSan too.
TEST_F(RestApiTest, AReadAfterALargeTraceDoesNotWaitForTheFormattersBudget) {
  RestApiOptions o;
  o.cpu_budget = std::make_shared<CpuBudget>(CpuBudgetOptions{.percent = 0.1});
  RestApi api(&cluster_->controller(), &cluster_->controller().tokens(), SpecLimits{}, o);
  HttpServerOptions ho;
  ho.bind = "127.0.0.1:0";
  HttpServer server(ho, [&api](HttpRequest req, HttpReply reply) {
    api.Handle(std::move(req), std::move(reply));
  });
  ASSERT_TRUE(server.Start().ok());
  const HttpUrl url = *ParseHttpUrl("127.0.0.1:" + std::to_string(server.port()));
  const std::map<std::string, std::string> auth = {
      {"Authorization", std::string("Bearer ") + kToken}};

  // Through this API alone: it took the controller's snapshot hook.
  auto call = [&](const std::string& method, const std::string& target, const std::string& body) {
    auto r = HttpCall(url, method, target, body, auth, std::chrono::seconds(10));
    EXPECT_TRUE(r.ok()) << r.status().ToString();
    return r.ok() ? *r : HttpResponse{599, "", "", {}};
  };
  json spec = json::parse(Chain(10));
  spec["repeat"] = 600;
  HttpResponse submitted = call("POST", "/api/v1/jobs", spec.dump());
  ASSERT_EQ(submitted.status, 201) << submitted.body;
  const uint64_t id = json::parse(submitted.body)["id"].get<uint64_t>();
  std::string state;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(120);
  while (state != "succeeded" && std::chrono::steady_clock::now() < deadline) {
    if (!state.empty()) std::this_thread::sleep_for(std::chrono::milliseconds(50));
    state =
        json::parse(call("GET", "/api/v1/jobs/" + std::to_string(id), "").body).value("state", "");
  }
  ASSERT_EQ(state, "succeeded");
  auto trace = HttpCall(url, "GET", "/api/v1/jobs/" + std::to_string(id) + "/trace", "", auth,
                        std::chrono::seconds(60));
  ASSERT_TRUE(trace.ok()) << trace.status().ToString();
  ASSERT_EQ(trace->status, 200);
  // A job making progress: a read then waits for the next snapshot.
  HttpResponse busy =
      call("POST", "/api/v1/jobs",
           R"({"repeat":100000,"tasks":[{"id":"a","kernel":"sleep","args":{"us":500}}]})");
  ASSERT_EQ(busy.status, 201) << busy.body;
  const std::string busy_path = "/api/v1/jobs/" + json::parse(busy.body)["id"].dump();
  for (int i = 0; i < 3; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(150));  // progress goes stale
    auto jobs = HttpCall(url, "GET", "/api/v1/jobs", "", auth, std::chrono::seconds(3));
    ASSERT_TRUE(jobs.ok()) << jobs.status().ToString();
    EXPECT_EQ(jobs->status, 200);
    EXPECT_EQ(json::parse(jobs->body)["jobs"].size(), 2u);
  }
  EXPECT_EQ(call("DELETE", busy_path, "").status, 200);
  server.Stop();
}

}  // namespace
}  // namespace hmpmd::testing
