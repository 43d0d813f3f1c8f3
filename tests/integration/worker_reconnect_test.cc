// A worker whose register goes unanswered reconnects on a new socket and
// registers again (worker/serve_loop.cc). The controller replaces the
// entry of the same process (name, pid, data endpoint), whatever socket it
// came from: keeping the old entry alive too would count each worker
// several times after a slow start-up (a gang would "fit" a pool it does
// not) until sends to the old sockets failed.
//
// A worker restarted under its name is a new process (RegisterMsg::instance):
// the old entry is declared lost at once, and the old instance is refused
// should it come back (two live processes of one name would replace each
// other forever).
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <nlohmann/json.hpp>
#include <optional>
#include <sstream>
#include <thread>
#include <zmq.hpp>

#include "cluster_fixture.h"
#include "fake_worker_wire.h"
#include "hmpmd/api/api_snapshot.h"
#include "hmpmd/api/live_metrics.h"
#include "hmpmd/protocol/codec.h"
#include "hmpmd/protocol/control_auth.h"
#include "hmpmd/store/in_memory_job_store.h"

namespace hmpmd::testing {
namespace {

RegisterMsg FakeWorker(const std::string& data_endpoint) {
  RegisterMsg r;
  r.name = "fake";
  r.pid = 4242;
  r.cores = {{CoreKind::kCube, 1}};
  r.kernels = {"noop"};
  r.data_endpoint = data_endpoint;
  return r;
}

// Registers `r` from a socket of its own and waits for the answer.
void RegisterFrom(zmq::socket_t& s, const std::string& endpoint, const RegisterMsg& r) {
  s.set(zmq::sockopt::linger, 0);
  SetControlCredentials(s, "");
  s.connect(endpoint);
  EncodedFrames f = Encode(Message(r));
  s.send(zmq::buffer(f.header), zmq::send_flags::sndmore);
  s.send(zmq::buffer(f.body), zmq::send_flags::none);
  zmq::pollitem_t item{s.handle(), 0, ZMQ_POLLIN, 0};
  ASSERT_EQ(zmq::poll(&item, 1, std::chrono::milliseconds(10000)), 1) << "no RegisterAck";
}

// The controller's answer to the register just sent on `s`.
std::optional<Message> Reply(zmq::socket_t& s) {
  zmq::message_t header, body;
  if (!s.recv(header) || !s.recv(body)) return std::nullopt;
  auto m = Decode(header.to_string_view(), body.to_string_view());
  if (!m.ok()) return std::nullopt;
  return *m;
}

class WorkerReconnectTest : public ClusterTest {
 protected:
  // Reports `tasks` done, as worker `me`, on `s`.
  void ReportDone(zmq::socket_t& s, WorkerId me, const std::vector<TaskAssign>& tasks) {
    DoneBatch done{me, {}, 1};
    for (const TaskAssign& t : tasks) {
      TaskResult r;
      r.job = t.job;
      r.task = t.task;
      r.attempt = t.attempt;
      r.ok = true;
      done.results.push_back(r);
    }
    Send(s, Message(done));
  }
  // Whether `holds`, asked on the controller's loop every 10 ms, holds
  // within 5 s.
  template <typename Pred>
  bool Eventually(Pred holds) {
    for (int i = 0; i < 500; ++i) {
      if (cluster_->Call([&] { return holds(cluster_->controller()); })) return true;
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    return false;
  }
  // Job `job`'s state once it ends, or after 5 s.
  JobState WaitForEnd(JobId job) {
    Eventually([&](const Controller& c) { return IsTerminal(c.scheduler().job(job)->state); });
    return cluster_->Call([&] { return cluster_->controller().scheduler().job(job)->state; });
  }
  // Waits (at most 5 s) until that worker, which sends no heartbeat, is
  // declared dead; false if it is not.
  bool WaitDead(uint64_t instance) {
    return Eventually([&](const Controller& c) {
      return std::none_of(c.workers().begin(), c.workers().end(),
                          [&](const WorkerInfo& w) { return w.instance == instance && w.alive; });
    });
  }
};

TEST_F(WorkerReconnectTest, TheSameWorkerOnANewSocketReplacesItsOldEntry) {
  StartCluster(1, "cube=1");
  auto alive = [&] {
    return cluster_->Call([&] { return cluster_->controller().workers().alive_count(); });
  };
  const std::string endpoint = cluster_->Call([&] { return cluster_->controller().endpoint(); });
  ASSERT_EQ(alive(), 1u);
  zmq::context_t ctx(1);
  zmq::socket_t first(ctx, zmq::socket_type::dealer), again(ctx, zmq::socket_type::dealer),
      other(ctx, zmq::socket_type::dealer), bare1(ctx, zmq::socket_type::dealer),
      bare2(ctx, zmq::socket_type::dealer);
  RegisterFrom(first, endpoint, FakeWorker("tcp://127.0.0.1:1"));
  EXPECT_EQ(alive(), 2u);
  RegisterFrom(again, endpoint, FakeWorker("tcp://127.0.0.1:1"));
  EXPECT_EQ(alive(), 2u) << "the reconnected worker counted twice";
  // Another process of the same name and pid (another data endpoint), and
  // two without a data endpoint, are distinct workers.
  RegisterFrom(other, endpoint, FakeWorker("tcp://127.0.0.1:2"));
  EXPECT_EQ(alive(), 3u);
  RegisterFrom(bare1, endpoint, FakeWorker(""));
  RegisterFrom(bare2, endpoint, FakeWorker(""));
  EXPECT_EQ(alive(), 5u);
}

TEST_F(WorkerReconnectTest, ANewInstanceUnderAKnownNameReplacesTheOldOneWhichIsThenRefused) {
  StartCluster(1, "cube=1");
  auto alive = [&] {
    return cluster_->Call([&] { return cluster_->controller().workers().alive_count(); });
  };
  const std::string endpoint = cluster_->Call([&] { return cluster_->controller().endpoint(); });
  zmq::context_t ctx(1);
  zmq::socket_t first(ctx, zmq::socket_type::dealer), again(ctx, zmq::socket_type::dealer),
      restarted(ctx, zmq::socket_type::dealer), back(ctx, zmq::socket_type::dealer);
  RegisterMsg old_process = FakeWorker("tcp://127.0.0.1:1");
  old_process.instance = 11;
  RegisterFrom(first, endpoint, old_process);
  ASSERT_TRUE(Reply(first).has_value());
  EXPECT_EQ(alive(), 2u);
  // The same instance on a new socket: the same process reconnecting.
  RegisterFrom(again, endpoint, old_process);
  std::optional<Message> ack = Reply(again);
  ASSERT_TRUE(ack && std::holds_alternative<RegisterAck>(*ack));
  EXPECT_EQ(alive(), 2u);
  EXPECT_EQ(cluster_->Call([&] { return cluster_->controller().counters().worker_restarts; }), 0u);
  // Another instance under the name (another pid and data socket): a
  // restart. The old entry is lost at once, not after missed heartbeats.
  RegisterMsg new_process = FakeWorker("tcp://127.0.0.1:3");
  new_process.pid = 4343;
  new_process.instance = 22;
  RegisterFrom(restarted, endpoint, new_process);
  ack = Reply(restarted);
  ASSERT_TRUE(ack && std::holds_alternative<RegisterAck>(*ack));
  EXPECT_EQ(alive(), 2u) << "the restarted worker counted twice";
  cluster_->Call([&] {
    const Controller& c = cluster_->controller();
    EXPECT_EQ(c.counters().worker_restarts, 1u);
    for (const WorkerInfo& w : c.workers()) {
      if (w.name != "fake") continue;
      EXPECT_EQ(w.alive, w.instance == 22) << "instance " << w.instance;
      if (w.instance == 11 && w.left_reason != "re-registered on a new connection") {
        EXPECT_NE(w.left_reason.find("restarted"), std::string::npos) << w.left_reason;
      }
    }
  });
  // The old process was not dead after all: refused for good, so the two
  // do not take the name from each other in turn.
  RegisterFrom(back, endpoint, old_process);
  std::optional<Message> no = Reply(back);
  ASSERT_TRUE(no && std::holds_alternative<Reject>(*no));
  EXPECT_FALSE(std::get<Reject>(*no).reregister);
  EXPECT_NE(std::get<Reject>(*no).reason.find("newer process"), std::string::npos);
  EXPECT_EQ(alive(), 2u);
}

TEST_F(WorkerReconnectTest, ANewInstanceOfAWorkerAlreadyDeclaredDeadIsNotARestart) {
  // hmpmd_worker_restarts_total counts workers lost because a new process
  // took their name; one already declared dead lost nothing to it.
  ControllerOptions o;
  o.heartbeat_ms = 50;
  o.worker_timeout_ms = 300;
  StartCluster(1, "cube=1", o);
  const std::string endpoint = cluster_->Call([&] { return cluster_->controller().endpoint(); });
  zmq::context_t ctx(1);
  zmq::socket_t first(ctx, zmq::socket_type::dealer), later(ctx, zmq::socket_type::dealer);
  RegisterMsg old_process = FakeWorker("tcp://127.0.0.1:1");
  old_process.instance = 31;
  RegisterFrom(first, endpoint, old_process);
  ASSERT_TRUE(Reply(first).has_value());
  // It never sends a heartbeat: declared dead after 300 ms.
  ASSERT_TRUE(WaitDead(31));
  RegisterMsg new_process = FakeWorker("tcp://127.0.0.1:3");
  new_process.pid = 4444;
  new_process.instance = 32;
  RegisterFrom(later, endpoint, new_process);
  std::optional<Message> ack = Reply(later);
  ASSERT_TRUE(ack && std::holds_alternative<RegisterAck>(*ack));
  EXPECT_EQ(cluster_->Call([&] { return cluster_->controller().counters().worker_restarts; }), 0u);
}

// The same process back on a new connection (its register went unanswered,
// e.g. while the controller was stopped, and the next one went out on a
// fresh socket) keeps its device and what it runs: a run it holds is not
// started again, one sent on the connection it closed is sent again on the
// new one, and no attempt is lost.
TEST_F(WorkerReconnectTest, TheSameProcessOnANewConnectionKeepsWhatItRuns) {
  StartCluster(0);
  const std::string endpoint = cluster_->Call([&] { return cluster_->controller().endpoint(); });
  zmq::context_t ctx(1);
  zmq::socket_t first(ctx, zmq::socket_type::dealer), again(ctx, zmq::socket_type::dealer);
  RegisterMsg process = FakeWorker("tcp://127.0.0.1:1");
  process.instance = 61;
  process.cores = {{CoreKind::kCube, 2}};
  RegisterFrom(first, endpoint, process);
  std::optional<Message> ack = Reply(first);
  ASSERT_TRUE(ack && std::holds_alternative<RegisterAck>(*ack));
  const WorkerId me = std::get<RegisterAck>(*ack).worker_id;
  process.epoch = std::get<RegisterAck>(*ack).epoch;
  ASSERT_TRUE(
      Submit(R"({"name":"j","tasks":[{"id":"a","kernel":"noop"},{"id":"b","kernel":"noop"}]})")
          .ok());
  std::vector<TaskAssign> sent;
  while (sent.size() < 2) {
    std::optional<Message> m = Next(first, MsgType::kAssignBatch);
    ASSERT_TRUE(m.has_value()) << "got " << sent.size() << " of 2 tasks";
    for (const TaskAssign& t : std::get<AssignBatch>(*m).tasks) sent.push_back(t);
  }
  std::sort(sent.begin(), sent.end(),
            [](const TaskAssign& x, const TaskAssign& y) { return x.task < y.task; });
  const TaskAssign a = sent[0], b = sent[1];
  first.close();
  // Back holding a only: b was, say, still in flight to the old socket.
  process.held = {HeldTask{a.job, a.task, a.attempt, a.core, a.lane}};
  RegisterFrom(again, endpoint, process);
  ack = Reply(again);
  ASSERT_TRUE(ack && std::holds_alternative<RegisterAck>(*ack));
  EXPECT_EQ(std::get<RegisterAck>(*ack).worker_id, me) << "the same worker, not a new one";
  std::optional<Message> resent = Next(again, MsgType::kAssignBatch);
  ASSERT_TRUE(resent.has_value()) << "b was not sent again";
  const std::vector<TaskAssign>& tasks = std::get<AssignBatch>(*resent).tasks;
  ASSERT_EQ(tasks.size(), 1u);
  EXPECT_EQ(tasks[0].task, b.task) << "a runs there already";
  ReportDone(again, me, {a, tasks[0]});
  ASSERT_EQ(WaitForEnd(a.job), JobState::kSucceeded);
  cluster_->Call([&] {
    const Controller& c = cluster_->controller();
    EXPECT_EQ(c.workers().alive_count(), 1u);
    EXPECT_EQ(c.workers().size(), 1u) << "registered once";
    EXPECT_EQ(c.counters().worker_restarts, 0u);
    const JobRun& job = *c.scheduler().job(a.job);
    EXPECT_EQ(job.runs[a.task].attempt, a.attempt);
    EXPECT_EQ(job.runs[b.task].attempt, b.attempt + 1);
    EXPECT_EQ(job.runs[b.task].recalled, 1u) << "the lost attempt does not count";
  });
}

// A worker back on a new connection reports, beside the attempt it runs,
// another of the same run it holds no more than a result of (kept for a
// re-registration, or another controller's). That one is stale, but a
// CancelRuns names runs, not attempts: sent, it would stop the one that
// runs, whose result would then never come (fault_run.py --netns, seed
// 2003, hung for the harness's 3 minutes).
TEST_F(WorkerReconnectTest, AStaleReportOfARunItRunsDoesNotCancelIt) {
  StartCluster(0);
  const std::string endpoint = cluster_->Call([&] { return cluster_->controller().endpoint(); });
  zmq::context_t ctx(1);
  zmq::socket_t first(ctx, zmq::socket_type::dealer), again(ctx, zmq::socket_type::dealer);
  RegisterMsg process = FakeWorker("tcp://127.0.0.1:1");
  process.instance = 62;
  RegisterFrom(first, endpoint, process);
  std::optional<Message> ack = Reply(first);
  ASSERT_TRUE(ack && std::holds_alternative<RegisterAck>(*ack));
  const WorkerId me = std::get<RegisterAck>(*ack).worker_id;
  process.epoch = std::get<RegisterAck>(*ack).epoch;
  ASSERT_TRUE(Submit(R"({"name":"j","tasks":[{"id":"a","kernel":"noop"}]})").ok());
  std::optional<Message> m = Next(first, MsgType::kAssignBatch);
  ASSERT_TRUE(m.has_value());
  const TaskAssign a = std::get<AssignBatch>(*m).tasks.at(0);
  first.close();
  process.held = {HeldTask{a.job, a.task, a.attempt, a.core, a.lane},
                  HeldTask{a.job, a.task, a.attempt + 1, a.core, a.lane}};
  RegisterFrom(again, endpoint, process);
  ack = Reply(again);
  ASSERT_TRUE(ack.has_value());
  ASSERT_TRUE(std::holds_alternative<RegisterAck>(*ack))
      << "got " << MsgTypeName(TypeOf(*ack)) << " before the RegisterAck";
  ReportDone(again, me, {a});
  EXPECT_EQ(WaitForEnd(a.job), JobState::kSucceeded);
}

// A send to a worker whose connection has just closed fails (the peer is
// unknown to the ROUTER). That is no death: the worker has the disconnect
// grace to come back on a new connection, as when the close is read first,
// and the run sent into the void goes to it again. It was declared dead
// at once, so a worker that re-registered on a fresh socket (its register
// unanswered through a one-way partition) lost its device and had what it
// held run again (fault_run.py --netns, seed 310).
TEST_F(WorkerReconnectTest, ASendThatFailsLeavesTheWorkerItsGraceToComeBack) {
  ControllerOptions o;
  o.heartbeat_ms = 2000;  // a disconnect grace of 3 s
  o.worker_timeout_ms = 20000;
  StartCluster(0, "cube=1", o);
  const std::string endpoint = cluster_->Call([&] { return cluster_->controller().endpoint(); });
  zmq::context_t ctx(1);
  zmq::socket_t first(ctx, zmq::socket_type::dealer), again(ctx, zmq::socket_type::dealer);
  RegisterMsg process = FakeWorker("tcp://127.0.0.1:1");
  process.instance = 71;
  RegisterFrom(first, endpoint, process);
  std::optional<Message> ack = Reply(first);
  ASSERT_TRUE(ack && std::holds_alternative<RegisterAck>(*ack));
  const WorkerId me = std::get<RegisterAck>(*ack).worker_id;
  process.epoch = std::get<RegisterAck>(*ack).epoch;
  first.close();
  // Once the close is read, the ROUTER has no route to it: the send fails.
  ASSERT_TRUE(Eventually([&](const Controller& c) { return c.workers()[me].disconnected_at != 0; }))
      << "the controller never read the close";
  ASSERT_TRUE(Submit(R"({"name":"j","tasks":[{"id":"a","kernel":"noop"}]})").ok());
  ASSERT_TRUE(Eventually([](const Controller& c) { return c.counters().tasks_dispatched == 1; }))
      << "the run was never sent";
  EXPECT_TRUE(cluster_->Call([&] { return cluster_->controller().workers()[me].alive; }))
      << "declared dead when its send failed";
  RegisterFrom(again, endpoint, process);
  ack = Reply(again);
  ASSERT_TRUE(ack && std::holds_alternative<RegisterAck>(*ack));
  EXPECT_EQ(std::get<RegisterAck>(*ack).worker_id, me) << "the same worker, not a new one";
  std::optional<Message> resent = Next(again, MsgType::kAssignBatch);
  ASSERT_TRUE(resent.has_value()) << "the run was not sent again";
  const TaskAssign t = std::get<AssignBatch>(*resent).tasks.at(0);
  ReportDone(again, me, {t});
  ASSERT_EQ(WaitForEnd(t.job), JobState::kSucceeded);
  cluster_->Call([&] {
    const Controller& c = cluster_->controller();
    EXPECT_EQ(c.workers().size(), 1u) << "registered once";
    EXPECT_EQ(c.workers().alive_count(), 1u);
    EXPECT_EQ(c.scheduler().job(t.job)->runs[t.task].recalled, 1u)
        << "the attempt sent into the void does not count";
  });
}

// After a controller restart, a worker that comes back once the recovery
// window has closed may hold a member of a gang that is queued, waiting
// for devices (fault_run.py seed 202). Adopted alone, that member stayed
// counted in its queued gang, which was then sent without it ("collective
// kernel ran without a gang") and the job failed. The gang now starts over
// whole, on both workers.
TEST_F(WorkerReconnectTest, AGangMemberBroughtBackLateDoesNotSplitItsGang) {
  auto store = std::make_shared<InMemoryJobStore>();
  std::vector<StoreRecord> records;
  records.push_back(JobSubmittedRecord{
      1, "g",
      R"({"name":"g","tasks":[)"
      R"({"id":"m0","kernel":"allreduce","collective":{"group":"g","op":"allreduce"}},)"
      R"({"id":"m1","kernel":"allreduce","collective":{"group":"g","op":"allreduce"}}]})",
      1});
  ASSERT_TRUE(store->Write(records).ok());
  ControllerOptions o;
  o.store = store;
  o.recovery_grace_ms = 100;  // no worker expected: the window closes at once
  StartCluster(0, "cube=1", o);
  const std::string endpoint = cluster_->Call([&] { return cluster_->controller().endpoint(); });
  auto worker = [](const char* name, uint32_t pid) {
    RegisterMsg r = FakeWorker(std::string("tcp://127.0.0.1:") + std::to_string(pid));
    r.name = name;
    r.pid = pid;
    r.instance = pid;
    r.cores = {{CoreKind::kCube, 1}, {CoreKind::kVector, 1}};
    r.kernels = {"allreduce", "noop"};
    return r;
  };
  // The RegisterAck on `s` (a CancelRuns may come first).
  auto ack_of = [](zmq::socket_t& s) -> std::optional<RegisterAck> {
    for (int i = 0; i < 10; ++i) {
      std::optional<Message> m = Reply(s);
      if (m && std::holds_alternative<RegisterAck>(*m)) return std::get<RegisterAck>(*m);
    }
    return std::nullopt;
  };
  zmq::context_t ctx(1);
  zmq::socket_t early(ctx, zmq::socket_type::dealer), late(ctx, zmq::socket_type::dealer);
  RegisterFrom(early, endpoint, worker("early", 5001));
  const std::optional<RegisterAck> early_ack = ack_of(early);
  ASSERT_TRUE(early_ack.has_value());
  // One device: the gang of two is queued, waiting for a second.
  ASSERT_TRUE(Eventually([](const Controller& c) {
    const JobRun* job = c.scheduler().job(1);
    return !c.recovery().open() && job->runs[0].state == TaskState::kReady &&
           job->runs[1].state == TaskState::kReady;
  })) << "the gang was never queued";
  // The late worker still runs m1 (not the member the gang is queued
  // under) from before the restart, and says so.
  RegisterMsg back = worker("late", 5002);
  const CoreKind kind = cluster_->Call(
      [&] { return cluster_->controller().scheduler().job(1)->graph->spec_task(1).core; });
  back.held = {HeldTask{1, 1, 0, kind, 0}};
  back.epoch = early_ack->epoch;  // the store's: this controller's before its restart
  RegisterFrom(late, endpoint, back);
  const std::optional<RegisterAck> late_ack = ack_of(late);
  ASSERT_TRUE(late_ack.has_value());
  // Whatever each worker is sent it reports done at once: the gang must
  // run whole, never one member alone.
  JobState state = JobState::kRunning;
  for (int i = 0; i < 50 && !IsTerminal(state); ++i) {
    for (auto [s, id] :
         {std::pair{&early, early_ack->worker_id}, std::pair{&late, late_ack->worker_id}}) {
      zmq::pollitem_t item{s->handle(), 0, ZMQ_POLLIN, 0};
      while (zmq::poll(&item, 1, std::chrono::milliseconds(20)) == 1) {
        std::optional<Message> m = Reply(*s);
        if (m && std::holds_alternative<AssignBatch>(*m)) {
          ReportDone(*s, id, std::get<AssignBatch>(*m).tasks);
        }
      }
    }
    state = cluster_->Call([&] { return cluster_->controller().scheduler().job(1)->state; });
  }
  const std::string error =
      cluster_->Call([&] { return cluster_->controller().scheduler().job(1)->error; });
  EXPECT_EQ(state, JobState::kSucceeded) << error;
}

// A controller stalled past its workers' patience (SIGSTOP, a VM pause):
// each worker is declared dead, then the same process registers again and
// gets a new device. Its old device is not listed beside the new one: one
// row per worker in /pool (and `hmpmd pool`) and one busy series in
// /metrics, however many stalls: a stall adds no dead row.
TEST_F(WorkerReconnectTest, AWorkerBackAfterBeingDeclaredDeadIsListedOnce) {
  ControllerOptions o;
  o.heartbeat_ms = 50;
  o.worker_timeout_ms = 300;
  StartCluster(1, "cube=1", o);
  const std::string endpoint = cluster_->Call([&] { return cluster_->controller().endpoint(); });
  zmq::context_t ctx(1);
  RegisterMsg process = FakeWorker("tcp://127.0.0.1:1");
  process.instance = 51;
  for (int stall = 0; stall < 3; ++stall) {
    zmq::socket_t s(ctx, zmq::socket_type::dealer);
    RegisterFrom(s, endpoint, process);
    ASSERT_TRUE(Reply(s).has_value());
    // It sends no heartbeat, as if the controller heard none: dead after 300 ms.
    ASSERT_TRUE(WaitDead(51));
  }
  zmq::socket_t back(ctx, zmq::socket_type::dealer);
  RegisterFrom(back, endpoint, process);
  ASSERT_TRUE(Reply(back).has_value());
  cluster_->Call([&] {
    const Controller& c = cluster_->controller();
    ApiSnapshots snaps(&c, {}, [](TimeUs) { return std::string(); });
    const nlohmann::json pool =
        nlohmann::json::parse(snaps.RefreshOnLoop(Controller::NowUs())->pool);
    int rows = 0;
    for (const auto& d : pool["devices"]) {
      if (d.value("name", "") != "fake") continue;
      ++rows;
      EXPECT_TRUE(d.value("alive", false)) << d.dump();
    }
    EXPECT_EQ(rows, 1) << pool.dump();
    LiveMetrics metrics(&c);
    const std::string text = metrics.PrometheusText(Controller::NowUs(), "");
    int series = 0;
    std::istringstream lines(text);
    for (std::string line; std::getline(lines, line);) {
      series += line.rfind("hmpmd_device_busy_seconds_total{", 0) == 0 &&
                line.find("name=\"fake\"") != std::string::npos;
    }
    EXPECT_EQ(series, 1) << text;
  });
}

}  // namespace
}  // namespace hmpmd::testing
