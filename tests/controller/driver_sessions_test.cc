// DriverSessions against the real scheduler (through SchedulerOpenJobs) and
// a fake controller around it that records what it is asked to send: how a
// session opens, grows, is refused, falls silent and ends.
#include "hmpmd/controller/driver_sessions.h"

#include <gtest/gtest.h>

#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "hmpmd/controller/job_spec_parser.h"

namespace hmpmd {
namespace {

constexpr TimeUs kNow = 1'000'000;

// The controller as the sessions see it: admits jobs into the scheduler
// (answering at once, or when Settle() is called, as a store write would)
// and records every message.
class FakeHost : public DriverSessions::Host {
 public:
  explicit FakeHost(Scheduler* s) : scheduler_(s) {}

  void SendTo(const std::string& identity, const Message& m) override {
    sent.emplace_back(identity, m);
  }
  void SendToLiveWorkers(const Message& m) override { to_workers.push_back(m); }
  Result<JobId> SubmitOpenJob(JobSubmission job, SubmitDone done) override {
    stored_specs.push_back(job.spec_json);
    auto id = scheduler_->AddJob(std::move(job.graph), kNow);
    if (!id.ok() || !hold_answers) {
      done(id);
      return id;
    }
    held.push_back([id = *id, done](const Status& write) {
      done(write.ok() ? Result<JobId>(id) : Result<JobId>(write));
    });
    return id;
  }
  Status RoomForRuns(uint64_t, const std::string&) override { return room; }
  void RefusedToken(const std::string& name) override { refused_tokens.push_back(name); }
  void UnknownPeer() override { ++unknown_peers; }
  void AfterStored(std::function<void()> fn) override {
    if (!hold_stored) return fn();
    stored_waiters.push_back(std::move(fn));
  }
  bool Storing() const override { return storing; }
  void Store(StoreRecord record) override { records.push_back(std::move(record)); }
  // The records of type T given to Store().
  template <typename T>
  std::vector<T> Records() const {
    std::vector<T> out;
    for (const StoreRecord& r : records) {
      if (const T* t = std::get_if<T>(&r)) out.push_back(*t);
    }
    return out;
  }
  // The last message of type T sent to `identity` (others after it too).
  template <typename T>
  T LastOf(const std::string& identity) {
    for (auto it = sent.rbegin(); it != sent.rend(); ++it) {
      if (it->first != identity) continue;
      if (const T* m = std::get_if<T>(&it->second)) return *m;
    }
    ADD_FAILURE() << "no " << MsgTypeName(TypeOf(Message(T{}))) << " sent to " << identity;
    return T{};
  }
  // Runs what waited for the store.
  void Stored() {
    for (auto& fn : std::exchange(stored_waiters, {})) fn();
  }

  // Answers the held submits as a store write that ended with `write`.
  void Settle(const Status& write) {
    for (auto& fn : held) fn(write);
    held.clear();
  }
  // The last message sent to `identity`, as a T; fails the test if it is
  // not one.
  template <typename T>
  T Last(const std::string& identity) {
    for (auto it = sent.rbegin(); it != sent.rend(); ++it) {
      if (it->first != identity) continue;
      if (const T* m = std::get_if<T>(&it->second)) return *m;
      ADD_FAILURE() << "the last message to " << identity << " is a "
                    << MsgTypeName(TypeOf(it->second));
      return T{};
    }
    ADD_FAILURE() << "nothing sent to " << identity;
    return T{};
  }

  bool hold_answers = false;
  bool hold_stored = false;  // AfterStored() waits for Stored()
  bool storing = false;      // Storing(): records go to `records`
  std::vector<StoreRecord> records;
  std::vector<std::function<void()>> stored_waiters;
  Status room;
  std::vector<std::pair<std::string, Message>> sent;
  std::vector<Message> to_workers;
  std::vector<std::string> stored_specs;
  std::vector<std::string> refused_tokens;
  int unknown_peers = 0;

