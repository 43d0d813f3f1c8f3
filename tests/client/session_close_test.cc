// The driver's Close() and its timeouts, against an in-process controller
// without workers (so that a task never ends on its own).
#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <future>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "hmpmd/client/client.h"
#include "in_process_controller.h"

namespace hmpmd {
namespace {

using client::Call;
using client::Client;
using client::ClientOptions;
using client::Future;
using client::kForever;

class SessionCloseTest : public InProcessControllerTest {
 protected:
  // Returns once the controller has every task submitted so far (an abort
  // drops what is not sent): Cancel() waits for the ack of one more.
  static void WaitUntilSent(Client& c) {
    Future marker = c.Submit({.kernel = "noop"}).value();
    ASSERT_TRUE(c.Cancel(marker).ok());
  }
};

// Runs `fn` on its own thread; a hang fails the test and ends the process
// (the hung thread cannot be joined).
template <typename Fn>
auto Bounded(Fn fn, const char* what) {
  auto done = std::async(std::launch::async, std::move(fn));
  if (done.wait_for(std::chrono::seconds(60)) != std::future_status::ready) {
    std::fprintf(stderr, "%s: still blocked after 60 s\n", what);
    std::_Exit(1);
  }
  return done.get();
}

TEST_F(SessionCloseTest, TwoCloseCallsAtOnceBothReturnItsStatus) {
  ClientOptions o = Options();
  o.close_timeout_ms = 1000;
  auto c = Connect(o);
  ASSERT_NE(c, nullptr);
  // No worker runs it: the close waits its whole timeout.
  Future f = c->Submit({.kernel = "noop"}).value();
  Status first, second;
  Bounded(
      [&] {
        std::thread a([&] { first = c->Close(); });
        std::thread b([&] { second = c->Close(); });
        a.join();
        b.join();
      },
      "two Close() calls");
  EXPECT_EQ(first.code(), StatusCode::kDeadlineExceeded) << first.ToString();
  EXPECT_EQ(second.ToString(), first.ToString());
  EXPECT_EQ(Bounded([&] { return c->Close(); }, "a third Close()").ToString(), first.ToString());
  EXPECT_EQ(f.Wait(0).code(), StatusCode::kUnavailable);
}

TEST_F(SessionCloseTest, FuturesNotAcknowledgedWhenCloseTimesOutAreLost) {
  ClientOptions o = Options();
  o.close_timeout_ms = 0;
  auto c = Connect(o);
  ASSERT_NE(c, nullptr);
  std::vector<Future> fs = c->SubmitGraph(std::vector<Call>(100, Call{.kernel = "noop"})).value();
  for (int i = 0; i < 100; ++i) fs.push_back(c->Submit({.kernel = "noop"}).value());
  Status closed = c->Close();
  EXPECT_EQ(closed.code(), StatusCode::kDeadlineExceeded) << closed.ToString();
  // Acknowledged or not, sent or not: each ends, none is left pending.
  for (size_t i = 0; i < fs.size(); ++i) {
    Status st = fs[i].Wait(10000);
    ASSERT_EQ(st.code(), StatusCode::kUnavailable) << i << ": " << st.ToString();
    EXPECT_NE(st.message().find("the session was closed"), std::string::npos) << st.message();
  }
}

TEST_F(SessionCloseTest, HugeTimeoutsWaitInsteadOfExpiringAtOnce) {
  // Past about 9.2e12 ms, now + timeout wrapped the clock: each of these
  // failed at once, naming the huge wait.
  ClientOptions o = Options();
  o.connect_timeout_ms = INT64_MAX / 2;
  o.close_timeout_ms = int64_t{10'000'000'000'000};
  auto c = Connect(o);
  ASSERT_NE(c, nullptr);
  Future f = c->Submit({.kernel = "noop"}).value();
  Status waited;
  Result<size_t> any = Status::Internal("not run");
  std::thread waiter([&] { waited = f.Wait(INT64_MAX); });
  std::thread any_waiter([&] {
    std::vector<Future> one = {f};
    any = c->WaitAny(one, int64_t{10'000'000'000'000});
  });
  EXPECT_TRUE(Bounded([&] { return c->Cancel(f); }, "Cancel()").ok());
  Bounded(
      [&] {
        waiter.join();
        any_waiter.join();
      },
      "Wait(INT64_MAX)");
  EXPECT_EQ(waited.code(), StatusCode::kCancelled) << waited.ToString();
  EXPECT_TRUE(any.ok()) << any.status().ToString();
  Status closed = Bounded([&] { return c->Close(); }, "Close()");
  EXPECT_NE(closed.code(), StatusCode::kDeadlineExceeded) << closed.ToString();
}

TEST_F(SessionCloseTest, AbortEndsPendingFuturesWithoutWaitingForThem) {
  ClientOptions o = Options();
  o.close_timeout_ms = kForever;  // Close() would wait for ever: no worker runs them
  auto c = Connect(o);
  ASSERT_NE(c, nullptr);
  std::vector<Future> fs = c->SubmitGraph(std::vector<Call>(10, Call{.kernel = "noop"})).value();
  WaitUntilSent(*c);
  Status aborted = Bounded([&] { return c->Abort(); }, "Abort()");
  // The controller confirmed: the session's job was cancelled.
  EXPECT_EQ(aborted.code(), StatusCode::kAborted) << aborted.ToString();
  EXPECT_NE(aborted.message().find("cancelled"), std::string::npos) << aborted.message();
  for (size_t i = 0; i < fs.size(); ++i) {
    Status st = fs[i].Wait(0);
    EXPECT_EQ(st.code(), StatusCode::kCancelled) << i << ": " << st.ToString();
    EXPECT_NE(st.message().find("the session was aborted"), std::string::npos) << st.message();
  }
  EXPECT_EQ(c->in_flight(), 0u);
  EXPECT_EQ(c->Submit({.kernel = "noop"}).status().code(), StatusCode::kInvalidArgument);
  // Idempotent, as Close() after it.
  EXPECT_EQ(c->Abort().ToString(), aborted.ToString());
  EXPECT_EQ(c->Close().ToString(), aborted.ToString());
}

TEST_F(SessionCloseTest, PollCloseWaitsInSlicesAndAnAbortEndsIt) {
  ClientOptions o = Options();
  auto c = Connect(o);
  ASSERT_NE(c, nullptr);
  EXPECT_EQ(c->PollClose(0)->code(), StatusCode::kInvalidArgument);
  Future f = c->Submit({.kernel = "noop"}).value();  // never runs: no worker
  WaitUntilSent(*c);
  c->BeginClose(Client::CloseMode::kFinish, kForever);
  EXPECT_FALSE(c->PollClose(0).has_value());
  EXPECT_FALSE(c->PollClose(20).has_value());
  EXPECT_FALSE(f.ready());  // a close still waits for it
  c->BeginClose(Client::CloseMode::kAbort, kForever);
  std::optional<Status> done = Bounded(
      [&] {
        std::optional<Status> d;
        while (!(d = c->PollClose(50))) {
        }
        return d;
      },
      "PollClose() after an abort");
  EXPECT_EQ(done->code(), StatusCode::kAborted) << done->ToString();
  EXPECT_EQ(f.Wait(0).code(), StatusCode::kCancelled);
  EXPECT_EQ(c->PollClose(0)->ToString(), done->ToString());
}

TEST_F(SessionCloseTest, AnAbortThatStopsWaitingAtOnceStillEndsEverything) {
  auto c = Connect(Options());
  ASSERT_NE(c, nullptr);
  Future f = c->Submit({.kernel = "noop"}).value();
  c->BeginClose(Client::CloseMode::kAbort, 0);
  std::optional<Status> done = c->PollClose(kForever);
  ASSERT_TRUE(done.has_value());
  EXPECT_EQ(f.Wait(0).code(), StatusCode::kCancelled);
  EXPECT_EQ(c->Close().ToString(), done->ToString());
}

}  // namespace
}  // namespace hmpmd
