// Worker against a fake controller on a real ROUTER socket: registration,
// re-registration, liveness, Shutdown and Stop.
#include "hmpmd/worker/worker.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>

#include "hmpmd/worker/builtin_kernels.h"
#include "worker_fixture.h"

namespace hmpmd::worker {
namespace {

using std::chrono::milliseconds;
using ::testing::Contains;
using testing::FakeController;
using ::testing::HasSubstr;
using testing::kHeartbeatMs;
using testing::kWorkerId;

class WorkerTest : public testing::WorkerFixture {};

TEST_F(WorkerTest, RegistersWithItsCoresKernelsAndIdentity) {
  options_.cube_cores = 2;
  options_.vector_cores = 3;
  extra_kernels_.push_back(
      {"mine", [](const KernelArgs&, std::span<const Buffer>) { return std::vector<Buffer>{}; }});
  Start();
  std::optional<RegisterMsg> reg = controller_.WaitFor<RegisterMsg>();
  ASSERT_TRUE(reg);
  EXPECT_EQ(reg->name, "test-worker");
  EXPECT_EQ(reg->token, "secret");
  EXPECT_EQ(reg->pid, static_cast<uint32_t>(getpid()));
  EXPECT_EQ(reg->memory_mb, 2048u);
  // The data socket peers fetch outputs from, on the controller's interface.
  EXPECT_TRUE(reg->data_endpoint.starts_with("tcp://127.0.0.1:")) << reg->data_endpoint;
  EXPECT_GT(reg->sent_us, 0);
  EXPECT_EQ(reg->cores, (std::vector<CoreGroup>{{CoreKind::kCube, 2}, {CoreKind::kVector, 3}}));
  for (const NamedKernel& k : BuiltinKernels()) EXPECT_THAT(reg->kernels, Contains(k.name));
  EXPECT_THAT(reg->kernels, Contains("mine"));
}

TEST_F(WorkerTest, RejectWithReregisterLeadsToNewRegistration) {
  // Neither the back-off nor the silence timeout can produce the new
  // registration within the wait below; only the Reject can.
  options_.controller_timeout_ms = 60'000;
  ASSERT_NO_FATAL_FAILURE(StartRegistered());
  controller_.Send(Reject{"controller restarted", true});
  const auto start = std::chrono::steady_clock::now();
  std::optional<RegisterMsg> reg = controller_.WaitFor<RegisterMsg>({}, milliseconds(2000));
  ASSERT_TRUE(reg) << "no RegisterMsg after Reject{reregister=true}";
  EXPECT_LT(std::chrono::steady_clock::now() - start, milliseconds(2000));
  EXPECT_EQ(reg->name, "test-worker");
  // The new registration works like the first.
  controller_.Send(RegisterAck{kWorkerId + 1, kHeartbeatMs});
  std::optional<Heartbeat> hb = controller_.WaitFor<Heartbeat>(
      [](const Heartbeat& h) { return h.worker_id == kWorkerId + 1; });
  EXPECT_TRUE(hb) << "no heartbeat under the new worker id";
}

TEST_F(WorkerTest, RejectForGoodEndsRunWithTheReason) {
  Start();
  ASSERT_TRUE(controller_.WaitFor<RegisterMsg>());
  controller_.Send(Reject{"bad token", false});
  std::optional<Status> status = running_->Wait();
  ASSERT_TRUE(status) << "Run() did not return after Reject";
  EXPECT_EQ(status->code(), StatusCode::kPermissionDenied);
  EXPECT_THAT(status->message(), HasSubstr("bad token"));
}

TEST_F(WorkerTest, SilentControllerLeadsToNewRegistration) {
  options_.controller_timeout_ms = 100;
  const auto start = std::chrono::steady_clock::now();
  ASSERT_NO_FATAL_FAILURE(StartRegistered());
  // Heartbeats go unanswered; the timeout after the RegisterAck, the worker
  // registers again.
  ASSERT_TRUE(controller_.WaitFor<RegisterMsg>());
  EXPECT_GE(std::chrono::steady_clock::now() - start, milliseconds(100));
}

TEST_F(WorkerTest, AnsweredHeartbeatsKeepTheRegistration) {
  options_.controller_timeout_ms = 100;
  ASSERT_NO_FATAL_FAILURE(StartRegistered());
  // Answer every heartbeat for several timeouts: the worker must neither
  // register again nor count an ack as a bad frame.
  const auto until = std::chrono::steady_clock::now() + milliseconds(500);
  int heartbeats = 0;
  while (std::chrono::steady_clock::now() < until) {
    std::optional<Message> m = controller_.Recv(milliseconds(200));
    ASSERT_TRUE(m) << "the worker went quiet";
    ASSERT_FALSE(std::holds_alternative<RegisterMsg>(*m)) << "re-registered while answered";
    if (const Heartbeat* hb = std::get_if<Heartbeat>(&*m)) {
      EXPECT_EQ(hb->dropped_frames, 0u);
      ++heartbeats;
      controller_.Send(HeartbeatAck{});
    }
  }
  EXPECT_GE(heartbeats, 5);
}

TEST_F(WorkerTest, ShutdownEndsRunWithOk) {
  ASSERT_NO_FATAL_FAILURE(StartRegistered());
  ASSERT_TRUE(controller_.WaitFor<Heartbeat>());
  controller_.Send(Shutdown{"test over"});
  std::optional<Status> status = running_->Wait();
  ASSERT_TRUE(status) << "Run() did not return after Shutdown";
  EXPECT_TRUE(status->ok()) << status->ToString();
}

TEST_F(WorkerTest, StopEndsRunWithOk) {
  ASSERT_NO_FATAL_FAILURE(StartRegistered());
  worker_->Stop();
  std::optional<Status> status = running_->Wait();
  ASSERT_TRUE(status) << "Run() did not return after Stop()";
  EXPECT_TRUE(status->ok()) << status->ToString();
}

TEST_F(WorkerTest, StopsWhenItsParentIsGone) {
  options_.parent_pid = ::getppid();  // its real parent: it keeps serving
  Start();
  ASSERT_TRUE(controller_.WaitFor<RegisterMsg>());
  EXPECT_FALSE(running_->Wait(milliseconds(600))) << "stopped with its parent alive";
  running_.reset();                  // stops and joins it
  options_.parent_pid = ::getpid();  // never its own parent: as if gone
  Start();
  std::optional<Status> status = running_->Wait();
  ASSERT_TRUE(status) << "Run() did not return once its parent was gone";
  EXPECT_TRUE(status->ok()) << status->ToString();
}

TEST(WorkerOptionsTest, RunRejectsBadOptions) {
  WorkerOptions options;
  options.log_level = LogLevel::kOff;
  EXPECT_EQ(Worker(options).Run().code(), StatusCode::kInvalidArgument);  // no endpoint
  options.controller_endpoint = "tcp://127.0.0.1:1";
  options.cube_cores = 0;
  options.vector_cores = 0;
  EXPECT_EQ(Worker(options).Run().code(), StatusCode::kInvalidArgument);
  options.cube_cores = 1;
  options.reconnect_backoff_min_ms = 0;
  EXPECT_EQ(Worker(options).Run().code(), StatusCode::kInvalidArgument);
  options.reconnect_backoff_min_ms = 100;
  options.controller_endpoint = "bogus://x";
  EXPECT_EQ(Worker(options).Run().code(), StatusCode::kInvalidArgument);
}

TEST(WorkerOptionsTest, StopBeforeRunMakesRunReturnAtOnce) {
  WorkerOptions options;
  options.controller_endpoint = "tcp://127.0.0.1:1";
  options.log_level = LogLevel::kOff;
  Worker worker(options);
  worker.Stop();
  EXPECT_TRUE(worker.Run().ok());
}

}  // namespace
}  // namespace hmpmd::worker
