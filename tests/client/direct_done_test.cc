// The worker that ran a driver's task tells the driver itself
// (ClientOptions::direct_done), beside the controller: a Future ends while
// the controller's process is stopped, and only the controller tells a
// session that turned it off.
#include <gtest/gtest.h>
#include <signal.h>

#include "../integration/process_cluster_fixture.h"
#include "hmpmd/client/client.h"

namespace hmpmd::testing {
namespace {

using client::Client;
using client::ClientOptions;
using client::Future;

class DirectDoneTest : public ProcessClusterFixture {
 protected:
  DirectDoneTest() : ProcessClusterFixture("hmpmd_direct") {}
  void SetUp() override {
    ProcessClusterFixture::SetUp();
    ASSERT_TRUE(cluster_->StartController().ok());
    ASSERT_TRUE(cluster_->StartWorker().ok());
    ASSERT_TRUE(cluster_->WaitWorkers(1, 20000));
  }
  void TearDown() override {
    if (stopped_) ::kill(cluster_->controller_pid(), SIGCONT);
    ProcessClusterFixture::TearDown();
  }
  std::unique_ptr<Client> Connect(bool direct_done) {
    ClientOptions o;
    o.controller = cluster_->zmq_endpoint();
    o.session = "direct";
    o.direct_done = direct_done;
    auto c = Client::Connect(o);
    EXPECT_TRUE(c.ok()) << c.status().ToString();
    return c.ok() ? std::move(c).value() : nullptr;
  }
  // Submits a task that sleeps 400 ms, waits until it is on its worker,
  // then stops the controller's process; the Future of the task.
  Future SleepBehindAStoppedController(Client& c) {
    Future f = c.Submit({.kernel = "sleep", .args = {{"us", int64_t{400'000}}}}).value();
    const std::string path = "/api/v1/jobs/" + std::to_string(c.job()) + "/tasks";
    bool placed = false;
    for (int i = 0; i < 500 && !placed; ++i) {
      auto tasks = cluster_->Get(path);
      const std::string state = tasks.is_object() && tasks["tasks"].size() == 1
                                    ? tasks["tasks"][0].value("state", "")
                                    : "";
      placed = state == "queued" || state == "running";
      if (!placed) std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    EXPECT_TRUE(placed) << "the task never reached its worker";
    EXPECT_EQ(::kill(cluster_->controller_pid(), SIGSTOP), 0);
    stopped_ = true;
    return f;
  }
  void ResumeController() {
    ASSERT_EQ(::kill(cluster_->controller_pid(), SIGCONT), 0);
    stopped_ = false;
  }

  bool stopped_ = false;
};

TEST_F(DirectDoneTest, AFutureEndsOnItsWorkersWordWhileTheControllerIsStopped) {
  auto c = Connect(/*direct_done=*/true);
  ASSERT_NE(c, nullptr);
  Future f = SleepBehindAStoppedController(*c);
  Status s = f.Wait(10'000);
  EXPECT_TRUE(s.ok()) << s.ToString();
  ResumeController();
  // The controller's word follows and changes nothing; the session closes.
  EXPECT_TRUE(c->Close().ok());
}

TEST_F(DirectDoneTest, OffOnlyTheControllerTells) {
  auto c = Connect(/*direct_done=*/false);
  ASSERT_NE(c, nullptr);
  Future f = SleepBehindAStoppedController(*c);
  EXPECT_FALSE(f.Wait(1500).ok()) << "ended with the controller stopped";
  ResumeController();
  Status s = f.Wait(10'000);
  EXPECT_TRUE(s.ok()) << s.ToString();
  EXPECT_TRUE(c->Close().ok());
}

// A cancel asked for before the worker's word: the controller decides
// (it may have the run done, or cancel it), and the Future ends as it says,
// never done on the worker's word while the controller calls it cancelled.
TEST_F(DirectDoneTest, ACancelAskedForFirstIsTheControllersToEnd) {
  auto c = Connect(/*direct_done=*/true);
  ASSERT_NE(c, nullptr);
  Future f = SleepBehindAStoppedController(*c);
  ASSERT_TRUE(c->Cancel(f).ok());
  EXPECT_FALSE(f.Wait(1000).ok()) << "ended on the worker's word after a cancel";
  ResumeController();
  const Status s = f.Wait(10'000);
  ASSERT_TRUE(s.ok() || s.code() == StatusCode::kCancelled) << s.ToString();
  (void)c->Close();
  auto tasks = cluster_->Get("/api/v1/jobs/" + std::to_string(c->job()) + "/tasks");
  ASSERT_EQ(tasks["tasks"].size(), 1u) << tasks.dump();
  EXPECT_EQ(tasks["tasks"][0].value("state", ""), s.ok() ? "done" : "cancelled") << s.ToString();
}

}  // namespace
}  // namespace hmpmd::testing
