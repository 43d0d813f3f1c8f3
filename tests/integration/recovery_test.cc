// Fault injection with real processes: the controller and workers are
// killed with SIGKILL mid-job. The controller runs with --db; workers log
// every successful kernel run (--exec-log), so "no completed task ran
// twice" is checked from the workers' side.
#include <gtest/gtest.h>
#include <signal.h>
#include <sqlite3.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <map>
#include <random>
#include <thread>

#include "process_cluster_fixture.h"

namespace hmpmd::testing {
namespace {

// A DAG of `n` sleep tasks: each task after the first `width` takes one or
// two inputs from earlier tasks, drawn with `seed`.
std::string DagSpec(int n, int width, int sleep_us, uint32_t seed) {
  std::mt19937 rng(seed);
  nlohmann::json tasks = nlohmann::json::array();
  for (int i = 0; i < n; ++i) {
    nlohmann::json t = {
        {"id", "t" + std::to_string(i)}, {"kernel", "sleep"}, {"args", {{"us", sleep_us}}}};
    if (i >= width) {
      nlohmann::json inputs = nlohmann::json::array();
      int a = static_cast<int>(rng() % i);
      inputs.push_back("t" + std::to_string(a));
      int b = static_cast<int>(rng() % i);
      if (b != a) inputs.push_back("t" + std::to_string(b));
      t["inputs"] = inputs;
    }
    tasks.push_back(t);
  }
  return nlohmann::json{{"name", "chaos"}, {"tasks", tasks}}.dump();
}

class RecoveryTest : public ProcessClusterFixture {
 protected:
  RecoveryTest() : ProcessClusterFixture("hmpmd-recovery") {}

  // Every run of the job's final record is done.
  void ExpectAllDone(uint32_t job, int n) {
    auto t = cluster_->Get("/api/v1/jobs/" + std::to_string(job) + "/tasks");
    ASSERT_TRUE(t.is_object());
    ASSERT_EQ(t["tasks"].size(), static_cast<size_t>(n));
    for (const auto& e : t["tasks"]) EXPECT_EQ(e["state"], "done") << e.dump();
  }
};

TEST_F(RecoveryTest, KilledControllerResumesWithoutRunningDoneTasksAgain) {
  ASSERT_TRUE(cluster_->StartController().ok());
  for (int i = 0; i < 2; ++i) ASSERT_TRUE(cluster_->StartWorker().ok());
  constexpr int kTasks = 40;
  auto id = cluster_->Submit(DagSpec(kTasks, 6, 30000, /*seed=*/7));
  ASSERT_TRUE(id.ok()) << id.status().ToString();
  WaitDone(*id, 10);
  cluster_->KillController();
  ASSERT_TRUE(cluster_->StartController().ok());
  auto j = cluster_->WaitJob(*id, 60000);
  ASSERT_EQ(j.value("state", ""), "succeeded") << j.dump();
  ExpectAllDone(*id, kTasks);
  // Both workers lived: every task ran exactly once, across the restart.
  std::map<uint32_t, int> runs;
  for (const auto& e : cluster_->ReadExecLog()) {
    if (e.job == *id) ++runs[e.task];
  }
  ASSERT_EQ(runs.size(), static_cast<size_t>(kTasks));
  for (const auto& [task, count] : runs) EXPECT_EQ(count, 1) << "task run " << task;
  // The history survives another restart, and new ids continue above it.
  cluster_->KillController();
  ASSERT_TRUE(cluster_->StartController().ok());
  // Its last records may not have reached the disk before the kill; then
  // the workers' reports complete it again, without running anything.
  auto again = cluster_->WaitJob(*id, 30000);
  ASSERT_TRUE(again.is_object());
  EXPECT_EQ(again["state"], "succeeded");
  for (const auto& e : cluster_->ReadExecLog()) {
    if (e.job == *id) --runs[e.task];
  }
  for (const auto& [task, count] : runs) EXPECT_EQ(count, 0) << "task run " << task << " ran again";
  auto next = cluster_->Submit(DagSpec(2, 2, 1000, 1));
  ASSERT_TRUE(next.ok());
  EXPECT_GT(*next, *id);
}

// The store lost the end of a step (its last writes died with the
// controller) while the worker had gone on into the next one. The restarted
// controller takes the worker's next-step runs back once the step before
// ends (from the worker's results), instead of stopping them and running
// them again: it dispatches only what nobody held. `down_ms`: how long the
// controller stays dead; long enough, the next-step runs end meanwhile and
// their results come in the same batch as the one that ends the step.
class NextStepRecoveryTest : public RecoveryTest {
 protected:
  void KillAcrossAStep(int down_ms) {
    ASSERT_TRUE(cluster_->StartController().ok());
    ASSERT_TRUE(cluster_->StartWorker().ok());
    // Two steps of a (1 s) -> b (noop): runs 0, 1 and then 2, 3.
    auto id = cluster_->Submit(R"({"repeat":2,"tasks":[
        {"id":"a","kernel":"sleep","args":{"us":1000000}},
        {"id":"b","kernel":"noop","inputs":["a"]}]})");
    ASSERT_TRUE(id.ok()) << id.status().ToString();
    WaitDone(*id, 2);  // step 1 over: run 2 starts on the worker
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    cluster_->KillController();
    // As if run 1's record had not reached the disk.
    sqlite3* db = nullptr;
    ASSERT_EQ(sqlite3_open(cluster_->db().c_str(), &db), SQLITE_OK);
    const std::string del =
        "DELETE FROM task_runs WHERE job = " + std::to_string(*id) + " AND run >= 1";
    EXPECT_EQ(sqlite3_exec(db, del.c_str(), nullptr, nullptr, nullptr), SQLITE_OK);
    EXPECT_EQ(sqlite3_changes(db), 1) << "run 1 only was stored";
    sqlite3_close(db);
    std::this_thread::sleep_for(std::chrono::milliseconds(down_ms));

