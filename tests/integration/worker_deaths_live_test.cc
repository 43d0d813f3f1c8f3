// A task whose kernel aborts its worker process, with real processes: three
// workers (crash_worker, which has the `abort` kernel); the task kills the
// worker it runs on, is retried once on another, kills that one too, and is
// not retried again (SchedulerOptions::max_worker_deaths, default 2): the
// job fails naming the task and the two workers, and the third survives.
// And with fake workers on the controller's socket: a death is charged to the
// run the worker's last heartbeat named started, not to the run dispatched
// to that lane before it (whose result died with the worker).
#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <optional>
#include <string>
#include <thread>
#include <vector>
#include <zmq.hpp>

#include "hmpmd/protocol/codec.h"
#include "hmpmd/protocol/control_auth.h"
#include "process_cluster_fixture.h"

namespace hmpmd::testing {
namespace {

class WorkerDeathsLiveTest : public ProcessClusterFixture {
 protected:
  WorkerDeathsLiveTest() : ProcessClusterFixture("hmpmd-worker-deaths") {}
};

TEST_F(WorkerDeathsLiveTest, ATaskThatKillsTwoWorkersFailsTheJobAndTheThirdSurvives) {
  ASSERT_TRUE(cluster_->StartController().ok());
  cluster_->set_worker_bin(HMPMD_CRASH_WORKER_BIN);
  for (int i = 0; i < 3; ++i) {
    ASSERT_TRUE(cluster_->StartWorker({"--name", "crash" + std::to_string(i)}).ok());
  }
  ASSERT_TRUE(cluster_->WaitWorkers(3, 20000));
  auto id = cluster_->Submit(R"({"name":"kills","tasks":[{"id":"boom","kernel":"abort"}]})");
  ASSERT_TRUE(id.ok()) << id.status().ToString();
  // Each death is noticed within the worker timeout (1 s): well under 30 s.
  nlohmann::json job = cluster_->WaitJob(*id, 30000);
  EXPECT_EQ(job.value("state", ""), "failed") << job.dump();
  const std::string error = job.value("error", "");
  EXPECT_NE(error.find("task 'boom'"), std::string::npos) << error;
  EXPECT_NE(error.find("killed 2 workers"), std::string::npos) << error;
  int running = 0;
  for (size_t i = 0; i < 3; ++i) running += cluster_->WorkerRunning(i) ? 1 : 0;
  EXPECT_EQ(running, 1) << "two workers died, the third survives";
  nlohmann::json pool = cluster_->Get("/api/v1/pool");
  ASSERT_TRUE(pool.is_object());
  EXPECT_EQ(pool.value("alive_devices", size_t{0}), 1u) << pool.dump();
  // The survivor still serves: a job of the built-in kernels succeeds on it.
  auto ok = cluster_->Submit(R"({"name":"after","tasks":[{"id":"n","kernel":"noop"}]})");
  ASSERT_TRUE(ok.ok()) << ok.status().ToString();
  EXPECT_EQ(cluster_->WaitJob(*ok, 20000).value("state", ""), "succeeded");
  // The fixture's ProcessCluster kills (SIGKILL) and reaps every process it
  // started, by pid; the dead ones are reaped here already.
}

// A worker on the controller's socket driven by the test: one cube lane;
// it heartbeats only while the test waits, and is dead once it stops.
class FakeWorker {
 public:
  FakeWorker(zmq::context_t& ctx, const std::string& endpoint, const std::string& name,
             uint64_t instance)
      : s_(ctx, zmq::socket_type::dealer) {
    s_.set(zmq::sockopt::linger, 0);
    SetControlCredentials(s_, "");
    s_.connect(endpoint);
    RegisterMsg reg;
    reg.name = name;
    reg.pid = static_cast<uint32_t>(::getpid());
    reg.cores = {CoreGroup{CoreKind::kCube, 1}};
    reg.kernels = {"noop"};
    reg.instance = instance;
    Send(Message(reg));
  }
  void Send(const Message& m) {
    const EncodedFrames f = Encode(m);
    s_.send(zmq::buffer(f.header), zmq::send_flags::sndmore);
    s_.send(zmq::buffer(f.body), zmq::send_flags::none);
  }
  // Reads for up to 10 s, heartbeating every 100 ms (nothing started),
  // until it is registered and holds `n` tasks; false if it does not.
  bool WaitTasks(size_t n) {
    for (int i = 0; i < 100 && (id_ == std::nullopt || tasks_.size() < n); ++i) {
      zmq::pollitem_t item{s_.handle(), 0, ZMQ_POLLIN, 0};
      if (zmq::poll(&item, 1, std::chrono::milliseconds(100)) > 0) {
        zmq::message_t header, body;
        if (!s_.recv(header) || !header.more() || !s_.recv(body)) continue;
        auto m = Decode(header.to_string_view(), body.to_string_view());
        if (!m.ok()) continue;
        if (auto* ack = std::get_if<RegisterAck>(&*m)) id_ = ack->worker_id;
        if (auto* batch = std::get_if<AssignBatch>(&*m)) {
          for (const TaskAssign& t : batch->tasks) tasks_.push_back(t);
        }
      }
      if (id_) Send(Message(Heartbeat{.worker_id = *id_, .sent_us = 1}));
    }
    return id_ != std::nullopt && tasks_.size() >= n;
  }
  // The last task it was given of run `run`; fails the test if none.
  const TaskAssign* Task(uint32_t run) const {
    for (auto t = tasks_.rbegin(); t != tasks_.rend(); ++t) {
      if (t->task == run) return &*t;
    }
    ADD_FAILURE() << "no task run " << run;
    return nullptr;
  }
  // A heartbeat saying its lanes run `started`.
  void ReportStarted(const TaskAssign& t) {
    Heartbeat beat{
        .worker_id = *id_, .running = static_cast<uint32_t>(tasks_.size()), .sent_us = 2};
    beat.started.push_back(HeldTask{t.job, t.task, t.attempt, t.core, t.lane});
    Send(Message(beat));
  }

