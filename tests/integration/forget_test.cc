// `DELETE /api/v1/jobs/ID?forget=true` (hmpmd forget): an ended job is
// forgotten at once, as --keep-jobs would in time. The worker holding its
// outputs frees them, the REST API no longer finds it, and a controller
// restarted on the same --db does not list it again. A running job, or a
// bad query, is refused and changes nothing.
#include <gtest/gtest.h>
#include <signal.h>

#include <chrono>
#include <nlohmann/json.hpp>
#include <thread>
#include <vector>

#include "hmpmd/worker/fetch.h"
#include "process_cluster_fixture.h"

namespace hmpmd::testing {
namespace {

using nlohmann::json;

class ForgetTest : public ProcessClusterFixture {
 protected:
  ForgetTest() : ProcessClusterFixture("hmpmd-forget") {}

  // A job of one `scale` task keeping n floats; waits for it to succeed.
  uint32_t RunScale(int n) {
    auto id = cluster_->Submit(
        json{{"tasks", {{{"id", "a"}, {"kernel", "scale"}, {"args", {{"n", n}, {"factor", 2}}}}}}}
            .dump());
    EXPECT_TRUE(id.ok()) << id.status().ToString();
    if (!id.ok()) return 0;
    EXPECT_EQ(cluster_->WaitJob(*id, 30000).value("state", ""), "succeeded");
    return *id;
  }

  // Where job `id`'s one output lives: (endpoint, run).
  std::pair<std::string, uint32_t> OutputOf(uint32_t id) {
    json outs = cluster_->Get("/api/v1/jobs/" + std::to_string(id) + "/outputs");
    if (!outs.is_object() || outs["outputs"].size() != 1) {
      ADD_FAILURE() << "job " << id << " outputs: " << outs.dump();
      return {};
    }
    return {outs["outputs"][0]["endpoint"].get<std::string>(),
            outs["outputs"][0]["run"].get<uint32_t>()};
  }

  Result<HttpResponse> Delete(uint32_t id, const std::string& query) {
    return cluster_->Call("DELETE", "/api/v1/jobs/" + std::to_string(id) + query, "");
  }

  int StatusOf(const std::string& path) {
    auto r = cluster_->Call("GET", path, "");
    return r.ok() ? r->status : 0;
  }

