// The driver API against a real controller and real worker processes.
#include "hmpmd/client/client.h"

#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <set>

#include "../integration/process_cluster.h"

namespace hmpmd::testing {
namespace {

using client::Call;
using client::Client;
using client::ClientOptions;
using client::Future;

std::vector<float> Floats(const Buffer& b) {
  std::vector<float> v(b.data.size() / 4);
  if (!v.empty()) std::memcpy(v.data(), b.data.data(), v.size() * 4);
  return v;
}

class ClientTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() /
           ("hmpmd_client_" + std::to_string(::getpid()) + "_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::remove_all(dir_);
    std::filesystem::create_directories(dir_);
    cluster_ = std::make_unique<ProcessCluster>(dir_.string());
    if (std::getenv("HMPMD_TEST_LOG")) cluster_->set_log_level(std::getenv("HMPMD_TEST_LOG"));
    ASSERT_TRUE(cluster_->StartController().ok());
    for (int i = 0; i < 2; ++i) ASSERT_TRUE(cluster_->StartWorker().ok());
    // Both workers registered before the session starts.
    for (int i = 0; i < 250; ++i) {
      auto pool = cluster_->Get("/api/v1/pool");
      if (pool.is_object() && pool.value("alive_devices", 0) >= 2) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
  }
  void TearDown() override {
    cluster_.reset();
    if (!HasFailure()) std::filesystem::remove_all(dir_);  // logs stay for a failure
  }
  std::unique_ptr<Client> Connect(std::string session = "test") {
    ClientOptions o;
    o.controller = cluster_->zmq_endpoint();
    o.session = std::move(session);
    auto c = Client::Connect(o);
    EXPECT_TRUE(c.ok()) << c.status().ToString();
    return c.ok() ? std::move(c).value() : nullptr;
  }

  std::filesystem::path dir_;
  std::unique_ptr<ProcessCluster> cluster_;
};

TEST_F(ClientTest, ChainedFuturesMoveDataBetweenWorkers) {
  auto c = Connect("chain");
  ASSERT_NE(c, nullptr);
  // Independent chains side by side, so both workers take part.
  std::vector<Future> xs, zs;
  for (int i = 0; i < 8; ++i) {
    Future x =
        c->Submit({.kernel = "scale", .args = {{"n", int64_t{64}}, {"factor", 2.0}}}).value();
    Future y = c->Submit({.kernel = "scale", .args = {{"factor", 3.0}}, .inputs = {x}}).value();
    Future z = c->Submit({.kernel = "add", .inputs = {x, y}}).value();
    xs.push_back(x);
    zs.push_back(z);
  }
  for (int i = 0; i < 8; ++i) {
    auto x = xs[i].Get(20000);
    auto z = zs[i].Get(20000);
    ASSERT_TRUE(x.ok()) << x.status().ToString();
    ASSERT_TRUE(z.ok()) << z.status().ToString();
    ASSERT_EQ(z->size(), 1u);
    std::vector<float> xv = Floats((*x)[0]), zv = Floats((*z)[0]);
    ASSERT_EQ(xv.size(), 64u);
    ASSERT_EQ(zv.size(), 64u);
    for (size_t k = 0; k < xv.size(); ++k) EXPECT_FLOAT_EQ(zv[k], xv[k] * 4.0f) << k;
  }
  EXPECT_TRUE(c->Close().ok());
  std::set<pid_t> pids;
  for (const auto& e : cluster_->ReadExecLog()) {
    if (e.job == c->job()) pids.insert(e.pid);
  }
  EXPECT_EQ(pids.size(), 2u) << "every chain ran on one worker";
}

TEST_F(ClientTest, WaitAnyReturnsTheFirstToEnd) {
  auto c = Connect();
  ASSERT_NE(c, nullptr);
  Future slow = c->Submit({.kernel = "sleep", .args = {{"us", int64_t{3'000'000}}}}).value();
  Future fast = c->Submit({.kernel = "noop"}).value();
  std::vector<Future> both = {slow, fast};
  auto first = c->WaitAny(both, 20000);
  ASSERT_TRUE(first.ok()) << first.status().ToString();
  EXPECT_EQ(*first, 1u);
  EXPECT_FALSE(slow.ready());
  auto none = c->WaitAny(std::vector<Future>{slow}, 10);
  EXPECT_EQ(none.status().code(), StatusCode::kDeadlineExceeded);
  EXPECT_TRUE(c->Close().ok());
}

TEST_F(ClientTest, CancelStopsASpinAndFailsItsDependents) {
  auto c = Connect();
  ASSERT_NE(c, nullptr);
  Future spin = c->Submit({.kernel = "spin", .args = {{"us", int64_t{60'000'000}}}}).value();
  Future after = c->Submit({.kernel = "noop", .inputs = {spin}}).value();
  // Let it start on a worker first.
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  ASSERT_TRUE(c->Cancel(spin).ok());
  Status s = spin.Wait(20000);
  EXPECT_EQ(s.code(), StatusCode::kCancelled) << s.ToString();
  Status d = after.Wait(20000);
  EXPECT_EQ(d.code(), StatusCode::kCancelled) << d.ToString();
  EXPECT_NE(d.message().find("cancelled"), std::string::npos) << d.message();
  // The worker's lane is free again: a new task runs.
  Future next = c->Submit({.kernel = "noop"}).value();
  EXPECT_TRUE(next.Wait(20000).ok());
  Status closed = c->Close();
  EXPECT_EQ(closed.code(), StatusCode::kAborted) << closed.ToString();
}

TEST_F(ClientTest, AFailingKernelsMessageReachesTheDriver) {
  auto c = Connect();
  ASSERT_NE(c, nullptr);
  Future bad =
      c->Submit({.kernel = "scale", .args = {{"factor", std::string("x")}}, .label = "t3"}).value();
  Future dep = c->Submit({.kernel = "noop", .inputs = {bad}}).value();
  Status s = bad.Wait(20000);
  EXPECT_EQ(s.code(), StatusCode::kAborted);
  EXPECT_EQ(s.message(), "task 't3' failed: scale: argument 'factor' must be a finite number");
  Status d = dep.Wait(20000);
  EXPECT_EQ(d.code(), StatusCode::kAborted);
  EXPECT_NE(d.message().find("input 't3' failed"), std::string::npos) << d.message();
  // The session goes on.
  EXPECT_TRUE(c->Submit({.kernel = "noop"}).value().Wait(20000).ok());
  Status closed = c->Close();
  EXPECT_EQ(closed.code(), StatusCode::kAborted);
  auto job = cluster_->Get("/api/v1/jobs/" + std::to_string(c->job()));
  EXPECT_EQ(job.value("state", ""), "failed") << job.dump();
}

TEST_F(ClientTest, TwoThousandTasksInFlight) {
  auto c = Connect("many");
  ASSERT_NE(c, nullptr);
  std::vector<Future> fs;
  fs.reserve(2000);
  for (int i = 0; i < 2000; ++i) {
    std::vector<Future> in;
    if (i >= 100) in.push_back(fs[i - 100]);
    fs.push_back(c->Submit({.kernel = "noop", .inputs = std::move(in)}).value());
  }
  EXPECT_GT(c->in_flight(), 0u);
  for (auto& f : fs) ASSERT_TRUE(f.Wait(60000).ok());
  EXPECT_EQ(c->in_flight(), 0u);
  EXPECT_TRUE(c->Close().ok());
  auto job = cluster_->Get("/api/v1/jobs/" + std::to_string(c->job()));
  EXPECT_EQ(job.value("state", ""), "succeeded") << job.dump();
  EXPECT_EQ(job.value("name", ""), "many");
}

TEST_F(ClientTest, BadCallsGetOneLineErrors) {
  auto c = Connect("a");
  auto other = Connect("b");
  ASSERT_NE(c, nullptr);
  ASSERT_NE(other, nullptr);
  Future theirs = other->Submit({.kernel = "noop"}).value();
  auto cross = c->Submit({.kernel = "noop", .inputs = {theirs}});
  ASSERT_FALSE(cross.ok());
  EXPECT_EQ(cross.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(cross.status().message().find("belongs to another session"), std::string::npos);

  ASSERT_TRUE(c->Submit({.kernel = "noop", .label = "x"}).ok());
  auto dup = c->Submit({.kernel = "noop", .label = "x"});
  EXPECT_EQ(dup.status().message(), "call 0 'x': label: duplicate 'x' in this session");

  auto unknown = c->Submit({.kernel = "no_such_kernel", .label = "u"});
  ASSERT_TRUE(unknown.ok());
  Status s = unknown->Wait(20000);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("task 'u' rejected: tasks[1] 'u': kernel: no worker runs "
                             "'no_such_kernel'"),
            std::string::npos)
      << s.message();
  EXPECT_EQ(c->Submit({.kernel = "noop", .actor = "ghost"}).status().message(),
            "call 0: actor: unknown actor 'ghost' (CreateActor first)");
  for (const std::string& m : {cross.status().message(), s.message()}) {
    EXPECT_EQ(m.find('\n'), std::string::npos) << m;
  }
  EXPECT_TRUE(c->Close().ok());
  EXPECT_TRUE(other->Close().ok());
}

TEST_F(ClientTest, ActorTasksRunInTheirSession) {
  auto c = Connect("actors");
  ASSERT_NE(c, nullptr);
  auto learner = c->CreateActor({.name = "learner", .kind = SubmodelKind::kLearner, .devices = 1});
  ASSERT_TRUE(learner.ok()) << learner.status().ToString();
  EXPECT_EQ(c->CreateActor({.name = "learner"}).status().code(), StatusCode::kAlreadyExists);
  std::vector<Future> steps;
  for (int i = 0; i < 6; ++i) {
    steps.push_back(learner->Call("spin", {.args = {{"us", int64_t{2000}}}}).value());
  }
  for (auto& f : steps) ASSERT_TRUE(f.Wait(20000).ok()) << f.Wait(0).ToString();
  EXPECT_TRUE(c->Close().ok());
  auto dag = cluster_->Get("/api/v1/jobs/" + std::to_string(c->job()) + "/dag");
  bool found = false;
  for (const auto& sm : dag.value("submodels", nlohmann::json::array())) {
    if (sm.value("name", "") == "learner") {
      found = true;
      EXPECT_EQ(sm.value("kind", ""), "learner");
      EXPECT_EQ(sm.value("done", 0), 6);
    }
  }
  EXPECT_TRUE(found) << dag.dump();
}

}  // namespace
}  // namespace hmpmd::testing