    ASSERT_TRUE(cluster_->StartController().ok());
    auto j = cluster_->WaitJob(*id, 30000);
    ASSERT_EQ(j.value("state", ""), "succeeded") << j.dump();
    auto r = cluster_->Call("GET", "/metrics", "");
    ASSERT_TRUE(r.ok());
    auto counter = [&](const std::string& name) {
      size_t at = r->body.find("\n" + name + " ");
      return at == std::string::npos ? -1 : std::stod(r->body.substr(at + name.size() + 2));
    };
    // Run 2 ran on; run 3 too when it had been dispatched early, behind it.
    const double sent = counter("hmpmd_tasks_dispatched_total");
    EXPECT_LE(sent, 1) << "runs 2 and 3 were stopped and sent again";
    EXPECT_EQ(counter("hmpmd_adopted_runs_total"), 3 - sent) << "runs 1, 2 (and 3)";
    std::map<uint32_t, int> runs;
    for (const auto& e : cluster_->ReadExecLog()) {
      if (e.job == *id) ++runs[e.task];
    }
    for (uint32_t run = 0; run < 4; ++run) EXPECT_EQ(runs[run], 1) << "task run " << run;
  }
};

TEST_F(NextStepRecoveryTest, ARunningNextStepRunIsAdoptedNotRunAgain) { KillAcrossAStep(0); }

TEST_F(NextStepRecoveryTest, AFinishedNextStepRunsResultIsTakenNotRunAgain) {
  KillAcrossAStep(1500);  // run 2 ends while the controller is dead
}

TEST_F(RecoveryTest, KilledWorkerTasksEndDoneExactlyOnce) {
  ASSERT_TRUE(cluster_->StartController().ok());
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(cluster_->StartWorker().ok());
  constexpr int kTasks = 40;
  auto id = cluster_->Submit(DagSpec(kTasks, 8, 30000, /*seed=*/11));
  ASSERT_TRUE(id.ok()) << id.status().ToString();
  WaitDone(*id, 8);
  pid_t victim = cluster_->worker_pid(0);
  cluster_->KillWorker(0);
  auto j = cluster_->WaitJob(*id, 60000);
  ASSERT_EQ(j.value("state", ""), "succeeded") << j.dump();
  ExpectAllDone(*id, kTasks);
  std::map<uint32_t, int> survivors;
  std::map<uint32_t, int> any;
  for (const auto& e : cluster_->ReadExecLog()) {
    if (e.job != *id) continue;
    ++any[e.task];
    if (e.pid != victim) ++survivors[e.task];
  }
  EXPECT_EQ(any.size(), static_cast<size_t>(kTasks));
  for (const auto& [task, count] : survivors) EXPECT_EQ(count, 1) << "task run " << task;
}