 private:
  Scheduler* scheduler_;
  std::vector<std::function<void(const Status&)>> held;
};

class DriverSessionsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto policy = MakePolicy("hmpmd");
    ASSERT_TRUE(policy.ok());
    scheduler_ = std::make_unique<Scheduler>(SchedulerOptions{}, std::move(policy).value());
    open_jobs_ = std::make_unique<SchedulerOpenJobs>(scheduler_.get());
    host_ = std::make_unique<FakeHost>(scheduler_.get());
    sessions_ = std::make_unique<DriverSessions>(host_.get(), open_jobs_.get(), &tokens_);
    token_.hi = 7;
    token_.lo = 9;
    sessions_->set_data_token(token_);
  }
  // Opens a session for `identity` and returns its job (0 if refused).
  JobId Open(const std::string& identity, const std::string& token = "s3cret",
             const std::string& name = "drv") {
    SessionOpen m;
    m.name = name;
    m.token = token;
    m.heartbeat_ms = 100;  // silent for 1 s: lost
    sessions_->Open(identity, m, kNow);
    if (host_->hold_answers) return 0;
    return host_->Last<SessionAck>(identity).job;
  }
  static SessionSubmit Group(JobId job, uint64_t seq, std::vector<WireTask> tasks) {
    SessionSubmit m;
    m.job = job;
    m.groups.push_back(SubmitGroup{seq, {}, std::move(tasks)});
    return m;
  }
  static WireTask Task(const std::string& id, const std::string& kernel = "noop",
                       std::vector<std::string> inputs = {}) {
    WireTask t;
    t.id = id;
    t.kernel = kernel;
    t.inputs = std::move(inputs);
    return t;
  }

  std::unique_ptr<Scheduler> scheduler_;
  std::unique_ptr<SchedulerOpenJobs> open_jobs_;
  std::unique_ptr<FakeHost> host_;
  TokenBook tokens_{"s3cret"};
  std::unique_ptr<DriverSessions> sessions_;
  DataToken token_;
};

TEST_F(DriverSessionsTest, AnOpenSessionIsAnOpenJobAcknowledgedWithItsJobsDataToken) {
  const JobId job = Open("d1");
  ASSERT_NE(job, 0u);
  const SessionAck ack = host_->Last<SessionAck>("d1");
  EXPECT_TRUE(ack.error.empty()) << ack.error;
  EXPECT_EQ(ack.data_token, JobDataToken(token_, job)) << "the job's own, not the cluster's";
  ASSERT_NE(scheduler_->job(job), nullptr);
  EXPECT_TRUE(scheduler_->job(job)->graph->open());
  EXPECT_FALSE(sessions_->empty());
  ASSERT_EQ(host_->stored_specs.size(), 1u);
  EXPECT_TRUE(DriverSessions::IsStoredSession(host_->stored_specs[0]));
  EXPECT_FALSE(DriverSessions::IsStoredSession(R"({"name":"drv","tasks":[]})"));
}

TEST_F(DriverSessionsTest, AStoredSessionIsAcknowledgedOnlyOnceWrittenAndForgottenIfNot) {
  host_->hold_answers = true;
  Open("d1");
  EXPECT_TRUE(host_->sent.empty()) << "no ack before the job's record is written";
  host_->Settle(Status::Unavailable("disk full"));
  const SessionAck ack = host_->Last<SessionAck>("d1");
  EXPECT_EQ(ack.job, 0u);
  EXPECT_EQ(ack.error, "disk full");
  EXPECT_EQ(ack.code, static_cast<uint8_t>(StatusCode::kUnavailable));
  EXPECT_TRUE(sessions_->empty());
  // The connection may open a session again.
  host_->hold_answers = false;
  EXPECT_NE(Open("d1"), 0u);
}