  // What the first worker's store holds, as its heartbeats tell /pool.
  int64_t Stored() {
    json pool = cluster_->Get("/api/v1/pool");
    return pool.is_object() && !pool["devices"].empty()
               ? pool["devices"][0].value("store_bytes", int64_t{-1})
               : -1;
  }
  // Waits (at most 5 s) until Stored() is `bytes`; returns the last figure.
  int64_t WaitStored(int64_t bytes) {
    int64_t now = Stored();
    for (int i = 0; i < 500 && now != bytes; ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
      now = Stored();
    }
    return now;
  }
};

TEST_F(ForgetTest, AnEndedJobsOutputsAreFreedAndItStaysForgottenAfterARestart) {
  ASSERT_TRUE(cluster_->StartController().ok());
  ASSERT_TRUE(cluster_->StartWorker().ok());
  const uint32_t gone = RunScale(4096);
  const uint32_t kept = RunScale(1024);
  ASSERT_NE(gone, 0u);
  ASSERT_NE(kept, 0u);
  const auto [endpoint, run] = OutputOf(gone);
  const auto [kept_endpoint, kept_run] = OutputOf(kept);
  const DataToken token = cluster_->JobDataToken(gone);
  ASSERT_TRUE(worker::FetchOutputs(endpoint, token, gone, run, 5000).ok());
  // /pool shows what the worker's store holds, as its heartbeats say.
  EXPECT_EQ(WaitStored((4096 + 1024) * 4), (4096 + 1024) * 4);

  auto r = Delete(gone, "?forget=true");
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ASSERT_EQ(r->status, 200) << r->body;
  EXPECT_EQ(json::parse(r->body),
            (json{{"id", gone}, {"forgotten", true}, {"freed_bytes", 4096 * 4}}));
  const std::string path = "/api/v1/jobs/" + std::to_string(gone);
  EXPECT_EQ(StatusOf(path), 404);
  EXPECT_EQ(StatusOf(path + "/outputs"), 404);
  const json listed = cluster_->Get("/api/v1/jobs");  // kept: the loop reads into it
  ASSERT_TRUE(listed.is_object());
  for (const json& j : listed["jobs"]) EXPECT_NE(j.value("id", 0u), gone);

  // The worker hears FreeJob after the answer: wait for it (bounded).
  Status fetched = Status::Ok();
  for (int i = 0; i < 200 && fetched.ok(); ++i) {
    fetched = worker::FetchOutputs(endpoint, token, gone, run, 5000).status();
    if (fetched.ok()) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  EXPECT_EQ(fetched.code(), StatusCode::kNotFound) << fetched.ToString();
  // The other job is untouched (fetched with its own data token: the
  // forgotten job's opens no other job's outputs).
  EXPECT_EQ(worker::FetchOutputs(kept_endpoint, token, kept, kept_run, 5000).status().code(),
            StatusCode::kPermissionDenied);
  EXPECT_TRUE(
      worker::FetchOutputs(kept_endpoint, cluster_->JobDataToken(kept), kept, kept_run, 5000).ok());
  EXPECT_EQ(WaitStored(1024 * 4), 1024 * 4);

  // Forgotten twice: no such job.
  r = Delete(gone, "?forget=true");
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->status, 404) << r->body;

  // The answer came once the forget was in the file: a kill right after
  // does not bring the job back.
  cluster_->KillController();
  ASSERT_TRUE(cluster_->StartController().ok());
  EXPECT_EQ(StatusOf(path), 404);
  EXPECT_EQ(StatusOf("/api/v1/jobs/" + std::to_string(kept)), 200);
}

// freed_bytes is what the worker's store gives back: the outputs it still
// holds (the last step's), not every output the job ever made.
TEST_F(ForgetTest, FreedBytesAreWhatTheWorkersStoreGivesBack) {
  ASSERT_TRUE(cluster_->StartController().ok());
  ASSERT_TRUE(cluster_->StartWorker().ok());
  auto id = cluster_->Submit(R"({"repeat":2,"tasks":[
      {"id":"a","kernel":"scale","args":{"n":4096,"factor":2}},
      {"id":"b","kernel":"scale","args":{"factor":3},"inputs":["a"]}]})");
  ASSERT_TRUE(id.ok()) << id.status().ToString();
  ASSERT_EQ(cluster_->WaitJob(*id, 30000).value("state", ""), "succeeded");
  // Settled: the same figure over several heartbeats (every 100 ms here).
  int64_t before = Stored();
  for (int i = 0, same = 0; i < 100 && same < 3; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(150));
    const int64_t now = Stored();
    same = now == before ? same + 1 : 0;
    before = now;
  }
  ASSERT_GT(before, 0);
  auto r = Delete(*id, "?forget=true");
  ASSERT_TRUE(r.ok());
  ASSERT_EQ(r->status, 200) << r->body;
  const int64_t freed = json::parse(r->body).value("freed_bytes", int64_t{-1});
  EXPECT_GT(freed, 0);
  EXPECT_LT(freed, 4 * 4096 * 4) << "not every output the job made";
  EXPECT_EQ(WaitStored(before - freed), before - freed);
}