 private:
  zmq::socket_t s_;
  std::optional<WorkerId> id_;
  std::vector<TaskAssign> tasks_;
};

// A chain a -> b: b is dispatched behind a on the worker's one lane (early
// dispatch). The worker's last heartbeat says its lane runs b: a had
// finished, but its result died with the worker. Then the worker dies
// (falls silent). Twice: b fails for killing 2 workers; a, the first
// dispatched of those on the lane, is not charged (charging it would fail
// the job naming a, and never b).
TEST_F(WorkerDeathsLiveTest, ADeathIsChargedToTheRunTheHeartbeatNamedStarted) {
  ASSERT_TRUE(cluster_->StartController().ok());
  zmq::context_t ctx(1);
  std::optional<uint32_t> job;
  for (int i = 0; i < 2; ++i) {
    SCOPED_TRACE("death " + std::to_string(i));
    FakeWorker w(ctx, cluster_->zmq_endpoint(), "fake" + std::to_string(i), 100 + i);
    if (i == 0) {
      ASSERT_TRUE(w.WaitTasks(0)) << "not registered";
      auto id = cluster_->Submit(R"({"name":"chain","tasks":[{"id":"a","kernel":"noop"},)"
                                 R"({"id":"b","kernel":"noop","inputs":["a"]}]})");
      ASSERT_TRUE(id.ok()) << id.status().ToString();
      job = *id;
    }
    ASSERT_TRUE(w.WaitTasks(2)) << "a, and b behind it";
    const TaskAssign* b = w.Task(1);
    ASSERT_NE(b, nullptr);
    w.ReportStarted(*b);
    // Falls silent: declared dead after the worker timeout (1 s).
    for (int t = 0; t < 100; ++t) {
      nlohmann::json pool = cluster_->Get("/api/v1/pool");
      if (pool.is_object() && pool.value("alive_devices", size_t{1}) == 0) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
  }
  nlohmann::json got = cluster_->WaitJob(*job, 20000);
  EXPECT_EQ(got.value("state", ""), "failed") << got.dump();
  const std::string error = got.value("error", "");
  EXPECT_NE(error.find("task 'b'"), std::string::npos) << error;
  EXPECT_NE(error.find("killed 2 workers (fake0, fake1)"), std::string::npos) << error;
}

}  // namespace
}  // namespace hmpmd::testing
