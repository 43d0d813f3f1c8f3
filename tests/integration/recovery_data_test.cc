// Recovery with real tensors: chains of `scale` and `add` tasks over float
// buffers (slowed by `sleep` tasks between them), with the controller and
// workers killed by SIGKILL mid-job. The final output is fetched from the
// worker holding it and compared with a reference the same workers make;
// the exec log shows which task runs ran where and how often.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <map>
#include <random>
#include <thread>

#include "hmpmd/worker/fetch.h"
#include "process_cluster_fixture.h"

namespace hmpmd::testing {
namespace {

constexpr int kElems = 4096;

struct TensorJob {
  std::string spec;
  std::string out;  // id of the final sink
  double k = 0;     // out = k * reference, element by element
  int tasks = 0;
};

// `chains` chains c<i>_0 -> ... -> c<i>_<len-1> of `scale` tasks with factors
// drawn from `seed`; a `sleep` task between each pair (it reads the
// producer too) slows the chain. An `add` tree sums the chains' ends.
TensorJob TensorChains(int chains, int len, int sleep_us, uint32_t seed) {
  std::mt19937 rng(seed);
  const double factors[] = {2.0, 0.5, 3.0, -1.0, 1.5, -0.5};
  nlohmann::json tasks = nlohmann::json::array();
  std::vector<std::string> heads;
  TensorJob job;
  for (int c = 0; c < chains; ++c) {
    double k = 1;
    std::string prev;
    for (int i = 0; i < len; ++i) {
      const double f = factors[rng() % 6];
      k *= f;
      const std::string id = "c" + std::to_string(c) + "_" + std::to_string(i);
      nlohmann::json t = {{"id", id}, {"kernel", "scale"}, {"args", {{"factor", f}}}};
      if (prev.empty()) {
        t["args"]["n"] = kElems;  // a root scales the generated vector
      } else {
        const std::string s = "s" + std::to_string(c) + "_" + std::to_string(i);
        tasks.push_back(
            {{"id", s}, {"kernel", "sleep"}, {"args", {{"us", sleep_us}}}, {"inputs", {prev}}});
        t["inputs"] = {prev, s};  // the sleep's 0 bytes add no buffer
      }
      tasks.push_back(t);
      prev = id;
    }
    heads.push_back(prev);
    job.k += k;
  }
  for (int n = 0; heads.size() > 1; ++n) {
    const std::string id = "add" + std::to_string(n);
    tasks.push_back({{"id", id}, {"kernel", "add"}, {"inputs", {heads[0], heads[1]}}});
    heads.erase(heads.begin(), heads.begin() + 2);
    heads.push_back(id);
  }
  job.out = heads.front();
  job.tasks = static_cast<int>(tasks.size());
  job.spec = nlohmann::json{{"name", "tensors"}, {"tasks", tasks}}.dump();
  return job;
}

class RecoveryDataTest : public ProcessClusterFixture {
 protected:
  RecoveryDataTest() : ProcessClusterFixture("hmpmd-recovery-data") {}

  // The floats of final output `task` of `job`, fetched from its worker.
  std::vector<float> FetchOutput(uint32_t job, const std::string& task) {
    auto outs = cluster_->Get("/api/v1/jobs/" + std::to_string(job) + "/outputs");
    if (!outs.is_object()) return {};
    for (const auto& o : outs["outputs"]) {
      if (o.value("task", "") != task) continue;
      Result<DataToken> token = ParseDataToken(outs.value("data_token", ""));
      EXPECT_TRUE(token.ok()) << token.status().ToString();
      if (!token.ok()) return {};
      auto got = worker::FetchOutputs(o["endpoint"].get<std::string>(), *token, job,
                                      o["run"].get<uint32_t>(), 5000);
      EXPECT_TRUE(got.ok()) << got.status().ToString();
      if (!got.ok() || got->size() != 1) return {};
      std::vector<float> v((*got)[0].data.size() / sizeof(float));
      std::memcpy(v.data(), (*got)[0].data.data(), v.size() * sizeof(float));
      return v;
    }
    ADD_FAILURE() << "job " << job << " has no output '" << task << "': " << outs.dump();
    return {};
  }