// A worker that comes back after the grace still runs attempts the
// restarted controller has placed again elsewhere, under the same attempt
// numbers (they start at 0 after a restart). It is told to cancel them,
// and its reports of those cancelled attempts must not end the runs on the
// other worker (the job would fail with "sleep: cancelled").
TEST_F(RecoveryTest, ALateWorkersCancelledAttemptsDoNotEndTheRunsThatMovedOn) {
  cluster_->set_recovery_grace_ms(300);
  ASSERT_TRUE(cluster_->StartController().ok());
  ASSERT_TRUE(cluster_->StartWorker({}, "cube=2,vector=1").ok());
  ASSERT_TRUE(cluster_->WaitWorkers(1, 10000));
  auto id = cluster_->Submit(
      R"({"name":"two","tasks":[{"id":"a","kernel":"sleep","args":{"us":2500000}},)"
      R"({"id":"b","kernel":"sleep","args":{"us":2500000}}]})");
  ASSERT_TRUE(id.ok()) << id.status().ToString();
  // Both run on the first worker before the second joins.
  bool running = false;
  for (int i = 0; i < 200 && !running; ++i) {
    auto t = cluster_->Get("/api/v1/jobs/" + std::to_string(*id) + "/tasks");
    running = t.is_object() && t["tasks"].size() == 2 && t["tasks"][0]["state"] == "running" &&
              t["tasks"][1]["state"] == "running";
    if (!running) std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  ASSERT_TRUE(running);
  ASSERT_TRUE(cluster_->StartWorker({}, "cube=2,vector=1").ok());
  ASSERT_TRUE(cluster_->WaitWorkers(2, 10000));
  cluster_->KillController();
  const pid_t late = cluster_->worker_pid(0);
  ASSERT_EQ(::kill(late, SIGSTOP), 0);
  const Status started = cluster_->StartController();
  // The grace ends without it; both runs go to the other worker.
  std::this_thread::sleep_for(std::chrono::milliseconds(1000));
  ASSERT_EQ(::kill(late, SIGCONT), 0);
  ASSERT_TRUE(started.ok()) << started.ToString();
  auto j = cluster_->WaitJob(*id, 30000);
  EXPECT_EQ(j.value("state", ""), "succeeded") << j.dump();
}

// A run a surviving worker still runs across a controller restart keeps
// its start: the job's time counts from it, not from the restart (an 8 s
// job said it took 4.5 s).
TEST_F(RecoveryTest, AJobRunningAcrossARestartKeepsItsStartTime) {
  ASSERT_TRUE(cluster_->StartController().ok());
  ASSERT_TRUE(cluster_->StartWorker().ok());
  ASSERT_TRUE(cluster_->WaitWorkers(1, 10000));
  auto id = cluster_->Submit(
      R"({"name":"one","tasks":[{"id":"a","kernel":"sleep","args":{"us":1500000}}]})");
  ASSERT_TRUE(id.ok()) << id.status().ToString();
  nlohmann::json before;
  for (int i = 0; i < 200; ++i) {
    before = cluster_->Get("/api/v1/jobs/" + std::to_string(*id));
    if (before.is_object() && before.value("running", 0) == 1) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  ASSERT_EQ(before.value("running", 0), 1) << before.dump();
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  cluster_->KillController();
  ASSERT_TRUE(cluster_->StartController().ok());
  auto j = cluster_->WaitJob(*id, 30000);
  ASSERT_EQ(j.value("state", ""), "succeeded") << j.dump();
  EXPECT_LE(j["started_us"].get<int64_t>(), before["started_us"].get<int64_t>() + 100000)
      << j.dump();
  EXPECT_GE(j["finished_us"].get<int64_t>() - j["started_us"].get<int64_t>(), 1500000) << j.dump();
}

// An ended job's figures survive a restart: its reloaded runs have no
// cores to compute them from, so they are kept with its end (else the
// summary would have its makespan only).
TEST_F(RecoveryTest, AnEndedJobKeepsItsFiguresAcrossARestart) {
  ASSERT_TRUE(cluster_->StartController().ok());
  ASSERT_TRUE(cluster_->StartWorker().ok());
  ASSERT_TRUE(cluster_->WaitWorkers(1, 10000));
  auto id = cluster_->Submit(DagSpec(6, 2, 20000, /*seed=*/3));
  ASSERT_TRUE(id.ok()) << id.status().ToString();
  auto before = cluster_->WaitJob(*id, 30000);
  ASSERT_EQ(before.value("state", ""), "succeeded") << before.dump();
  ASSERT_TRUE(before.contains("lower_bound_s")) << before.dump();
  cluster_->StopController();
  ASSERT_TRUE(cluster_->StartController().ok());
  auto after = cluster_->Get("/api/v1/jobs/" + std::to_string(*id));
  ASSERT_EQ(after.value("state", ""), "succeeded") << after.dump();
  for (const char* key :
       {"makespan_s", "lower_bound_s", "critical_path_s", "utilisation", "utilisation_by_kind",
        "masking_ratio", "bubble_ratio", "comm_s", "critical_path"}) {
    ASSERT_TRUE(after.contains(key)) << key << " is missing after the restart: " << after.dump();
    EXPECT_EQ(after[key], before[key]) << key;
  }
}

// Both faults, several times in one job, at points drawn from a fixed seed.
TEST_F(RecoveryTest, RepeatedControllerAndWorkerKillsWithFixedSeed) {
  constexpr uint32_t kSeed = 2026;
  std::mt19937 rng(kSeed);
  SCOPED_TRACE("seed " + std::to_string(kSeed));
  ASSERT_TRUE(cluster_->StartController().ok());
  for (int i = 0; i < 4; ++i) ASSERT_TRUE(cluster_->StartWorker().ok());
  constexpr int kTasks = 80;
  auto id = cluster_->Submit(DagSpec(kTasks, 8, 20000, kSeed));
  ASSERT_TRUE(id.ok()) << id.status().ToString();
  std::vector<pid_t> victims;
  uint64_t at = 0;
  for (int round = 0; round < 4; ++round) {
    at += 8 + rng() % 8;
    WaitDone(*id, at);
    if (round % 2 == 0) {
      cluster_->KillController();
      ASSERT_TRUE(cluster_->StartController().ok());
    } else {
      size_t w = round / 2;  // workers 0 and 1 die; 2 and 3 stay
      victims.push_back(cluster_->worker_pid(w));
      cluster_->KillWorker(w);
    }
  }
  auto j = cluster_->WaitJob(*id, 90000);
  ASSERT_EQ(j.value("state", ""), "succeeded") << j.dump();
  ExpectAllDone(*id, kTasks);
  std::map<uint32_t, int> survivors, any;
  for (const auto& e : cluster_->ReadExecLog()) {
    if (e.job != *id) continue;
    ++any[e.task];
    if (std::find(victims.begin(), victims.end(), e.pid) == victims.end()) ++survivors[e.task];
  }
  EXPECT_EQ(any.size(), static_cast<size_t>(kTasks));
  for (const auto& [task, count] : survivors) EXPECT_EQ(count, 1) << "task run " << task;
}

// History retention holds across restarts: --keep-jobs bounds the finished
// jobs kept (in memory and in the file), --keep-hours drops older ones.
TEST_F(RecoveryTest, RetentionByCountAndAgeHoldsAcrossRestarts) {
  // No grace: a job beyond the count is forgotten as soon as it is.
  ASSERT_TRUE(cluster_->StartController({"--keep-jobs", "3", "--keep-grace-s", "0"}).ok());
  ASSERT_TRUE(cluster_->StartWorker().ok());
  std::vector<uint32_t> ids;
  for (uint32_t i = 0; i < 4; ++i) {
    auto id = cluster_->Submit(DagSpec(2, 2, 1000, i));
    ASSERT_TRUE(id.ok()) << id.status().ToString();
    ASSERT_EQ(cluster_->WaitJob(*id, 30000).value("state", ""), "succeeded");
    ids.push_back(*id);
  }
  auto kept = [&](uint32_t id) {
    return cluster_->Get("/api/v1/jobs/" + std::to_string(id)).is_object();
  };
  EXPECT_FALSE(kept(ids[0])) << "beyond --keep-jobs 3";
  for (int i = 1; i < 4; ++i) EXPECT_TRUE(kept(ids[i])) << "job " << ids[i];
  // A restart with a smaller count forgets the oldest at once.
  cluster_->KillController();
  ASSERT_TRUE(cluster_->StartController({"--keep-jobs", "2"}).ok());
  // Trimmed by the restarted controller's first retention check (bounded wait).
  for (int i = 0; i < 250 && kept(ids[1]); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  EXPECT_FALSE(kept(ids[1]));
  EXPECT_TRUE(kept(ids[2]));
  EXPECT_TRUE(kept(ids[3]));
  EXPECT_EQ(cluster_->Get("/api/v1/jobs/" + std::to_string(ids[3])).value("state", ""),
            "succeeded");
  // Every job ended more than 0.36 ms ago: a restart with that age limit
  // forgets them all at its first check (each heartbeat period).
  cluster_->KillController();
  ASSERT_TRUE(cluster_->StartController({"--keep-hours", "0.0000001"}).ok());
  for (int i = 0; i < 500 && kept(ids[3]); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  EXPECT_FALSE(kept(ids[3])) << "older than --keep-hours";
  EXPECT_FALSE(kept(ids[2]));
  // And the file forgot them too (a clean stop writes what is pending).
  cluster_->StopController();
  ASSERT_TRUE(cluster_->StartController({"--keep-hours", "1000"}).ok());
  EXPECT_FALSE(kept(ids[2]));
  EXPECT_FALSE(kept(ids[3]));
  // Their ids are not given out again.
  auto next = cluster_->Submit(DagSpec(2, 2, 1000, 9));
  ASSERT_TRUE(next.ok()) << next.status().ToString();
  EXPECT_GT(*next, ids[3]);
}

}  // namespace
}  // namespace hmpmd::testing
