// CpuBudget's arithmetic on a fake clock (what a charge costs, when a thread
// must pause, how long, and that over any run the group gets no more than
// its share plus the burst), and an HttpServer under a budget that its
// handler overdraws: every request is still answered, correctly, after
// pauses. Counts and CPU-clock readings only; no wall-clock thresholds.
#include "hmpmd/http/cpu_budget.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <future>
#include <string>
#include <thread>
#include <vector>

#include "hmpmd/api/rest_api.h"
#include "hmpmd/http/http_client.h"
#include "hmpmd/http/http_server.h"

namespace hmpmd {
namespace {

using std::chrono::microseconds;

struct FakeClock {
  int64_t now_us = 1'000'000;
  CpuBudget::NowFn Fn() {
    return [this] { return now_us; };
  }
};

CpuBudgetOptions Budget(double percent, int64_t burst_us) {
  CpuBudgetOptions o;
  o.percent = percent;
  o.burst = microseconds(burst_us);
  return o;
}

TEST(CpuBudgetTest, ChargesWithinTheBurstDoNotPause) {
  FakeClock clock;
  CpuBudget b(Budget(25, 10'000), clock.Fn());
  EXPECT_EQ(b.Charge(4'000), microseconds(0));
  EXPECT_EQ(b.Charge(6'000), microseconds(0));  // exactly the burst
  EXPECT_EQ(b.stats().pauses, 0u);
  EXPECT_EQ(b.stats().charged_us, 10'000u);
}

TEST(CpuBudgetTest, DebtPausesForTheTimeTheShareTakesToRepayIt) {
  FakeClock clock;
  CpuBudget b(Budget(25, 10'000), clock.Fn());
  // 2 ms over the burst at 25% of a core: 8 ms of wall time to repay.
  auto pause = b.Charge(12'000);
  EXPECT_GE(pause.count(), 8'000);
  EXPECT_LE(pause.count(), 8'001);
  EXPECT_EQ(b.stats().pauses, 1u);
  // After the pause the bucket is at zero: the next CPU is debt again.
  clock.now_us += pause.count();
  auto next = b.Charge(1'000);
  EXPECT_GE(next.count(), 3'999);
  EXPECT_LE(next.count(), 4'001);
}

TEST(CpuBudgetTest, IdleTimeRefillsNoMoreThanTheBurst) {
  FakeClock clock;
  CpuBudget b(Budget(50, 5'000), clock.Fn());
  EXPECT_GT(b.Charge(5'000 + 1'000).count(), 0);
  clock.now_us += 60'000'000;  // a minute idle
  EXPECT_EQ(b.Charge(5'000), microseconds(0));
  EXPECT_GT(b.Charge(1'000).count(), 0);  // the minute did not bank 30 s of CPU
}

TEST(CpuBudgetTest, ThreadsThatHonourThePausesGetTheirShareAndNoMore) {
  // Three "threads" take turns working 700 us at a time and sleeping the
  // pauses they are given (the fake clock advances by the work and by the
  // pauses); over the whole run the CPU they got is the share of the wall
  // time, plus at most the burst and one unit of work.
  for (double percent : {5.0, 25.0, 80.0, 150.0}) {
    FakeClock clock;
    CpuBudget b(Budget(percent, 20'000), clock.Fn());
    const int64_t start = clock.now_us;
    int64_t cpu = 0;
    for (int i = 0; i < 3000; ++i) {
      clock.now_us += 700 / 3;  // three threads share the wall time
      cpu += 700;
      auto pause = b.Charge(700);
      clock.now_us += pause.count();
    }
    const double wall = static_cast<double>(clock.now_us - start);
    EXPECT_LE(static_cast<double>(cpu), wall * percent / 100 + 20'000 + 700) << percent;
    // ... and the pauses are no longer than needed: the share is used.
    EXPECT_GE(static_cast<double>(cpu), wall * percent / 100 * 0.95) << percent;
    EXPECT_EQ(b.stats().charged_us, static_cast<uint64_t>(cpu));
  }
}

TEST(CpuBudgetTest, ServerOverItsBudgetPausesAndStillAnswersEveryRequestCorrectly) {
  CpuBudgetOptions bo = Budget(20, 2'000);
  auto budget = std::make_shared<CpuBudget>(bo);
  HttpServerOptions o;
  o.bind = "127.0.0.1:0";
  o.cpu_budget = budget;
  // Each request costs the server thread 1 ms of its own CPU: 60 of them are
  // 30 times the burst, so the server must pause to stay at its share.
  constexpr int64_t kWorkUs = 1'000;
  HttpServer server(o, [](HttpRequest req, HttpReply reply) {
    const int64_t until = CpuBudget::ThreadCpuUs() + kWorkUs;
    uint64_t spin = 0;
    while (CpuBudget::ThreadCpuUs() < until) ++spin;
    HttpResponse r;
    r.body = "{\"path\":\"" + req.path + "\",\"spun\":" + std::to_string(spin > 0) + "}";
    reply(std::move(r));
  });
  ASSERT_TRUE(server.Start().ok());
  HttpUrl url{"127.0.0.1", std::to_string(server.port()), ""};
  constexpr int kClients = 3, kEach = 20;
  std::atomic<int> good{0};
  std::vector<std::thread> clients;
  for (int c = 0; c < kClients; ++c) {
    clients.emplace_back([&, c] {
      for (int i = 0; i < kEach; ++i) {
        const std::string path = "/c" + std::to_string(c) + "/" + std::to_string(i);
        auto r = HttpCall(url, "GET", path, "", {}, std::chrono::seconds(30));
        if (r.ok() && r->status == 200 && r->body == "{\"path\":\"" + path + "\",\"spun\":1}") {
          ++good;
        }
      }
    });
  }
  for (auto& t : clients) t.join();
  server.Stop();
  EXPECT_EQ(good.load(), kClients * kEach);
  const CpuBudgetStats s = budget->stats();
  EXPECT_GT(s.pauses, 0u);
  // Everything the handler burnt was charged (the server thread's clock is
  // read at least once a millisecond of wall time while it works).
  EXPECT_GE(s.charged_us, static_cast<uint64_t>(kClients * kEach - 1) * kWorkUs);
}

TEST(CpuBudgetTest, ASpecsParseIsChargedToItsOwnBudgetAndReadsGoOnMeanwhile) {
  ControllerOptions co;
  co.listen = "tcp://127.0.0.1:0";
  Controller c(co);
  ASSERT_TRUE(c.Start().ok());
  std::thread loop([&c] { c.Run(); });
  // The request threads' budget is roomy; the parser's is 1% of a core.
  auto http_budget = std::make_shared<CpuBudget>(Budget(100, 1'000'000));
  auto parse_budget = std::make_shared<CpuBudget>(Budget(1, 0));
  RestApiOptions ao;
  ao.cpu_budget = http_budget;
  ao.parse_budget = parse_budget;
  auto api = std::make_unique<RestApi>(&c, nullptr, SpecLimits{}, ao);
  HttpServerOptions so;
  so.bind = "127.0.0.1:0";
  so.cpu_budget = http_budget;
  HttpServer server(so, [&api](HttpRequest req, HttpReply reply) {
    api->Handle(std::move(req), std::move(reply));
  });
  ASSERT_TRUE(server.Start().ok());
  HttpUrl url{"127.0.0.1", std::to_string(server.port()), ""};
  const std::map<std::string, std::string> json = {{"Content-Type", "application/json"}};
  const std::string spec = R"({"name":"p","tasks":[{"id":"a","kernel":"noop"}]})";
  auto post = [&] {
    auto r = HttpCall(url, "POST", "/api/v1/jobs", spec, json, std::chrono::seconds(60));
    return r.ok() ? r->status : 0;
  };
  EXPECT_EQ(post(), 201);
  // Its parse is charged after the answer is on its way.
  for (int i = 0; i < 500 && parse_budget->stats().charged_us == 0; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  // As if the parser had just taken ten minutes of CPU: the next spec is
  // parsed, then the parser pauses before the one after.
  (void)parse_budget->Charge(6'000'000);
  EXPECT_EQ(post(), 201);
  std::atomic<int> third{-1};
  std::thread waiting([&] { third = post(); });
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  auto pool = HttpCall(url, "GET", "/api/v1/pool", "", {}, std::chrono::seconds(30));
  EXPECT_TRUE(pool.ok() && pool->status == 200) << "a read does not wait for the parser";
  EXPECT_EQ(third.load(), -1) << "the third spec waits for the parser's budget";
  EXPECT_GT(parse_budget->stats().charged_us, 6'000'000u) << "each parse is charged there";
  api.reset();  // the parser stops pausing: it parses the third spec, which is answered
  waiting.join();
  EXPECT_EQ(third.load(), 201);
  server.Stop();
  c.Stop();
  loop.join();
}

}  // namespace
}  // namespace hmpmd