  // The vector every root `scale` starts from, made by a job of its own.
  std::vector<float> Reference() {
    auto id = cluster_->Submit(
        R"({"name": "ref", "tasks": [{"id": "r", "kernel": "scale", "args": {"n": 4096}}]})");
    EXPECT_TRUE(id.ok());
    if (!id.ok()) return {};
    EXPECT_EQ(cluster_->WaitJob(*id, 30000).value("state", ""), "succeeded");
    return FetchOutput(*id, "r");
  }

  // The final output is k times the reference, element by element.
  void ExpectOutput(uint32_t job, const TensorJob& t) {
    std::vector<float> out = FetchOutput(job, t.out);
    std::vector<float> ref = Reference();
    ASSERT_EQ(out.size(), static_cast<size_t>(kElems));
    ASSERT_EQ(ref.size(), static_cast<size_t>(kElems));
    int bad = 0;
    for (int i = 0; i < kElems; ++i) {
      const double want = t.k * ref[i];
      if (std::abs(out[i] - want) > 1e-4 * (1 + std::abs(want)) && ++bad <= 3) {
        ADD_FAILURE() << "element " << i << ": " << out[i] << ", want " << want;
      }
    }
    EXPECT_EQ(bad, 0) << "of " << kElems << " elements";
  }

  // Successful runs of each task run of `job` in the exec log.
  std::map<uint32_t, int> Runs(uint32_t job, pid_t only = -1) {
    std::map<uint32_t, int> runs;
    for (const auto& e : cluster_->ReadExecLog()) {
      if (e.job == job && (only < 0 || e.pid == only)) ++runs[e.task];
    }
    return runs;
  }

  // Runs 4 tensor chains of 6 on 2 workers, kills the controller after 14
  // task runs and restarts it with `extra` flags; checks the job ends right
  // with every task run once and nothing rebuilt. Leaves /metrics in
  // metrics_.
  void ResumeTensorChains(const std::vector<std::string>& extra) {
    // A grace far beyond the job's wait below: only the workers' return
    // can end the recovery in time.
    cluster_->set_recovery_grace_ms(120000);
    ASSERT_TRUE(cluster_->StartController(extra).ok());
    for (int i = 0; i < 2; ++i) ASSERT_TRUE(cluster_->StartWorker().ok());
    const TensorJob t = TensorChains(4, 6, 40000, /*seed=*/5);
    auto id = cluster_->Submit(t.spec);
    ASSERT_TRUE(id.ok()) << id.status().ToString();
    WaitDone(*id, 14);
    cluster_->KillController();
    ASSERT_TRUE(cluster_->StartController(extra).ok());
    auto j = cluster_->WaitJob(*id, 60000);
    ASSERT_EQ(j.value("state", ""), "succeeded") << j.dump();
    metrics_ = Metrics();
    EXPECT_NE(metrics_.find("hmpmd_recovery{state=\"workers_back\"} 1"), std::string::npos)
        << metrics_;
    // What the workers held came back: stored outputs of runs the store
    // had as done, or runs still held (queued, running, or finished after
    // the store's last write: the worker sends the result again with where
    // its output is). Which of them depends on timing.
    EXPECT_GE(Metric(metrics_, "hmpmd_adopted_outputs_total") +
                  Metric(metrics_, "hmpmd_adopted_runs_total"),
              1)
        << metrics_;
    EXPECT_EQ(Metric(metrics_, "hmpmd_rebuilt_runs_total"), 0) << "every output was reported";
    EXPECT_EQ(Metric(metrics_, "hmpmd_lost_inputs_total"), 0) << "no input went missing";
    // Both workers lived: every task ran exactly once, across the restart.
    auto runs = Runs(*id);
    EXPECT_EQ(runs.size(), static_cast<size_t>(t.tasks));
    for (const auto& [task, count] : runs) EXPECT_EQ(count, 1) << "task run " << task;
    ExpectOutput(*id, t);
  }

