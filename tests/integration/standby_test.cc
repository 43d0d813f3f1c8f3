// A hot standby (`hmpmd controller --standby`, docs/operations.md "Hot
// standby"): a second controller on the primary's store, with ports of its
// own, and workers given both endpoints. While the primary holds the store
// (running, or paused with SIGSTOP) the standby neither answers nor
// dispatches; once the primary is killed it takes over, the workers move to
// it, and the job goes on with no finished task run again.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include "hmpmd/client/client.h"
#include "process_cluster_fixture.h"

extern char** environ;

namespace hmpmd::testing {
namespace {

using Clock = std::chrono::steady_clock;

// `n` independent sleeps of `us`, then one task that takes them all.
std::string Spec(int n, int us) {
  nlohmann::json tasks = nlohmann::json::array();
  nlohmann::json all = nlohmann::json::array();
  for (int i = 0; i < n; ++i) {
    tasks.push_back({{"id", "s" + std::to_string(i)}, {"kernel", "sleep"}, {"args", {{"us", us}}}});
    all.push_back("s" + std::to_string(i));
  }
  tasks.push_back({{"id", "end"}, {"kernel", "noop"}, {"inputs", all}});
  return nlohmann::json{{"name", "failover"}, {"tasks", tasks}}.dump();
}

// The live devices `c` reports; 0 while it does not answer.
int Alive(ProcessCluster& c) {
  const nlohmann::json pool = c.Get("/api/v1/pool");
  return pool.is_object() ? pool.value("alive_devices", 0) : 0;
}

class StandbyTest : public ProcessClusterFixture {
 protected:
  StandbyTest() : ProcessClusterFixture("hmpmd-standby") {}
  void SetUp() override {
    ProcessClusterFixture::SetUp();
    std::filesystem::create_directories(Path("standby"));
    standby_ = std::make_unique<ProcessCluster>(Path("standby"));
    standby_->set_db(cluster_->db());
    cluster_->set_worker_controller(cluster_->zmq_endpoint() + "," + standby_->zmq_endpoint());
  }
  void TearDown() override {
    standby_.reset();
    ProcessClusterFixture::TearDown();
  }
  std::unique_ptr<ProcessCluster> standby_;
};

TEST_F(StandbyTest, TakesOverOnlyOnceThePrimaryIsGoneAndRunsNothingTwice) {
  ASSERT_TRUE(cluster_->StartController().ok());
  ASSERT_TRUE(standby_->StartController({"--standby"}, /*wait=*/false).ok());
  for (int i = 0; i < 2; ++i) ASSERT_TRUE(cluster_->StartWorker().ok());
  ASSERT_TRUE(cluster_->WaitWorkers(2, 30'000));
  constexpr int kTasks = 60;
  auto id = cluster_->Submit(Spec(kTasks, 50'000));
  ASSERT_TRUE(id.ok()) << id.status().ToString();
  WaitDone(*id, 8);

  // Paused, the primary still holds the store: the standby waits, and
  // answers nothing (no split brain).
  ASSERT_EQ(::kill(cluster_->controller_pid(), SIGSTOP), 0);
  std::this_thread::sleep_for(std::chrono::milliseconds(1500));
  EXPECT_TRUE(standby_->ControllerRunning());
  EXPECT_TRUE(standby_->Get("/api/v1/pool").is_null()) << "the standby serves beside its primary";
  ASSERT_EQ(::kill(cluster_->controller_pid(), SIGCONT), 0);
  WaitDone(*id, 20);
  EXPECT_TRUE(standby_->Get("/api/v1/pool").is_null());

  // Killed, it releases the store: the standby takes over, and the workers
  // move to it.
  const auto killed = Clock::now();
  cluster_->KillController();
  nlohmann::json job;
  for (int i = 0; i < 3000; ++i) {
    job = standby_->Get("/api/v1/jobs/" + std::to_string(*id));
    if (job.is_object() && Alive(*standby_) == 2) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  ASSERT_TRUE(job.is_object()) << "the standby never answered for the job";
  std::printf("standby serving with both workers %.2f s after the primary's kill\n",
              std::chrono::duration<double>(Clock::now() - killed).count());
  job = standby_->WaitJob(*id, 60'000);
  ASSERT_EQ(job.value("state", ""), "succeeded") << job.dump();
  // Both workers lived: every task ran exactly once, across the takeover.
  std::map<uint32_t, int> runs;
  for (const auto& e : cluster_->ReadExecLog()) {
    if (e.job == *id) ++runs[e.task];
  }
  ASSERT_EQ(runs.size(), static_cast<size_t>(kTasks + 1));
  for (const auto& [task, count] : runs) EXPECT_EQ(count, 1) << "task run " << task;
  // New work goes to the new primary.
  auto next = standby_->Submit(Spec(4, 1000));
  ASSERT_TRUE(next.ok()) << next.status().ToString();
  EXPECT_EQ(standby_->WaitJob(*next, 30'000).value("state", ""), "succeeded");
  EXPECT_NE(Slurp("standby/controller.log").find("taking over"), std::string::npos)
      << Slurp("standby/controller.log");
  // The workers moved because the connection closed, not at a time-out.
  EXPECT_NE(Slurp("worker.log").find("closed the connection; registering with the next"),
            std::string::npos)
      << Slurp("worker.log");
  EXPECT_EQ(Slurp("worker.log").find("nothing from the controller"), std::string::npos)
      << Slurp("worker.log");
}

// `hmpmd submit --wait --url A,B`, started against the primary, follows
// its job to the standby when the primary is killed, and fetches its
// outputs there.
TEST_F(StandbyTest, SubmitWaitWithBothUrlsFollowsTheJobToTheStandby) {
  ASSERT_TRUE(cluster_->StartController().ok());
  ASSERT_TRUE(standby_->StartController({"--standby"}, /*wait=*/false).ok());
  for (int i = 0; i < 2; ++i) ASSERT_TRUE(cluster_->StartWorker().ok());
  ASSERT_TRUE(cluster_->WaitWorkers(2, 30'000));
  std::ofstream(Path("job.json")) << Spec(40, 50'000);
  const std::string urls = cluster_->http_url() + "," + standby_->http_url();
  std::vector<std::string> args = {HMPMD_CLI_BIN,    "submit",   Path("job.json"), "--wait",
                                   "--wait-timeout", "60",       "--url",          urls,
                                   "--fetch",        Path("out")};
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  posix_spawn_file_actions_t files;
  posix_spawn_file_actions_init(&files);
  posix_spawn_file_actions_addopen(&files, 1, Path("submit.out").c_str(),
                                   O_WRONLY | O_CREAT | O_TRUNC, 0644);
  posix_spawn_file_actions_adddup2(&files, 1, 2);
  pid_t submit = -1;
  ASSERT_EQ(posix_spawn(&submit, argv[0], &files, nullptr, argv.data(), environ), 0);
  posix_spawn_file_actions_destroy(&files);
  WaitDone(1, 8);
  cluster_->KillController();
  // Bounded: --wait-timeout ends it within 60 s; past 90 it is killed.
  int status = -1;
  for (int i = 0; i < 9000 && ::waitpid(submit, &status, WNOHANG) == 0; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  if (::waitpid(submit, &status, WNOHANG) == 0) {
    ::kill(submit, SIGKILL);
    ::waitpid(submit, &status, 0);
    FAIL() << "submit --wait did not end: " << Slurp("submit.out");
  }
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << Slurp("submit.out");
  EXPECT_NE(Slurp("submit.out").find("job 1 'failover': succeeded"), std::string::npos)
      << Slurp("submit.out");
  EXPECT_TRUE(std::filesystem::exists(Path("out/manifest.json"))) << Slurp("submit.out");
}

// A driver given both endpoints opens its session with whichever is the
// primary: the standby first in the list is skipped once it completes no
// handshake; after a takeover, the old primary is.
TEST_F(StandbyTest, ADriverGivenBothEndpointsOpensWithThePrimary) {
  ASSERT_TRUE(cluster_->StartController().ok());
  ASSERT_TRUE(standby_->StartController({"--standby"}, /*wait=*/false).ok());
  ASSERT_TRUE(cluster_->StartWorker().ok());
  ASSERT_TRUE(cluster_->WaitWorkers(1, 30'000));
  auto run_one = [&](const std::string& endpoints) {
    client::ClientOptions o;
    o.controller = endpoints;
    o.connect_timeout_ms = 20'000;
    auto c = client::Client::Connect(o);
    ASSERT_TRUE(c.ok()) << endpoints << ": " << c.status().ToString();
    auto f = (*c)->Submit({.kernel = "noop"});
    ASSERT_TRUE(f.ok()) << f.status().ToString();
    EXPECT_TRUE(f->Wait(20'000).ok());
    EXPECT_TRUE((*c)->Close().ok());
  };
  run_one(standby_->zmq_endpoint() + "," + cluster_->zmq_endpoint());
  cluster_->KillController();
  for (int i = 0; i < 3000 && Alive(*standby_) < 1; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  run_one(cluster_->zmq_endpoint() + "," + standby_->zmq_endpoint());
  // Both sessions are jobs of the one store, each ended well.
  const nlohmann::json jobs = standby_->Get("/api/v1/jobs");
  ASSERT_TRUE(jobs.is_object());
  ASSERT_EQ(jobs["jobs"].size(), 2u) << jobs.dump();
  for (const auto& j : jobs["jobs"]) EXPECT_EQ(j["state"], "succeeded") << j.dump();
}

// A driver session open on the primary goes on on the standby once it
// takes over: the pending futures resolve there, the task running through
// the takeover runs once, and the session closes as succeeded.
TEST_F(StandbyTest, ADriverSessionGoesOnOnTheStandbyAfterATakeover) {
  ASSERT_TRUE(cluster_->StartController().ok());
  ASSERT_TRUE(standby_->StartController({"--standby"}, /*wait=*/false).ok());
  ASSERT_TRUE(cluster_->StartWorker().ok());
  ASSERT_TRUE(cluster_->WaitWorkers(1, 30'000));
  client::ClientOptions o;
  o.controller = cluster_->zmq_endpoint() + "," + standby_->zmq_endpoint();
  o.connect_timeout_ms = 20'000;
  o.heartbeat_ms = 100;
  auto c = client::Client::Connect(o);
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  auto first = (*c)->Submit({.kernel = "noop"});
  ASSERT_TRUE(first.ok() && first->Wait(20'000).ok());
  auto spin = (*c)->Submit({.kernel = "spin", .args = {{"us", int64_t{1'000'000}}}});
  ASSERT_TRUE(spin.ok());
  auto after = (*c)->Submit({.kernel = "noop", .inputs = {*spin}});
  ASSERT_TRUE(after.ok());
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  cluster_->KillController();
  Status s = after->Wait(30'000);
  EXPECT_TRUE(s.ok()) << s.ToString();
  auto next = (*c)->Submit({.kernel = "noop"});
  ASSERT_TRUE(next.ok()) << next.status().ToString();
  EXPECT_TRUE(next->Wait(20'000).ok());
  EXPECT_TRUE((*c)->Close().ok());
  const nlohmann::json job = standby_->Get("/api/v1/jobs/" + std::to_string((*c)->job()));
  EXPECT_EQ(job.value("state", ""), "succeeded") << job.dump();
  std::map<uint32_t, int> runs;
  for (const auto& e : cluster_->ReadExecLog()) {
    if (e.job == (*c)->job()) ++runs[e.task];
  }
  EXPECT_EQ(runs.size(), 4u);
  for (const auto& [task, n] : runs) EXPECT_EQ(n, 1) << "task " << task << " ran " << n << " times";
}

TEST_F(StandbyTest, AStandbyNeedsAStore) {
  const std::string out = Path("out.txt");
  const std::string cmd = std::string(HMPMD_CLI_BIN) +
                          " controller --standby --db '' --listen tcp://127.0.0.1:0 --http '' > " +
                          out + " 2>&1";
  EXPECT_NE(std::system(cmd.c_str()), 0);
  EXPECT_NE(Slurp("out.txt").find("--standby: needs --db, the primary's store"), std::string::npos)
      << Slurp("out.txt");
}

}  // namespace
}  // namespace hmpmd::testing
