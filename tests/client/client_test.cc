// The driver API against a real controller and real worker processes.
#include "hmpmd/client/client.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <signal.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>

#include "../integration/process_cluster.h"

namespace hmpmd::testing {
namespace {

using client::Call;
using client::Client;
using client::ClientOptions;
using client::Future;
using ::testing::HasSubstr;

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
    // A 16 MiB store: enough for every test's outputs, and a task whose
    // output is larger fails on the worker (a failure only it can see).
    for (int i = 0; i < 2; ++i) ASSERT_TRUE(cluster_->StartWorker({"--memory-mb", "16"}).ok());
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
  std::unique_ptr<Client> Connect(std::string session = "test", ClientOptions o = {}) {
    o.controller = cluster_->zmq_endpoint();
    o.session = std::move(session);
    auto c = Client::Connect(o);
    EXPECT_TRUE(c.ok()) << c.status().ToString();
    return c.ok() ? std::move(c).value() : nullptr;
  }

  // The index (in cluster_) of the worker that ran the first task of the
  // session's job, as REST says; -1, and the test failed, when none.
  int WorkerThatRanTheFirstTask(const Client& c) {
    auto tasks = cluster_->Get("/api/v1/jobs/" + std::to_string(c.job()) + "/tasks");
    const uint64_t device = tasks["tasks"][0].value("device", uint64_t{99});
    auto pool = cluster_->Get("/api/v1/pool");
    for (const auto& d : pool["devices"]) {
      if (d.value("id", uint64_t{0}) != device) continue;
      for (int i = 0; i < 2; ++i) {
        if (cluster_->worker_pid(i) == d.value("pid", -1)) return i;
      }
    }
    ADD_FAILURE() << "no worker ran task 0: " << tasks.dump() << " " << pool.dump();
    return -1;
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

TEST_F(ClientTest, AFutureOfAnEmptyTensorGetsThatTensor) {
  // 0 bytes is not "no outputs": an empty tensor is handed to consumers and
  // to Get(), in its place.
  auto c = Connect("empty");
  ASSERT_NE(c, nullptr);
  Future z = c->Submit({.kernel = "send", .args = {{"bytes", int64_t{0}}}}).value();
  Future a = c->Submit({.kernel = "send", .args = {{"bytes", int64_t{3}}}}).value();
  Future za = c->Submit({.kernel = "send", .inputs = {z, a}}).value();
  auto got = z.Get(20000);
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  ASSERT_EQ(got->size(), 1u);
  EXPECT_EQ((*got)[0].shape, std::vector<int64_t>{0});
  EXPECT_EQ(z.output_bytes(), 0u);
  got = za.Get(20000);
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  ASSERT_EQ(got->size(), 2u);
  EXPECT_EQ((*got)[0].shape, std::vector<int64_t>{0});
  EXPECT_EQ((*got)[1].shape, std::vector<int64_t>{3});
  EXPECT_TRUE(c->Close().ok());
}

TEST_F(ClientTest, AnInputNamedTwiceIsReadTwice) {
  // add(x, x) is x + x, on x's worker or the other one; the graph used to
  // keep x once, so add got one buffer and generated its data.
  auto c = Connect("twice");
  ASSERT_NE(c, nullptr);
  std::vector<Future> xs, ys, gs;
  for (int i = 0; i < 8; ++i) {
    Future x = c->Submit({.kernel = "scale", .args = {{"n", int64_t{4}}, {"factor", 2.0}}}).value();
    xs.push_back(x);
    ys.push_back(c->Submit({.kernel = "add", .inputs = {x, x}}).value());
    // A 2x2 matrix times itself.
    gs.push_back(c->Submit({.kernel = "gemm",
                            .args = {{"m", int64_t{2}}, {"n", int64_t{2}}, {"k", int64_t{2}}},
                            .inputs = {x, x}})
                     .value());
  }
  for (int i = 0; i < 8; ++i) {
    auto x = xs[i].Get(20000), y = ys[i].Get(20000), g = gs[i].Get(20000);
    ASSERT_TRUE(x.ok() && y.ok() && g.ok())
        << x.status().ToString() << y.status().ToString() << g.status().ToString();
    ASSERT_EQ(y->size(), 1u);
    ASSERT_EQ(g->size(), 1u);
    std::vector<float> xv = Floats((*x)[0]), yv = Floats((*y)[0]), gv = Floats((*g)[0]);
    ASSERT_EQ(yv.size(), 4u);
    for (size_t k = 0; k < 4; ++k) EXPECT_FLOAT_EQ(yv[k], xv[k] * 2.0f) << k;
    ASSERT_EQ(gv.size(), 4u);
    for (size_t r = 0; r < 2; ++r) {
      for (size_t col = 0; col < 2; ++col) {
        EXPECT_FLOAT_EQ(gv[r * 2 + col], xv[r * 2] * xv[col] + xv[r * 2 + 1] * xv[2 + col]);
      }
    }
  }
  EXPECT_TRUE(c->Close().ok());
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

TEST_F(ClientTest, CancelBeforeTheAckWaitsForItWithoutATimeout) {
  // connect_timeout_ms < 0 (no limit) also bounds Cancel's wait for the
  // task's ack; it used to give up at once with "not acknowledged".
  ClientOptions o;
  o.connect_timeout_ms = client::kForever;
  auto c = Connect("forever", o);
  ASSERT_NE(c, nullptr);
  for (int i = 0; i < 20; ++i) {
    Future spin = c->Submit({.kernel = "spin", .args = {{"us", int64_t{60'000'000}}}}).value();
    Status cancelled = c->Cancel(spin);
    ASSERT_TRUE(cancelled.ok()) << i << ": " << cancelled.ToString();
    Status s = spin.Wait(20000);
    EXPECT_EQ(s.code(), StatusCode::kCancelled) << s.ToString();
  }
  (void)c->Close();
}

TEST_F(ClientTest, AFailingKernelsMessageReachesTheDriver) {
  auto c = Connect();
  ASSERT_NE(c, nullptr);
  // Arguments in range, so accepted; the worker's 16 MiB store cannot
  // keep its 32 MiB output.
  Future bad =
      c->Submit({.kernel = "add", .args = {{"n", int64_t{1} << 23}}, .label = "t3"}).value();
  Future dep = c->Submit({.kernel = "noop", .inputs = {bad}}).value();
  Status s = bad.Wait(20000);
  EXPECT_EQ(s.code(), StatusCode::kAborted);
  EXPECT_EQ(s.message().rfind("task 't3' failed: object store: outputs of job", 0), 0)
      << s.message();
  EXPECT_NE(s.message().find("need 33554432 bytes"), std::string::npos) << s.message();
  // A gemm too large for a worker is refused when submitted.
  Status big = c->Submit({.kernel = "gemm",
                          .args = {{"m", int64_t{65536}}, {"n", int64_t{65536}}, {"k", int64_t{1}}},
                          .label = "big"})
                   .value()
                   .Wait(20000);
  EXPECT_EQ(big.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(big.message().find("'big': args: gemm's C (m x n) would have 4294967296 elements"),
            std::string::npos)
      << big.message();
  Status d = dep.Wait(20000);
  EXPECT_EQ(d.code(), StatusCode::kAborted);
  EXPECT_NE(d.message().find("input 't3' failed"), std::string::npos) << d.message();
  // A built-in's argument of the wrong type is refused, naming it.
  Status refused =
      c->Submit({.kernel = "scale", .args = {{"factor", std::string("x")}}}).value().Wait(20000);
  EXPECT_EQ(refused.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(refused.message().find("args.factor: expected a number, got a string"),
            std::string::npos)
      << refused.message();
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
  // A worker's gemm needs its sizes, as in a submitted job.
  auto gemm = c->Submit({.kernel = "gemm", .label = "g"});
  Status gemm_status = gemm.ok() ? gemm->Wait(20000) : gemm.status();
  EXPECT_EQ(gemm_status.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(gemm_status.message().find("'g': args.m: required"), std::string::npos)
      << gemm_status.message();
  // Refused when submitted: a bad label used to fail its task later and
  // its consumers as "unknown task".
  // The label is quoted escaped: the message stays one line.
  EXPECT_EQ(c->Submit({.kernel = "noop", .label = "bad\nlabel"}).status().message(),
            "call 0 'bad\\nlabel': label: contains the control character U+000A");
  EXPECT_EQ(c->Submit({.kernel = "noop", .label = "a\x1b[31m\x7f"}).status().message(),
            "call 0 'a\\x1b[31m\\x7f': label: contains the control character U+001B");
  EXPECT_EQ(c->Submit({.kernel = "bad\rkernel", .label = "k\n"}).status().message(),
            "call 0 'k\\n': kernel: contains the control character U+000D");
  EXPECT_EQ(c->Submit({.kernel = "noop", .actor = "gh\nost"}).status().message(),
            "call 0: actor: unknown actor 'gh\\nost' (CreateActor first)");
  EXPECT_EQ(c->Submit({.kernel = "noop", .cost = {.flops = std::nan("")}}).status().message(),
            "call 0: cost.flops: must be a finite number >= 0");
  EXPECT_EQ(c->Submit({.kernel = "noop", .cost = {.bytes = -1}}).status().message(),
            "call 0: cost.bytes: must be a finite number >= 0");
  EXPECT_EQ(c->CreateActor({.name = "act\x1b[2J"}).status().message(),
            "actor: name: contains the control character U+001B");
  auto refused = [&](auto change) {
    ClientOptions o;
    o.controller = cluster_->zmq_endpoint();
    change(o);
    return Client::Connect(o).status().message();
  };
  EXPECT_EQ(refused([](ClientOptions& o) { o.heartbeat_ms = 0; }),
            "heartbeat_ms: must be from 1 to 60000");
  // A driver that died with a huge period held its session open for days.
  EXPECT_EQ(refused([](ClientOptions& o) { o.heartbeat_ms = 1'000'000'000; }),
            "heartbeat_ms: must be from 1 to 60000");
  EXPECT_EQ(refused([](ClientOptions& o) { o.weight = 0; }),
            "weight: must be between 1 and 1000000 (as a job spec's)");
  EXPECT_EQ(refused([](ClientOptions& o) { o.resume_timeout_ms = -5; }),
            "resume_timeout_ms: must be at least 0, or -1 (no limit)");
  EXPECT_EQ(refused([](ClientOptions& o) { o.session = "a\x1b[31mRED"; }),
            "session: contains the control character U+001B");
  ClientOptions typo;
  typo.controller = "tcp://127.0.0.1:99999";
  EXPECT_EQ(Client::Connect(typo).status().message(),
            "controller: 'tcp://127.0.0.1:99999' port '99999' is not a number from 1 to 65535");
  for (const std::string& m : {cross.status().message(), s.message()}) {
    EXPECT_EQ(m.find('\n'), std::string::npos) << m;
  }
  // The gemm the controller refused did not succeed, so neither did c's
  // session; calls refused at the call never became tasks.
  EXPECT_EQ(c->Close().code(), StatusCode::kAborted);
  EXPECT_TRUE(other->Close().ok());
}

TEST_F(ClientTest, ATaskTheControllerRefusesFailsTheSession) {
  // gemm without its sizes passes the client's checks and is refused by
  // the controller; Close() used to return OK ("succeeded 0/0").
  auto c = Connect("refused");
  ASSERT_NE(c, nullptr);
  Future bad = c->Submit({.kernel = "gemm", .args = {{"n", int64_t{256}}}}).value();
  Status why = bad.Wait(20000);
  ASSERT_EQ(why.code(), StatusCode::kInvalidArgument) << why.ToString();
  EXPECT_NE(why.message().find("args.m: required"), std::string::npos) << why.message();
  // A consumer of the refused task hears that, not "unknown task".
  Future after = c->Submit({.kernel = "noop", .inputs = {bad}}).value();
  Status after_why = after.Wait(20000);
  EXPECT_NE(after_why.message().find("inputs[0]: task 't0' was refused at submission"),
            std::string::npos)
      << after_why.ToString();
  Future good = c->Submit({.kernel = "noop"}).value();
  EXPECT_TRUE(good.Wait(20000).ok());
  Status closed = c->Close();
  EXPECT_EQ(closed.code(), StatusCode::kAborted) << closed.ToString();
  EXPECT_NE(closed.message().find("2 task(s) did not succeed"), std::string::npos)
      << closed.message();
  EXPECT_NE(closed.message().find("(refused at submission)"), std::string::npos)
      << closed.message();
}

TEST_F(ClientTest, ActorTasksRunInTheirSession) {
  auto c = Connect("actors");
  ASSERT_NE(c, nullptr);
  auto learner = c->CreateActor({.name = "learner", .kind = SubmodelKind::kLearner, .devices = 1});
  ASSERT_TRUE(learner.ok()) << learner.status().ToString();
  EXPECT_EQ(c->CreateActor({.name = "learner"}).status().code(), StatusCode::kAlreadyExists);
  // Refused by the controller (the pool has two devices): its calls say why.
  auto huge = c->CreateActor({.name = "huge", .devices = 9});
  ASSERT_TRUE(huge.ok());
  Status refused;
  std::vector<Future> early;  // calls that went out before the refusal came back
  for (int i = 0; i < 200; ++i) {
    auto call = huge->Call("noop", {});
    refused = call.status();
    if (!refused.ok()) break;
    early.push_back(std::move(call).value());
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  const bool sent = !early.empty();
  EXPECT_EQ(refused.message(),
            "call 0: actor: 'huge' was refused by the controller: submodels[2] 'huge': devices: "
            "asks for 9, the pool has 2");
  // Those the controller refused name why too, not "unknown submodel".
  for (Future& f : early) {
    EXPECT_NE(f.Wait(20000).message().find("actor 'huge' was refused by the controller: "
                                           "submodels[2] 'huge': devices: asks for 9"),
              std::string::npos)
        << f.Wait(0).message();
  }
  std::vector<Future> steps;
  for (int i = 0; i < 6; ++i) {
    steps.push_back(learner->Call("spin", {.args = {{"us", int64_t{2000}}}}).value());
  }
  for (auto& f : steps) ASSERT_TRUE(f.Wait(20000).ok()) << f.Wait(0).ToString();
  // The controller refused the calls that went out (no sub-model 'huge').
  EXPECT_EQ(c->Close().ok(), !sent);
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

TEST_F(ClientTest, ADroppedFutureFreesItsOutputsOnTheWorker) {
  auto c = Connect("release");
  ASSERT_NE(c, nullptr);
  auto x = c->Submit({.kernel = "scale", .args = {{"n", int64_t{16}}}, .label = "x"});
  ASSERT_TRUE(x.ok());
  ASSERT_TRUE(x->Wait(20000).ok());
  // Wait() may end on the worker's word, before the controller has heard.
  nlohmann::json outputs;
  for (int i = 0; i < 250 && outputs["outputs"].empty(); ++i) {
    if (i > 0) std::this_thread::sleep_for(std::chrono::milliseconds(20));
    outputs = cluster_->Get("/api/v1/jobs/" + std::to_string(c->job()) + "/outputs");
  }
  ASSERT_EQ(outputs["outputs"].size(), 1u) << outputs.dump();
  const std::string endpoint = outputs["outputs"][0].value("endpoint", "");
  const uint32_t run = outputs["outputs"][0].value("run", 0u);
  // REST gives the session's data token (the fixture's controller has no
  // REST token, so every caller is authorised).
  EXPECT_EQ(outputs.value("data_token", ""), DataTokenHex(c->data_token()));
  // Held while the Future lives, however often it is read.
  for (int i = 0; i < 2; ++i) {
    auto got = client::FetchOutputs(endpoint, c->data_token(), c->job(), run, 5000);
    ASSERT_TRUE(got.ok()) << got.status().ToString();
    EXPECT_EQ((*got)[0].data.size(), 64u);
  }
  x = Status::Cancelled("dropped");  // the last copy of the Future goes
  Status gone;
  for (int i = 0; i < 200; ++i) {
    gone = client::FetchOutputs(endpoint, c->data_token(), c->job(), run, 5000).status();
    if (gone.code() == StatusCode::kNotFound) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  EXPECT_EQ(gone.code(), StatusCode::kNotFound) << gone.ToString();
  EXPECT_TRUE(c->Close().ok());
}

// A done Future whose worker died: a consumer has its outputs rebuilt on
// another worker, and Get() fetches them from there (it kept asking the
// dead worker, and waited out the fetch timeout each time).
TEST_F(ClientTest, AFutureWhoseOutputsWereRebuiltIsReadFromTheirNewWorker) {
  auto c = Connect("rebuilt");
  ASSERT_NE(c, nullptr);
  auto x =
      c->Submit({.kernel = "scale", .args = {{"n", int64_t{4}}, {"factor", 3.0}}, .label = "x"});
  ASSERT_TRUE(x.ok());
  auto before = x->Get(20000);
  ASSERT_TRUE(before.ok()) << before.status().ToString();
  const int victim = WorkerThatRanTheFirstTask(*c);
  ASSERT_GE(victim, 0);
  cluster_->KillWorker(victim);
  nlohmann::json pool;
  for (int i = 0; i < 250; ++i) {  // declared dead after 1 s (ProcessCluster)
    pool = cluster_->Get("/api/v1/pool");
    if (pool.is_object() && pool.value("alive_devices", 0) == 1) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  ASSERT_EQ(pool.value("alive_devices", 0), 1) << pool.dump();
  auto y = c->Submit({.kernel = "scale", .args = {{"factor", 2.0}}, .inputs = {*x}});
  ASSERT_TRUE(y.ok());
  ASSERT_TRUE(y->Wait(20000).ok());  // x ran again first, on the live worker
  auto after = x->Get(5000);
  ASSERT_TRUE(after.ok()) << after.status().ToString();
  ASSERT_EQ(after->size(), 1u);
  EXPECT_EQ(Floats((*after)[0]), Floats((*before)[0]));
  EXPECT_TRUE(c->Close().ok());
}

// A done Future whose worker was killed, with nothing to rebuild it yet:
// Get() fails at once, saying the worker is gone (it waited out the whole
// fetch timeout, then said only "no answer"), and the session goes on.
TEST_F(ClientTest, AGetOfOutputsOnAKilledWorkerFailsSayingTheWorkerIsGone) {
  auto c = Connect("gone");
  ASSERT_NE(c, nullptr);
  auto x = c->Submit({.kernel = "scale", .args = {{"n", int64_t{4}}, {"factor", 3.0}}});
  ASSERT_TRUE(x.ok());
  auto first = x->Get(20000);
  ASSERT_TRUE(first.ok()) << first.status().ToString();
  const int victim = WorkerThatRanTheFirstTask(*c);
  ASSERT_GE(victim, 0);
  cluster_->KillWorker(victim);
  // Without the refusal it would end after 120 s, saying "no answer".
  auto lost = x->Get(120'000);
  ASSERT_FALSE(lost.ok());
  EXPECT_EQ(lost.status().code(), StatusCode::kUnavailable) << lost.status().ToString();
  EXPECT_THAT(lost.status().message(), HasSubstr("connection refused: the worker that held them "
                                                 "is gone"));
  auto y = c->Submit({.kernel = "scale", .args = {{"n", int64_t{2}}, {"factor", 1.0}}});
  ASSERT_TRUE(y.ok());
  EXPECT_TRUE(y->Get(20000).ok());
  EXPECT_TRUE(c->Close().ok());
}

// The controller is killed while a session runs and started again on its
// store: the driver takes the session up again by itself. A task running
// through the restart is adopted, not started again; one done before it
// stays done, its outputs still fetched from its worker; a task waiting
// on the running one runs once it ends; the session then goes on and
// closes as succeeded.
TEST_F(ClientTest, ASessionGoesOnAcrossAControllerRestart) {
  ClientOptions o;
  o.heartbeat_ms = 100;
  auto c = Connect("survivor", o);
  ASSERT_NE(c, nullptr);
  Future before =
      c->Submit({.kernel = "scale", .args = {{"n", int64_t{4}}, {"factor", 3.0}}}).value();
  ASSERT_TRUE(before.Wait(20000).ok());
  Future spin = c->Submit({.kernel = "spin", .args = {{"us", int64_t{1'500'000}}}}).value();
  Future after =
      c->Submit({.kernel = "scale", .args = {{"factor", 2.0}}, .inputs = {before}}).value();
  Future chained = c->Submit({.kernel = "noop", .inputs = {spin}}).value();
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  cluster_->KillController();
  ASSERT_TRUE(cluster_->StartController().ok());
  Status s = chained.Wait(30000);
  EXPECT_TRUE(s.ok()) << s.ToString();
  EXPECT_TRUE(spin.Wait(1000).ok());
  auto doubled = after.Get(20000);
  ASSERT_TRUE(doubled.ok()) << doubled.status().ToString();
  auto kept = before.Get(20000);
  ASSERT_TRUE(kept.ok()) << "outputs of a task done before the restart: "
                         << kept.status().ToString();
  auto next = c->Submit({.kernel = "noop"});
  ASSERT_TRUE(next.ok()) << next.status().ToString();
  EXPECT_TRUE(next->Wait(20000).ok());
  EXPECT_TRUE(c->Close().ok());
  auto job = cluster_->Get("/api/v1/jobs/" + std::to_string(c->job()));
  EXPECT_EQ(job.value("state", ""), "succeeded") << job.dump();
  // Each task ran once: the spin was adopted where it ran, the first task
  // was not run again.
  std::map<uint32_t, int> runs;
  for (const auto& e : cluster_->ReadExecLog()) {
    if (e.job == c->job()) ++runs[e.task];
  }
  EXPECT_EQ(runs.size(), 5u);
  for (const auto& [task, n] : runs) EXPECT_EQ(n, 1) << "task " << task << " ran " << n << " times";
}

// The restarted controller holds a resume until its workers are back; one
// killed meanwhile never answers it, and the driver, reconnected to the
// next, must send it again (it waited out its whole resume time-out).
TEST_F(ClientTest, AResumeAControllerDiedHoldingIsSentAgainToTheNext) {
  ClientOptions o;
  o.heartbeat_ms = 100;
  o.resume_timeout_ms = 20'000;
  auto c = Connect("twice", o);
  ASSERT_NE(c, nullptr);
  ASSERT_TRUE(c->Submit({.kernel = "noop"})->Wait(20000).ok());
  // Worker 1 stopped: the next controller waits for it (a minute's grace).
  ASSERT_EQ(::kill(cluster_->worker_pid(1), SIGSTOP), 0);
  cluster_->KillController();
  cluster_->set_recovery_grace_ms(60'000);
  ASSERT_TRUE(cluster_->StartController().ok());
  std::this_thread::sleep_for(std::chrono::milliseconds(800));  // the driver's open is held
  cluster_->KillController();
  cluster_->set_recovery_grace_ms(2000);
  ASSERT_EQ(::kill(cluster_->worker_pid(1), SIGCONT), 0);
  ASSERT_TRUE(cluster_->StartController().ok());
  auto next = c->Submit({.kernel = "noop"});
  ASSERT_TRUE(next.ok()) << next.status().ToString();
  Status s = next->Wait(30000);
  EXPECT_TRUE(s.ok()) << s.ToString();
  EXPECT_TRUE(c->Close().ok());
}

// Without a restart or a standby, a driver gives up after its resume
// time-out: every pending future fails, saying why.
TEST_F(ClientTest, AControllerThatStaysDeadFailsTheFuturesOnceTheResumeGivesUp) {
  ClientOptions o;
  o.heartbeat_ms = 50;
  o.resume_timeout_ms = 1500;
  auto c = Connect("orphan", o);
  ASSERT_NE(c, nullptr);
  Future slow = c->Submit({.kernel = "sleep", .args = {{"us", int64_t{600'000'000}}}}).value();
  cluster_->KillController();
  Status s = slow.Wait();  // no timeout: must still end
  EXPECT_EQ(s.code(), StatusCode::kUnavailable) << s.ToString();
  EXPECT_THAT(s.message(), HasSubstr("driver session lost: the controller at"));
  EXPECT_THAT(s.message(), HasSubstr("not resumed within 1500 ms"));
  EXPECT_FALSE(c->Close().ok());
}

// A session that ended before a restart keeps its start and its figures
// (its calls are not stored, so it reads 0 of 0 tasks); before, both were
// lost, and --keep-hours never expired it (no end time).
TEST_F(ClientTest, AnEndedSessionKeepsItsFiguresAcrossARestart) {
  auto c = Connect("kept");
  ASSERT_NE(c, nullptr);
  for (int i = 0; i < 2; ++i) {
    ASSERT_TRUE(c->Submit({.kernel = "spin", .args = {{"us", int64_t{2000}}}})->Wait(20000).ok());
  }
  ASSERT_TRUE(c->Close().ok());
  const std::string path = "/api/v1/jobs/" + std::to_string(c->job());
  nlohmann::json before;
  for (int i = 0; i < 200 && !before.contains("lower_bound_s"); ++i) {
    before = cluster_->Get(path);
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  ASSERT_EQ(before.value("state", ""), "succeeded") << before.dump();
  ASSERT_TRUE(before.contains("lower_bound_s")) << before.dump();
  cluster_->StopController();
  ASSERT_TRUE(cluster_->StartController().ok());
  auto after = cluster_->Get(path);
  EXPECT_EQ(after.value("state", ""), "succeeded") << after.dump();
  for (const char* key : {"started_us", "makespan_s", "lower_bound_s", "utilisation"}) {
    ASSERT_TRUE(after.contains(key)) << key << ": " << after.dump();
    EXPECT_EQ(after[key], before[key]) << key;
  }
}

TEST_F(ClientTest, ASessionIdIsStoredBeforeTheDriverHearsIt) {
  // The controller killed at once after the open: the session's job was
  // not in the store yet, and after the restart its id went to the next
  // session (two drivers, one job).
  auto c = Connect("quick");
  ASSERT_NE(c, nullptr);
  const JobId old = c->job();
  cluster_->KillController();
  ASSERT_TRUE(cluster_->StartController().ok());
  auto job = cluster_->Get("/api/v1/jobs/" + std::to_string(old));
  EXPECT_EQ(job.value("name", ""), "quick") << job.dump();
  auto next = Connect("next");
  ASSERT_NE(next, nullptr);
  EXPECT_GT(next->job(), old);
  EXPECT_TRUE(next->Close().ok());
  EXPECT_TRUE(c->Close().ok()) << "the first session resumed on the restarted controller";
}

// An actor's tasks stay on its device set (DeviceShare): with no other
// actor in the session to trade with, its one device never changes.
TEST_F(ClientTest, ActorTasksWithOneDeviceRunOnOneWorker) {
  auto c = Connect("pinned");
  ASSERT_NE(c, nullptr);
  auto actor = c->CreateActor({.name = "actor", .devices = 1});
  ASSERT_TRUE(actor.ok());
  std::vector<Future> fs;
  for (int i = 0; i < 12; ++i) {
    fs.push_back(actor->Call("spin", {.args = {{"us", int64_t{5000}}}}).value());
  }
  for (auto& f : fs) ASSERT_TRUE(f.Wait(20000).ok());
  EXPECT_TRUE(c->Close().ok());
  std::set<pid_t> pids;
  for (const auto& e : cluster_->ReadExecLog()) {
    if (e.job == c->job()) pids.insert(e.pid);
  }
  EXPECT_EQ(pids.size(), 1u);
}

// The CLI fetches through hmpmd::client (it no longer links the worker).
TEST_F(ClientTest, CliSubmitFetchesOutputsThroughTheClientLibrary) {
  const std::filesystem::path spec = dir_ / "spec.json";
  std::ofstream(spec) << R"({"name": "f", "tasks": [{"id": "x", "kernel": "scale",
                            "args": {"n": 4, "factor": 2.0}}]})";
  const std::filesystem::path out = dir_ / "out";
  const std::string cmd = std::string(HMPMD_CLI_BIN) + " submit " + spec.string() +
                          " --wait --wait-timeout 30 --fetch " + out.string() + " --url " +
                          cluster_->http_url() + " > " + (dir_ / "cli.log").string() + " 2>&1";
  ASSERT_EQ(std::system(cmd.c_str()), 0) << cmd;
  EXPECT_EQ(std::filesystem::file_size(out / "x.0.bin"), 16u);
  EXPECT_TRUE(std::filesystem::exists(out / "manifest.json"));
}

// The controller is killed mid-session: every pending future fails with
// "driver session lost" within 10 heartbeats; before, Wait() with no
// timeout blocked forever and Close() waited out its timeout.
TEST_F(ClientTest, AControllerThatDiesFailsThePendingFutures) {
  ClientOptions o;
  o.controller = cluster_->zmq_endpoint();
  o.session = "orphan";
  o.heartbeat_ms = 50;
  o.resume_timeout_ms = 0;  // no resume: lost at once
  auto c = Client::Connect(o);
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  Future slow = (*c)->Submit({.kernel = "sleep", .args = {{"us", int64_t{600'000'000}}}}).value();
  Future idle = (*c)->Submit({.kernel = "noop"}).value();
  ASSERT_TRUE(idle.Wait(30000).ok()) << "the session works while the controller lives";
  cluster_->KillController();
  Status s = slow.Wait();  // no timeout: must still end
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.message().find("driver session lost"), std::string::npos) << s.ToString();
  // The session is gone, not the call bad (it said InvalidArgument).
  auto late = (*c)->Submit({.kernel = "noop"});
  EXPECT_EQ(late.status().code(), StatusCode::kUnavailable) << late.status().ToString();
  EXPECT_NE(late.status().message().find("driver session lost"), std::string::npos);
  Status closed = (*c)->Close();
  EXPECT_FALSE(closed.ok());
  EXPECT_FALSE((*c)->Close().ok()) << "closing twice gives the same answer";
}

}  // namespace
}  // namespace hmpmd::testing