TEST_F(DriverSessionsTest, OpensAreRefusedForAWrongTokenASecondSessionOrABadName) {
  EXPECT_EQ(Open("d1", "guess"), 0u);
  EXPECT_EQ(host_->Last<SessionAck>("d1").code,
            static_cast<uint8_t>(StatusCode::kPermissionDenied));
  EXPECT_EQ(host_->refused_tokens, std::vector<std::string>{"drv"});
  ASSERT_NE(Open("d1"), 0u);
  EXPECT_EQ(Open("d1"), 0u);
  EXPECT_EQ(host_->Last<SessionAck>("d1").error, "this connection already has a session");
  EXPECT_EQ(Open("d2", "s3cret", "two\nlines"), 0u);
  EXPECT_EQ(host_->Last<SessionAck>("d2").error,
            "session name: contains the control character U+000A");
  EXPECT_EQ(Open("d3", "s3cret", std::string(SpecLimits{}.max_string + 1, 'x')), 0u);
  EXPECT_EQ(scheduler_->jobs().size(), 1u) << "refusals add no job";
}

TEST_F(DriverSessionsTest, GroupsAreAckedAtTheFlushAndARefusedTaskExplainsItsDependents) {
  const JobId job = Open("d1");
  SessionSubmit first = Group(job, 1, {Task("a"), Task("g", "gemm")});  // gemm needs m, n, k
  sessions_->Submit("d1", first, kNow);
  SessionSubmit second = Group(job, 2, {Task("b", "noop", {"g"})});
  sessions_->Submit("d1", second, kNow);
  SessionSubmit third = Group(job, 3, {Task("c")});
  sessions_->Submit("d1", third, kNow);
  host_->sent.clear();
  sessions_->Flush(kNow, kNow);
  const SessionUpdate u = host_->Last<SessionUpdate>("d1");
  ASSERT_EQ(u.acks.size(), 3u);
  EXPECT_NE(u.acks[0].error.find("gemm"), std::string::npos) << u.acks[0].error;
  EXPECT_EQ(u.acks[1].error, "tasks[0] 'b': inputs[0]: task 'g' was refused at submission");
  EXPECT_TRUE(u.acks[2].error.empty()) << u.acks[2].error;
  EXPECT_EQ(u.acks[2].first_task, 0u) << "refused groups append nothing";
  EXPECT_EQ(scheduler_->job(job)->graph->size(), 1u);
  host_->sent.clear();
  sessions_->Flush(kNow, kNow);
  EXPECT_TRUE(host_->sent.empty()) << "each ack is sent once";
}

TEST_F(DriverSessionsTest, AGroupOverTheHeldRunsBoundIsRefused) {
  const JobId job = Open("d1");
  host_->room = Status::Unavailable("group 1: over --max-held-runs");
  SessionSubmit m = Group(job, 1, {Task("a")});
  sessions_->Submit("d1", m, kNow);
  sessions_->Flush(kNow, kNow);
  EXPECT_EQ(host_->Last<SessionUpdate>("d1").acks.at(0).error, "group 1: over --max-held-runs");
}

TEST_F(DriverSessionsTest, ADriverWithoutASessionHearsWhyAndIsCounted) {
  SessionControl m;
  m.job = 42;
  sessions_->Control("stranger", m, kNow);
  EXPECT_EQ(host_->unknown_peers, 1);
  const SessionUpdate u = host_->Last<SessionUpdate>("stranger");
  EXPECT_TRUE(u.closed);
  EXPECT_EQ(u.job_state, "failed");
  EXPECT_EQ(u.job_error, "no such driver session");
}

