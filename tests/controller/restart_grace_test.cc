// A restarted controller's recovery grace counts from when workers can
// register (after Bind), not from before its store load: with millions of
// stored runs the load alone took longer than the default 2 s grace, and
// dispatch resumed before any worker could come back.
#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <thread>

#include "hmpmd/controller/controller.h"
#include "hmpmd/store/in_memory_job_store.h"
#include "hmpmd/store/sqlite_job_store.h"

namespace hmpmd {
namespace {

// A store whose Load() takes as long as a large file's.
class SlowLoadStore : public InMemoryJobStore {
 public:
  Result<std::vector<StoredJob>> Load() override {
    std::this_thread::sleep_for(std::chrono::milliseconds(400));
    return InMemoryJobStore::Load();
  }
};

TEST(RestartGraceTest, TheGraceStartsAfterTheStoreIsLoaded) {
  auto store = std::make_shared<SlowLoadStore>();
  std::vector<StoreRecord> records;
  records.push_back(JobSubmittedRecord{
      1, "j", R"({"name":"j","tasks":[{"id":"a","kernel":"sleep","args":{"us":1000}}]})", 1});
  records.push_back(WorkerRecord{"host/123/w", true});
  ASSERT_TRUE(store->Write(records).ok());
  ControllerOptions o;
  o.listen = "tcp://127.0.0.1:0";
  o.store = store;
  o.recovery_grace_ms = 300;
  Controller c(o);
  ASSERT_TRUE(c.Start().ok());
  EXPECT_TRUE(c.recovery().open());
  EXPECT_TRUE(c.recovery().Waiting(Controller::NowUs()))
      << "the 300 ms grace ran out during the 400 ms load";
}

// --max-tasks admits new jobs; a job accepted before a restart under a
// larger limit resumes (it was left out: 404, and its client was told it
// had been forgotten).
TEST(RestoreLimitsTest, AnAcceptedJobOverTodaysMaxTasksResumes) {
  auto store = std::make_shared<InMemoryJobStore>();
  std::vector<StoreRecord> records;
  records.push_back(JobSubmittedRecord{
      1, "wide",
      R"({"name":"wide","tasks":[{"id":"a","kernel":"noop"},{"id":"b","kernel":"noop"},)"
      R"({"id":"c","kernel":"noop"}]})",
      1});
  ASSERT_TRUE(store->Write(records).ok());
  ControllerOptions o;
  o.listen = "tcp://127.0.0.1:0";
  o.store = store;
  o.spec_limits.max_tasks = 2;
  Controller c(o);
  ASSERT_TRUE(c.Start().ok());
  const JobRun* job = c.scheduler().job(1);
  ASSERT_NE(job, nullptr) << "the accepted job was left out";
  EXPECT_FALSE(IsTerminal(job->state));
  // New submits are still held to the flag.
  EXPECT_FALSE(c.Submit({R"({"tasks":[{"id":"a","kernel":"noop"},{"id":"b","kernel":"noop"},)"
                         R"({"id":"c","kernel":"noop"}]})"})
                   .ok());
}

// The data token goes with the store: a controller restarted on the same
// --db hands out the one its workers (and drivers) hold, so the first
// workers back are not refused by peers that have not re-registered yet.
// Without a store (or on another one) each controller draws its own.
TEST(RestartDataTokenTest, AControllerRestartedOnTheSameStoreKeepsItsDataToken) {
  const std::string path = (std::filesystem::temp_directory_path() /
                            ("hmpmd-token-" + std::to_string(::getpid()) + ".db"))
                               .string();
  const auto remove = [&] {
    for (const char* ext : {"", "-wal", "-shm", "-lock"}) std::filesystem::remove(path + ext);
  };
  remove();
  const auto start = [&](bool with_store) -> DataToken {
    ControllerOptions o;
    o.listen = "tcp://127.0.0.1:0";
    if (with_store) {
      auto store = SqliteJobStore::Open(path);
      EXPECT_TRUE(store.ok()) << store.status().ToString();
      if (!store.ok()) return {};
      o.store = std::move(store).value();
    }
    Controller c(o);
    EXPECT_TRUE(c.Start().ok());
    return c.data_token();  // the store closes with the controller
  };
  const DataToken first = start(true);
  EXPECT_FALSE(first.empty());
  EXPECT_EQ(start(true), first) << "a restart on the same store drew a new token";
  const DataToken none1 = start(false), none2 = start(false);
  EXPECT_FALSE(none1.empty());
  EXPECT_NE(none1, none2);
  EXPECT_NE(none1, first);
  remove();
  EXPECT_NE(start(true), first) << "a fresh store kept the old token";
  remove();
}

}  // namespace
}  // namespace hmpmd