TEST_F(ForgetTest, ARunningJobOrABadQueryIsRefusedAndChangesNothing) {
  ASSERT_TRUE(cluster_->StartController().ok());
  ASSERT_TRUE(cluster_->StartWorker().ok());
  auto id = cluster_->Submit(R"({"tasks":[{"id":"a","kernel":"sleep","args":{"us":3600000000}}]})");
  ASSERT_TRUE(id.ok()) << id.status().ToString();
  const std::string path = "/api/v1/jobs/" + std::to_string(*id);
  auto state = [&] { return cluster_->Get(path).value("state", ""); };

  auto r = Delete(*id, "?forget=true");
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->status, 409) << r->body;
  EXPECT_NE(r->body.find("job " + std::to_string(*id) + " not forgotten: it has not ended"),
            std::string::npos)
      << r->body;
  for (const char* bad : {"?forget=yes", "?forget=", "?forgot=true", "?forget=true&forget=true"}) {
    r = Delete(*id, bad);
    ASSERT_TRUE(r.ok());
    EXPECT_EQ(r->status, 400) << bad << ": " << r->body;
  }
  r = Delete(*id, "?forget=yes");
  EXPECT_NE(r->body.find("query: forget is true or false, not 'yes'"), std::string::npos)
      << r->body;
  EXPECT_NE(state(), "cancelled");
  EXPECT_FALSE(state().empty()) << "the job is still listed";

  // forget=false is a plain cancel; then the ended job is forgotten.
  r = Delete(*id, "?forget=false");
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->status, 200) << r->body;
  EXPECT_EQ(cluster_->WaitJob(*id, 5000).value("state", ""), "cancelled");
  r = Delete(*id, "?forget=true");
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->status, 200) << r->body;
  EXPECT_EQ(StatusOf(path), 404);
}

// A job cancelled while its worker was away (the controller restarted and
// waits for it) frees its outputs when the worker comes back, as a cancel
// does live: they stayed until the job was forgotten.
TEST_F(ForgetTest, OutputsOfAJobCancelledWhileItsWorkerWasAwayAreFreedOnItsReturn) {
  ASSERT_TRUE(cluster_->StartController().ok());
  ASSERT_TRUE(cluster_->StartWorker().ok());
  auto id = cluster_->Submit(R"({"tasks":[{"id":"a","kernel":"scale","args":{"n":4096}},
      {"id":"b","kernel":"sleep","core":"vector","args":{"us":3600000000}}]})");
  ASSERT_TRUE(id.ok()) << id.status().ToString();
  WaitDone(*id, 1);
  const auto [endpoint, run] = OutputOf(*id);
  const DataToken token = cluster_->JobDataToken(*id);
  ASSERT_TRUE(worker::FetchOutputs(endpoint, token, *id, run, 5000).ok());
  const pid_t worker = cluster_->worker_pid(0);
  ASSERT_EQ(::kill(worker, SIGSTOP), 0);
  cluster_->KillController();
  ASSERT_TRUE(cluster_->StartController().ok());
  auto r = Delete(*id, "");
  ::kill(worker, SIGCONT);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ASSERT_EQ(r->status, 200) << r->body;
  ASSERT_TRUE(cluster_->WaitWorkers(1, 20000));
  // FreeJob follows the registration: wait for it (bounded).
  Status fetched = Status::Ok();
  for (int i = 0; i < 500 && fetched.ok(); ++i) {
    fetched = worker::FetchOutputs(endpoint, token, *id, run, 5000).status();
    if (fetched.ok()) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  EXPECT_EQ(fetched.code(), StatusCode::kNotFound) << fetched.ToString();
  EXPECT_EQ(cluster_->Get("/api/v1/jobs/" + std::to_string(*id)).value("state", ""), "cancelled");
}

// --keep-jobs 1: a job that just ended stays while later ones end, so a
// `submit --wait` polling it reads its end (its grace, --keep-grace-s,
// default 60 s); without it the second job's end would forget the first at
// once and its waiter fail with "no such job any more" though it succeeded.
TEST_F(ForgetTest, AJobThatJustEndedOutlivesKeepJobsForItsWaiter) {
  ASSERT_TRUE(cluster_->StartController({"--keep-jobs", "1"}).ok());
  ASSERT_TRUE(cluster_->StartWorker().ok());
  std::vector<uint32_t> ids;
  for (int i = 0; i < 3; ++i) ids.push_back(RunScale(64));
  for (uint32_t id : ids) {
    ASSERT_NE(id, 0u);
    const auto job = cluster_->Get("/api/v1/jobs/" + std::to_string(id));
    ASSERT_TRUE(job.is_object()) << "job " << id << " forgotten within its grace";
    EXPECT_EQ(job.value("state", ""), "succeeded") << job.dump();
  }
}

}  // namespace
}  // namespace hmpmd::testing