TEST_F(DriverSessionsTest, AHeartbeatIsAnsweredAndAnAbortCancelsTheJobOnTheWorkers) {
  const JobId job = Open("d1");
  SessionSubmit g = Group(job, 1, {Task("a")});
  sessions_->Submit("d1", g, kNow);
  SessionControl beat;
  beat.job = job;
  sessions_->Control("d1", beat, kNow);
  EXPECT_EQ(host_->Last<SessionUpdate>("d1").job, job);
  SessionControl abort;
  abort.job = job;
  abort.close = SessionControl::kAbort;
  sessions_->Control("d1", abort, kNow);
  EXPECT_EQ(scheduler_->job(job)->state, JobState::kCancelled);
  ASSERT_EQ(host_->to_workers.size(), 1u);
  EXPECT_EQ(std::get<CancelJob>(host_->to_workers[0]).job, job);
}

TEST_F(DriverSessionsTest, ASilentDriverLosesItsSessionWhichEndsFailed) {
  const JobId job = Open("d1");
  SessionControl beat;
  beat.job = job;
  sessions_->Control("d1", beat, kNow + 900'000);
  sessions_->Flush(kNow + 1'800'000, kNow + 1'800'000);
  EXPECT_FALSE(IsTerminal(scheduler_->job(job)->state)) << "heard from 0.9 s ago";
  sessions_->Flush(kNow + 2'000'000, kNow + 2'000'000);
  EXPECT_EQ(scheduler_->job(job)->state, JobState::kFailed);
  EXPECT_EQ(scheduler_->job(job)->error, "driver session lost: no message from the driver");
  ASSERT_EQ(host_->to_workers.size(), 1u);
  EXPECT_EQ(std::get<CancelJob>(host_->to_workers[0]).job, job);
}

TEST_F(DriverSessionsTest, EndedRunsAndTheJobsEndReachTheDriverWhichIsThenForgotten) {
  const JobId job = Open("d1");
  sessions_->OnRunDone(job, 0, "tcp://w:1", 64, 1);
  sessions_->OnRunDone(job + 1, 0, "tcp://w:1", 64, 1);  // no session: ignored
  sessions_->OnRunEnded(RunEnded{job, 1, TaskState::kCancelled, "cancelled", 0});
  sessions_->Flush(kNow, kNow);
  const SessionUpdate u = host_->Last<SessionUpdate>("d1");
  ASSERT_EQ(u.ended.size(), 2u);
  EXPECT_EQ(u.ended[0].state, TaskEnded::kDone);
  EXPECT_EQ(u.ended[0].endpoint, "tcp://w:1");
  EXPECT_EQ(u.ended[1].state, TaskEnded::kCancelled);

  JobRun ended = *scheduler_->job(job);
  ended.state = JobState::kSucceeded;
  EXPECT_FALSE(sessions_->End(job + 1, ended));
  EXPECT_TRUE(sessions_->End(job, ended));
  const SessionUpdate last = host_->Last<SessionUpdate>("d1");
  EXPECT_TRUE(last.closed);
  EXPECT_EQ(last.job_state, "succeeded");
  ASSERT_EQ(host_->to_workers.size(), 1u);
  EXPECT_EQ(std::get<FreeJob>(host_->to_workers[0]).job, job) << "its outputs are freed";
  EXPECT_TRUE(sessions_->empty());
  SessionControl late;
  late.job = job;
  sessions_->Control("d1", late, kNow);
  EXPECT_EQ(host_->unknown_peers, 1) << "the session is gone";
}

// The driver hears its session ended only once that end is stored: told
// "succeeded", it must not find the session failed as lost after a restart.
TEST_F(DriverSessionsTest, TheEndReachesTheDriverOnceItIsStored) {
  const JobId job = Open("d1");
  host_->sent.clear();
  host_->hold_stored = true;
  JobRun ended = *scheduler_->job(job);
  ended.state = JobState::kSucceeded;
  EXPECT_TRUE(sessions_->End(job, ended));
  EXPECT_TRUE(host_->sent.empty()) << "told before its end was stored";
  host_->Stored();
  const SessionUpdate last = host_->Last<SessionUpdate>("d1");
  EXPECT_TRUE(last.closed);
  EXPECT_EQ(last.job_state, "succeeded");
}

// A controller after a restart: a scheduler and sessions of its own.
struct Restarted {
  Restarted(const TokenBook* tokens, const DataToken& data_token)
      : scheduler(SchedulerOptions{}, MakePolicy("hmpmd").value()),
        jobs(&scheduler),
        host(&scheduler),
        sessions(&host, &jobs, tokens) {
    sessions.set_data_token(data_token);
  }
  // The spec of the fixture's sessions' open job.
  static JobSpec Spec() {
    JobSpec spec;
    spec.name = "drv";
    return spec;
  }
  Scheduler scheduler;
  SchedulerOpenJobs jobs;
  FakeHost host;
  DriverSessions sessions;
};

// A session rebuilt from what it stored (a controller's restart): its
// groups, refused ones too, and its runs that ended; its driver takes it up
// from a new connection and hears what it missed.
TEST_F(DriverSessionsTest, ASessionIsRebuiltFromItsStoreAndResumedByItsDriver) {
  host_->storing = true;
  const JobId job = Open("d1");
  SessionSubmit one = Group(job, 1, {Task("a"), Task("b", "noop", {"a"})});
  sessions_->Submit("d1", one, kNow);
  SessionSubmit two = Group(job, 2, {Task("g", "gemm")});  // refused: no sizes
  sessions_->Submit("d1", two, kNow);
  SessionSubmit three = Group(job, 3, {Task("c")});
  sessions_->Submit("d1", three, kNow);
  SessionControl cancel;
  cancel.job = job;
  cancel.cancel = {2};
  sessions_->Control("d1", cancel, kNow);
  for (RunEnded& e : scheduler_->TakeEnded()) sessions_->OnRunEnded(std::move(e));
  const auto groups = host_->Records<SessionGroupRecord>();
  ASSERT_EQ(groups.size(), 3u);
  EXPECT_EQ(groups[1].index, 1u);
  EXPECT_NE(groups[1].error.find("gemm"), std::string::npos) << groups[1].error;
  const auto ends = host_->Records<RunEndedRecord>();
  ASSERT_EQ(ends.size(), 1u);
  EXPECT_EQ(ends[0].run, 2u);
  EXPECT_TRUE(ends[0].cancelled);

  // The restart: a new scheduler and sessions, rebuilt from the records
  // (run 0 done), as Controller::RestoreSession does.
  Restarted after(&tokens_, token_);
  Scheduler& scheduler = after.scheduler;
  FakeHost& host = after.host;
  DriverSessions& sessions = after.sessions;
  std::shared_ptr<JobGraph> graph = JobGraph::BuildOpen(Restarted::Spec()).value();
  auto replayed = DriverSessions::Replay(groups, graph.get());
  ASSERT_TRUE(replayed.ok()) << replayed.status().ToString();
  ASSERT_EQ(graph->size(), 3u) << "a, b and c; the refused g took no place";
  ASSERT_TRUE(
      scheduler
          .RestoreJob(job, graph, {{0, 0, 10, 20, 8, 1}}, JobState::kQueued, "", kNow, -1, kNow)
          .ok());
  ASSERT_TRUE(scheduler.RestoreRunEnded(job, 2, true, "cancelled by the driver", kNow).ok());
  sessions.Restore(job, std::move(replayed).value(), 100, kNow);
  for (RunEnded& e : scheduler.TakeEnded()) sessions.OnRunEnded(std::move(e));
  const JobRun& run = *scheduler.job(job);
  EXPECT_TRUE(run.open);
  EXPECT_EQ(run.runs[0].state, TaskState::kDone);
  EXPECT_EQ(run.runs[1].state, TaskState::kReady) << "b's input is done";
  EXPECT_EQ(run.runs[2].state, TaskState::kCancelled) << "not run again";

  SessionOpen resume;
  resume.token = "s3cret";
  resume.heartbeat_ms = 100;
  resume.resume = job;
  resume.acked_seq = 1;  // the driver heard the first group's ack only
  sessions.Open("stranger", resume, kNow);
  EXPECT_EQ(host.Last<SessionAck>("stranger").code, static_cast<uint8_t>(StatusCode::kNotFound))
      << "a job id alone does not resume a session";
  resume.resume_token = JobDataToken(token_, job);
  sessions.Open("d2", resume, kNow);
  const SessionAck ack = host.LastOf<SessionAck>("d2");
  EXPECT_EQ(ack.job, job) << ack.error;
  EXPECT_EQ(ack.resumed_seq, 3u) << "the last group it holds";
  const SessionUpdate u = host.Last<SessionUpdate>("d2");
  ASSERT_EQ(u.acks.size(), 2u);
  EXPECT_EQ(u.acks[0].seq, 2u);
  EXPECT_FALSE(u.acks[0].error.empty());
  EXPECT_EQ(u.acks[1].seq, 3u);
  EXPECT_EQ(u.acks[1].first_task, 2u);
  ASSERT_EQ(u.ended.size(), 2u);
  EXPECT_EQ(u.ended[0].task, 0u);
  EXPECT_EQ(u.ended[0].state, TaskEnded::kDone);
  EXPECT_EQ(u.ended[1].task, 2u);
  EXPECT_EQ(u.ended[1].state, TaskEnded::kCancelled);
  EXPECT_EQ(u.ended[1].error, "cancelled by the driver");
  // The session goes on: a task naming the refused one still hears why.
  SessionSubmit four = Group(job, 4, {Task("d", "noop", {"g"})});
  sessions.Submit("d2", four, kNow);
  sessions.Flush(kNow, kNow);
  EXPECT_EQ(host.Last<SessionUpdate>("d2").acks.at(0).error,
            "tasks[3] 'd': inputs[0]: task 'g' was refused at submission");
}

TEST_F(DriverSessionsTest, ARestoredSessionNotResumedInTimeEndsFailed) {
  const JobId job = Open("d1");
  // As a restarted controller holds it: detached, waiting.
  Restarted after(&tokens_, DataToken{});
  Scheduler& scheduler = after.scheduler;
  FakeHost& host = after.host;
  DriverSessions& sessions = after.sessions;
  ASSERT_TRUE(scheduler
                  .RestoreJob(job, JobGraph::BuildOpen(Restarted::Spec()).value(), {},
                              JobState::kQueued, "", kNow, -1, kNow)
                  .ok());
  sessions.Restore(job, {}, 100, kNow);
  const TimeUs window = DriverSessions::ResumeWindowUs(1'000'000);
  sessions.Flush(kNow + window - 1, kNow + window - 1);
  EXPECT_FALSE(IsTerminal(scheduler.job(job)->state)) << "its driver has until the window ends";
  sessions.RestartWaits(kNow + window);
  sessions.Flush(kNow + window + 1, kNow + window + 1);
  EXPECT_FALSE(IsTerminal(scheduler.job(job)->state)) << "the wait restarted";
  sessions.Flush(kNow + 2 * window + 1, kNow + 2 * window + 1);
  EXPECT_EQ(scheduler.job(job)->state, JobState::kFailed);
  EXPECT_NE(scheduler.job(job)->error.find("its driver did not resume it"), std::string::npos)
      << scheduler.job(job)->error;
  // A resume now hears that it ended, and why.
  SessionOpen resume;
  resume.token = "s3cret";
  resume.resume = job;
  resume.resume_token = JobDataToken(DataToken{}, job);
  sessions.Open("d2", resume, kNow);
  EXPECT_EQ(host.Last<SessionAck>("d2").code, static_cast<uint8_t>(StatusCode::kAborted));
  EXPECT_NE(host.Last<SessionAck>("d2").error.find("ended failed"), std::string::npos);
}

}  // namespace
}  // namespace hmpmd