  std::string metrics_;

  // The value of an unlabelled counter in /metrics; -1 when absent.
  double Metric(const std::string& text, const std::string& name) {
    size_t at = text.find("\n" + name + " ");
    if (at == std::string::npos) return -1;
    return std::stod(text.substr(at + name.size() + 2));
  }
  std::string Metrics() {
    auto r = cluster_->Call("GET", "/metrics", "");
    return r.ok() ? r->body : std::string();
  }
};

// Gaps closed: a restarted controller knows where the workers' outputs are
// (they report them), so consumers read the real producers' values; and
// with every worker back it resumes at once, long before the grace ends.
// Early dispatch off: the tasks left are still with the controller, so the
// restarted one must place them on outputs the workers report.
TEST_F(RecoveryDataTest, KilledControllerResumesTensorChainsWithTheRightValues) {
  ResumeTensorChains({"--no-early-dispatch"});
}

// The same with early dispatch (the default): the workers hold the chains'
// next links queued behind their producers when the controller dies; the
// restarted one adopts them, and each still reads its producer's tensor.
TEST_F(RecoveryDataTest, KilledControllerResumesEarlyDispatchedChains) { ResumeTensorChains({}); }

// The controller dies, and while it is down so does a worker with outputs
// that are still to be read: the restarted controller waits out the grace
// for it, then rebuilds what no worker reported (lineage).
TEST_F(RecoveryDataTest, OutputsLostWithAWorkerWhileTheControllerWasDownAreRebuilt) {
  ASSERT_TRUE(cluster_->StartController().ok());
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(cluster_->StartWorker().ok());
  constexpr int kLen = 6;
  const TensorJob t = TensorChains(4, kLen, 200000, /*seed=*/9);
  auto id = cluster_->Submit(t.spec);
  ASSERT_TRUE(id.ok()) << id.status().ToString();
  WaitDone(*id, 14);
  // The victim: the worker holding the most outputs c<k>_<i> that are still
  // to be read (neither reader s<k>_<i+1>, a 200 ms sleep, nor c<k>_<i+1>
  // is done, so they stay unread until well after the kills below).
  auto tasks = cluster_->Get("/api/v1/jobs/" + std::to_string(*id) + "/tasks");
  auto pool = cluster_->Get("/api/v1/pool");
  ASSERT_TRUE(tasks.is_object() && pool.is_object());
  std::map<std::string, nlohmann::json> by_id;
  for (const auto& e : tasks["tasks"]) by_id[e["id"].get<std::string>()] = e;
  std::map<int, int> needed;  // device -> outputs still to be read
  for (int c = 0; c < 4; ++c) {
    for (int i = 0; i + 1 < kLen; ++i) {
      const std::string k = std::to_string(c) + "_";
      const auto& out = by_id["c" + k + std::to_string(i)];
      if (out["state"] != "done") continue;
      if (by_id["s" + k + std::to_string(i + 1)]["state"] == "done") continue;
      if (by_id["c" + k + std::to_string(i + 1)]["state"] == "done") continue;
      ++needed[out["device"].get<int>()];
    }
  }
  ASSERT_FALSE(needed.empty()) << tasks.dump();
  auto most = std::max_element(needed.begin(), needed.end(),
                               [](const auto& a, const auto& b) { return a.second < b.second; });
  pid_t pid = -1;
  for (const auto& d : pool["devices"]) {
    if (d["id"].get<int>() == most->first) pid = d["pid"].get<pid_t>();
  }
  size_t victim = 0;
  while (victim < 3 && cluster_->worker_pid(victim) != pid) ++victim;
  ASSERT_LT(victim, 3u) << "device " << most->first << " has no worker of ours";
  cluster_->KillController();
  cluster_->KillWorker(victim);
  ASSERT_TRUE(cluster_->StartController().ok());
  auto j = cluster_->WaitJob(*id, 60000);
  ASSERT_EQ(j.value("state", ""), "succeeded") << j.dump();
  const std::string metrics = Metrics();
  EXPECT_NE(metrics.find("hmpmd_recovery{state=\"grace_expired\"} 1"), std::string::npos)
      << metrics;
  // Rebuilt when the grace ended, or when a reader found the output gone.
  EXPECT_GE(
      Metric(metrics, "hmpmd_rebuilt_runs_total") + Metric(metrics, "hmpmd_lost_inputs_total"), 1)
      << metrics;
  auto runs = Runs(*id);
  EXPECT_EQ(runs.size(), static_cast<size_t>(t.tasks));
  ExpectOutput(*id, t);
}

// Both faults, several times in one job, at points drawn from a fixed seed:
// the values still come out right.
TEST_F(RecoveryDataTest, RepeatedControllerAndWorkerKillsKeepTheValuesRight) {
  constexpr uint32_t kSeed = 77;
  std::mt19937 rng(kSeed);
  SCOPED_TRACE("seed " + std::to_string(kSeed));
  ASSERT_TRUE(cluster_->StartController().ok());
  for (int i = 0; i < 4; ++i) ASSERT_TRUE(cluster_->StartWorker().ok());
  const TensorJob t = TensorChains(4, 10, 30000, kSeed);
  auto id = cluster_->Submit(t.spec);
  ASSERT_TRUE(id.ok()) << id.status().ToString();
  uint64_t at = 0;
  for (int round = 0; round < 4; ++round) {
    at += 6 + rng() % 8;
    WaitDone(*id, at);
    if (round % 2 == 0) {
      cluster_->KillController();
      ASSERT_TRUE(cluster_->StartController().ok());
    } else {
      cluster_->KillWorker(round / 2);  // workers 0 and 1 die; 2 and 3 stay
    }
  }
  auto j = cluster_->WaitJob(*id, 90000);
  ASSERT_EQ(j.value("state", ""), "succeeded") << j.dump();
  const auto log = cluster_->ReadExecLog();
  EXPECT_EQ(Runs(*id).size(), static_cast<size_t>(t.tasks))
      << log.size() << " exec log lines; first job " << (log.empty() ? 0 : log[0].job);
  ExpectOutput(*id, t);
}

// A consumer read its input (which freed it: it was the last reader) and
// then its worker died; it must run again, and so must the producer.
TEST_F(RecoveryDataTest, FinalOutputsNoWorkerBroughtBackAreListedAsLost) {
  // The controller and the worker holding a succeeded job's output both
  // die; a fresh worker comes back. /outputs said nothing at all of it.
  ASSERT_TRUE(cluster_->StartController().ok());
  ASSERT_TRUE(cluster_->StartWorker().ok());
  auto id = cluster_->Submit(
      R"({"name": "one", "tasks": [{"id": "x", "kernel": "scale", "args": {"n": 4}}]})");
  ASSERT_TRUE(id.ok()) << id.status().ToString();
  ASSERT_EQ(cluster_->WaitJob(*id, 30000).value("state", ""), "succeeded");
  const std::string path = "/api/v1/jobs/" + std::to_string(*id) + "/outputs";
  ASSERT_EQ(cluster_->Get(path)["outputs"].size(), 1u);
  // A submit is answered once stored, so the job's end (written in an
  // earlier batch) is on disk too, so the restart does not run x again.
  ASSERT_TRUE(
      cluster_->Submit(R"({"name": "sync", "tasks": [{"id": "n", "kernel": "noop"}]})").ok());
  cluster_->KillController();
  cluster_->KillWorker(0);
  cluster_->set_recovery_grace_ms(3000);
  ASSERT_TRUE(cluster_->StartController().ok());
  // While workers may still report it, the list is not given out partial.
  auto early = cluster_->Call("GET", path, "");
  ASSERT_TRUE(early.ok());
  EXPECT_EQ(early->status, 503) << early->body;
  ASSERT_TRUE(cluster_->StartWorker().ok());
  nlohmann::json outs;
  for (int i = 0; i < 1000; ++i) {  // until the recovery window closes
    outs = cluster_->Get(path);
    if (outs.is_object() && !outs["lost"].empty()) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  ASSERT_TRUE(outs.is_object());
  EXPECT_TRUE(outs["outputs"].empty()) << outs.dump();
  ASSERT_EQ(outs["lost"].size(), 1u) << outs.dump();
  EXPECT_EQ(outs["lost"][0]["task"], "x");
  EXPECT_EQ(outs["lost"][0]["bytes"], 16);
  EXPECT_FALSE(outs["lost"][0].contains("worker"));
}

TEST_F(RecoveryDataTest, InputsFreedByAConsumerThatMustRunAgainAreRebuilt) {
  ASSERT_TRUE(cluster_->StartController().ok());
  ASSERT_TRUE(cluster_->StartWorker({}, "cube=2").ok());    // producers
  ASSERT_TRUE(cluster_->StartWorker({}, "vector=2").ok());  // readers; dies
  ASSERT_TRUE(cluster_->WaitWorkers(2, 30000)) << "both kinds registered before the submit";
  // p2 -> c2: c2 is p2's only reader. p -> c, p -> f: c and f read p; f
  // runs after c (its input). The sleeps hold c and c2 on the doomed worker.
  const std::string spec = R"({"name": "freed", "tasks": [
    {"id": "p", "kernel": "scale", "args": {"n": 4096, "factor": 3}},
    {"id": "c", "kernel": "sleep", "core": "vector", "args": {"us": 4000000}, "inputs": ["p"]},
    {"id": "f", "kernel": "scale", "args": {"factor": 2}, "inputs": ["p", "c"]},
    {"id": "p2", "kernel": "scale", "args": {"n": 4096, "factor": 5}},
    {"id": "c2", "kernel": "sleep", "core": "vector", "args": {"us": 4000000}, "inputs": ["p2"]}
  ]})";
  auto id = cluster_->Submit(spec);
  ASSERT_TRUE(id.ok()) << id.status().ToString();
  // Both readers are running (they read their inputs at once, then sleep).
  bool running = false;
  for (int i = 0; i < 1500 && !running; ++i) {
    auto tasks = cluster_->Get("/api/v1/jobs/" + std::to_string(*id) + "/tasks");
    int n = 0;
    if (tasks.is_object()) {
      for (const auto& e : tasks["tasks"]) {
        if ((e["id"] == "c" || e["id"] == "c2") && e["state"] == "running") ++n;
      }
    }
    running = n == 2;
    if (!running) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  ASSERT_TRUE(running) << "c and c2 never ran together";
  // Their reads (a fetch of 16 KiB each) are long done well before this.
  std::this_thread::sleep_for(std::chrono::milliseconds(1500));
  const pid_t producers = cluster_->worker_pid(0);
  cluster_->KillWorker(1);
  ASSERT_TRUE(cluster_->StartWorker({}, "vector=2").ok());
  auto j = cluster_->WaitJob(*id, 60000);
  ASSERT_EQ(j.value("state", ""), "succeeded") << j.dump();
  // Task runs: p 0, c 1, f 2, p2 3, c2 4. Both producers ran again on the
  // producers' worker, for the reader whose input was gone.
  auto runs = Runs(*id, producers);
  EXPECT_EQ(runs[0], 2) << "p rebuilt for f";
  EXPECT_EQ(runs[3], 2) << "p2 rebuilt for c2";
  EXPECT_EQ(runs[2], 1);
  const std::string metrics = Metrics();
  EXPECT_GE(Metric(metrics, "hmpmd_lost_inputs_total"), 2) << metrics;
  std::vector<float> f = FetchOutput(*id, "f");
  std::vector<float> ref = Reference();
  ASSERT_EQ(f.size(), ref.size());
  for (size_t i = 0; i < f.size(); ++i) ASSERT_FLOAT_EQ(f[i], 6 * ref[i]) << "element " << i;
}

}  // namespace
}  // namespace hmpmd::testing
