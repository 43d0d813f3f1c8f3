#include "worker_fixture.h"

#include "test_data_token.h"

namespace hmpmd::worker::testing {

TaskAssign Task(JobId job, uint32_t task, std::string kernel, CoreKind core, uint32_t lane,
                Args args) {
  TaskAssign t;
  t.job = job;
  t.task = task;
  t.attempt = 1;
  t.kernel = std::move(kernel);
  t.core = core;
  t.lane = lane;
  t.args = std::move(args);
  return t;
}

RunningWorker::RunningWorker(Worker* worker) : worker_(worker) {
  thread_ =
      std::thread([this, done = std::move(promise_)]() mutable { done.set_value(worker_->Run()); });
}

RunningWorker::~RunningWorker() {
  worker_->Stop();
  if (future_.valid() && future_.wait_for(std::chrono::seconds(10)) != std::future_status::ready) {
    ADD_FAILURE() << "Run() did not return within 10 s of Stop()";
  }
  thread_.join();
}

std::optional<Status> RunningWorker::Wait(std::chrono::milliseconds timeout) {
  if (future_.wait_for(timeout) != std::future_status::ready) return std::nullopt;
  return future_.get();
}

WorkerFixture::WorkerFixture() {
  options_.controller_endpoint = controller_.endpoint();
  options_.name = "test-worker";
  options_.token = "secret";
  options_.memory_mb = 2048;
  options_.log_level = LogLevel::kWarn;
  options_.reconnect_backoff_min_ms = 50;
  options_.reconnect_backoff_max_ms = 200;
}

void WorkerFixture::TearDown() {
  running_.reset();
  EXPECT_EQ(controller_.bad_messages(), 0);
}

void WorkerFixture::Start() {
  worker_ = std::make_unique<Worker>(options_);
  for (auto& [name, kernel] : extra_kernels_) worker_->RegisterKernel(name, kernel);
  running_ = std::make_unique<RunningWorker>(worker_.get());
}

void WorkerFixture::StartRegistered() {
  Start();
  const auto deadline = std::chrono::steady_clock::now() + FakeController::kDeadline;
  while (std::chrono::steady_clock::now() < deadline) {
    std::optional<Message> m = controller_.Recv();
    ASSERT_TRUE(m) << "the worker went quiet before registering";
    if (std::holds_alternative<RegisterMsg>(*m)) {
      controller_.Send(RegisterAck{kWorkerId, kHeartbeatMs, 0, ::hmpmd::testing::kTestDataToken});
    } else if (std::holds_alternative<Heartbeat>(*m)) {
      return;
    }
  }
  FAIL() << "the worker did not register";
}

std::map<Key, TaskResult> WorkerFixture::CollectResults(size_t want) {
  std::map<Key, TaskResult> got;
  while (got.size() < want) {
    std::optional<DoneBatch> batch = controller_.WaitFor<DoneBatch>();
    if (!batch) break;
    EXPECT_EQ(batch->worker_id, kWorkerId);
    for (const TaskResult& r : batch->results) got[Key(r.job, r.task)] = r;
  }
  return got;
}

}  // namespace hmpmd::worker::testing
