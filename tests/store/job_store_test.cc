// Tests for the job store seam: SqliteJobStore and InMemoryJobStore give
// the same answers (typed test), StoreWriter batches and retries, and the
// Scheduler resumes a reloaded job (RestoreJob, AdoptRun).
#include <gtest/gtest.h>
#include <sqlite3.h>
#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <fstream>

#include "hmpmd/controller/job_spec_parser.h"
#include "hmpmd/scheduler/hmpmd_policy.h"
#include "hmpmd/store/in_memory_job_store.h"
#include "hmpmd/store/sqlite_job_store.h"
#include "hmpmd/store/store_writer.h"

namespace hmpmd {
namespace {

std::string TempPath(const std::string& name) {
  return (std::filesystem::temp_directory_path() /
          ("hmpmd-store-" + std::to_string(::getpid()) + "-" + name))
      .string();
}

template <typename T>
class JobStoreTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if constexpr (std::is_same_v<T, SqliteJobStore>) {
      path_ = TempPath(::testing::UnitTest::GetInstance()->current_test_info()->name());
      std::filesystem::remove(path_);
      auto s = SqliteJobStore::Open(path_);
      ASSERT_TRUE(s.ok()) << s.status().ToString();
      store_ = std::move(s).value();
    } else {
      store_ = std::make_unique<InMemoryJobStore>();
    }
  }
  void TearDown() override {
    store_.reset();
    if (!path_.empty()) {
      for (const char* ext : {"", "-wal", "-shm", "-lock"}) std::filesystem::remove(path_ + ext);
    }
  }
  // Reopens the file (SQLite) to prove the data is on disk.
  void Reopen() {
    if constexpr (std::is_same_v<T, SqliteJobStore>) {
      store_.reset();
      auto s = SqliteJobStore::Open(path_);
      ASSERT_TRUE(s.ok()) << s.status().ToString();
      store_ = std::move(s).value();
    }
  }
  std::string path_;
  std::unique_ptr<JobStore> store_;
};

using StoreTypes = ::testing::Types<SqliteJobStore, InMemoryJobStore>;
TYPED_TEST_SUITE(JobStoreTest, StoreTypes);

TYPED_TEST(JobStoreTest, LoadGivesBackWhatWasWritten) {
  std::vector<StoreRecord> batch = {
      JobSubmittedRecord{7, "seven", R"({"tasks":[{"id":"a","kernel":"spin"}]})", 100},
      TaskDoneRecord{7, 3, 1, 200, 250, 2},
      TaskDoneRecord{7, 1, 0, 150, 180, 0},
      JobSubmittedRecord{9, "nine", "{}", 300, 0, "vision", 3},
      JobEndedRecord{9, JobState::kFailed, "task 'x' failed: boom", 400, 0, 350,
                     R"({"lower_bound_s":0.5})"},
  };
  ASSERT_TRUE(this->store_->Write(batch).ok());
  this->Reopen();
  auto jobs = this->store_->Load();
  ASSERT_TRUE(jobs.ok()) << jobs.status().ToString();
  ASSERT_EQ(jobs->size(), 2u);
  const StoredJob& a = (*jobs)[0];
  EXPECT_EQ(a.id, 7u);
  EXPECT_EQ(a.name, "seven");
  EXPECT_EQ(a.state, JobState::kQueued);
  EXPECT_EQ(a.submitted, 100);
  EXPECT_EQ(a.started, -1) << "not ended: its start is not stored";
  ASSERT_EQ(a.done.size(), 2u);
  EXPECT_EQ(a.done[0].run, 1u);
  EXPECT_EQ(a.done[1].run, 3u);
  EXPECT_EQ(a.done[1].attempt, 1u);
  EXPECT_EQ(a.done[1].end, 250);
  EXPECT_EQ(a.done[1].device, 2u);
  const StoredJob& b = (*jobs)[1];
  EXPECT_EQ(b.state, JobState::kFailed);
  EXPECT_EQ(b.error, "task 'x' failed: boom");
  EXPECT_EQ(b.finished, 400);
  EXPECT_EQ(b.started, 350);
  EXPECT_EQ(b.metrics, R"({"lower_bound_s":0.5})");
  EXPECT_EQ(a.metrics, "") << "not ended: no figures";
  EXPECT_EQ(b.tenant, "vision");
  EXPECT_EQ(b.tenant_share, 3u);
  EXPECT_EQ(a.tenant, "") << "submitted without tokens";
  EXPECT_EQ(a.tenant_share, 1u);
}

TYPED_TEST(JobStoreTest, ForgottenJobsAndTheirRunsAreGone) {
  std::vector<StoreRecord> batch = {
      JobSubmittedRecord{1, "a", "{}", 1}, TaskDoneRecord{1, 0, 0, 1, 2, 0},
      JobEndedRecord{1, JobState::kSucceeded, "", 3}, JobSubmittedRecord{2, "b", "{}", 4}};
  ASSERT_TRUE(this->store_->Write(batch).ok());
  std::vector<StoreRecord> forget = {JobForgottenRecord{1}};
  ASSERT_TRUE(this->store_->Write(forget).ok());
  this->Reopen();
  auto jobs = this->store_->Load();
  ASSERT_TRUE(jobs.ok());
  ASSERT_EQ(jobs->size(), 1u);
  EXPECT_EQ((*jobs)[0].id, 2u);
  // Forgetting every job keeps the largest id, so ids are never reused.
  std::vector<StoreRecord> all = {JobForgottenRecord{2}};
  ASSERT_TRUE(this->store_->Write(all).ok());
  this->Reopen();
  auto max_id = this->store_->LoadMaxJobId();
  ASSERT_TRUE(max_id.ok());
  EXPECT_EQ(*max_id, 2u);
}

TYPED_TEST(JobStoreTest, ASessionsGroupsAndRunEndsAreKeptInOrderAndForgottenWithIt) {
  const std::string body("\x92\x01\x00binary", 9);  // bytes, NUL included
  std::vector<StoreRecord> batch = {
      JobSubmittedRecord{4, "drv", R"({"hmpmd_session":true})", 1},
      SessionGroupRecord{4, 1, 12, "tasks[0] 'g': refused", "second"},
      SessionGroupRecord{4, 0, 10, "", body},
      RunEndedRecord{4, 5, true, "cancelled by the driver"},
      RunEndedRecord{4, 2, false, "boom"},
      SessionGroupRecord{99, 0, 1, "", "no such job"},
  };
  ASSERT_TRUE(this->store_->Write(batch).ok());
  this->Reopen();
  auto jobs = this->store_->Load();
  ASSERT_TRUE(jobs.ok()) << jobs.status().ToString();
  ASSERT_EQ(jobs->size(), 1u);
  const StoredJob& j = (*jobs)[0];
  ASSERT_EQ(j.groups.size(), 2u);
  EXPECT_EQ(j.groups[0].index, 0u);
  EXPECT_EQ(j.groups[0].seq, 10u);
  EXPECT_EQ(j.groups[0].body, body);
  EXPECT_EQ(j.groups[0].error, "");
  EXPECT_EQ(j.groups[1].seq, 12u);
  EXPECT_EQ(j.groups[1].error, "tasks[0] 'g': refused");
  ASSERT_EQ(j.ended.size(), 2u);
  EXPECT_EQ(j.ended[0].run, 2u);
  EXPECT_FALSE(j.ended[0].cancelled);
  EXPECT_EQ(j.ended[0].error, "boom");
  EXPECT_EQ(j.ended[1].run, 5u);
  EXPECT_TRUE(j.ended[1].cancelled);
  std::vector<StoreRecord> forget = {JobForgottenRecord{4},
                                     JobSubmittedRecord{4, "again", "{}", 2}};
  ASSERT_TRUE(this->store_->Write(forget).ok());
  this->Reopen();
  jobs = this->store_->Load();
  ASSERT_TRUE(jobs.ok());
  ASSERT_EQ(jobs->size(), 1u);
  EXPECT_TRUE((*jobs)[0].groups.empty()) << "forgotten with its job";
  EXPECT_TRUE((*jobs)[0].ended.empty());
}

TYPED_TEST(JobStoreTest, OutputSizesEndTimesAndLiveWorkersAreKept) {
  std::vector<StoreRecord> batch = {
      JobSubmittedRecord{1, "a", "{}", 1},
      TaskDoneRecord{1, 0, 0, 1, 2, 0, uint64_t{5} << 32, 2},
      TaskDoneRecord{1, 1, 0, 2, 3, 1, 0},
      TaskDoneRecord{1, 2, 0, 2, 3, 1, 0, 3},  // three empty tensors
      JobEndedRecord{1, JobState::kSucceeded, "", 3, 1'700'000'000'123},
      WorkerRecord{"w1|10|tcp://127.0.0.1:7001", true},
      WorkerRecord{"w2|11|tcp://127.0.0.1:7002", true},
      WorkerRecord{"w3|12|tcp://127.0.0.1:7003", true},
  };
  ASSERT_TRUE(this->store_->Write(batch).ok());
  std::vector<StoreRecord> left = {WorkerRecord{"w2|11|tcp://127.0.0.1:7002", false}};
  ASSERT_TRUE(this->store_->Write(left).ok());
  this->Reopen();
  auto jobs = this->store_->Load();
  ASSERT_TRUE(jobs.ok());
  ASSERT_EQ(jobs->size(), 1u);
  ASSERT_EQ((*jobs)[0].done.size(), 3u);
  EXPECT_EQ((*jobs)[0].done[0].bytes, uint64_t{5} << 32);
  EXPECT_EQ((*jobs)[0].done[0].buffers, 2u);
  EXPECT_EQ((*jobs)[0].done[1].bytes, 0u);
  EXPECT_EQ((*jobs)[0].done[1].buffers, 0u);
  EXPECT_EQ((*jobs)[0].done[2].bytes, 0u);
  EXPECT_EQ((*jobs)[0].done[2].buffers, 3u);
  EXPECT_EQ((*jobs)[0].finished_unix_ms, 1'700'000'000'123);
  auto live = this->store_->LoadLiveWorkers();
  ASSERT_TRUE(live.ok());
  ASSERT_TRUE(live->has_value());
  EXPECT_EQ(**live,
            (std::vector<std::string>{"w1|10|tcp://127.0.0.1:7001", "w3|12|tcp://127.0.0.1:7003"}));
}

// Wall-clock times and each run's place (worker, core) are kept, so a
// restarted controller shows them (issue 35: history across restarts).
TYPED_TEST(JobStoreTest, WallClockTimesAndRunPlacesAreKept) {
  JobSubmittedRecord sub{5, "w", "{}", 100, 1'750'000'000'000'100};
  TaskDoneRecord cube{5,
                      0,
                      0,
                      110,
                      150,
                      3,
                      8,
                      1,
                      1'750'000'000'000'110,
                      1'750'000'000'000'150,
                      RunPlace{"node-a:7", 0, 0}};
  TaskDoneRecord vector{5,
                        1,
                        2,
                        120,
                        160,
                        4,
                        8,
                        1,
                        1'750'000'000'000'120,
                        1'750'000'000'000'160,
                        RunPlace{"node-b:9", 1, 2}};
  JobEndedRecord end{5, JobState::kSucceeded, "", 170, 1'750'000'000'000, 110, "", 0, 0};
  end.started_unix_us = 1'750'000'000'000'110;
  end.finished_unix_us = 1'750'000'000'000'170;
  std::vector<StoreRecord> batch = {sub, cube, vector, end};
  ASSERT_TRUE(this->store_->Write(batch).ok());
  this->Reopen();
  auto jobs = this->store_->Load();
  ASSERT_TRUE(jobs.ok());
  ASSERT_EQ(jobs->size(), 1u);
  const StoredJob& j = (*jobs)[0];
  EXPECT_EQ(j.submitted_unix_us, 1'750'000'000'000'100);
  EXPECT_EQ(j.started_unix_us, 1'750'000'000'000'110);
  EXPECT_EQ(j.finished_unix_us, 1'750'000'000'000'170);
  ASSERT_EQ(j.done.size(), 2u);
  EXPECT_EQ(j.done[0].start_unix_us, 1'750'000'000'000'110);
  EXPECT_EQ(j.done[0].end_unix_us, 1'750'000'000'000'150);
  EXPECT_EQ(j.done[0].place.worker, "node-a:7");
  EXPECT_EQ(j.done[0].place.kind, 0);
  EXPECT_EQ(j.done[0].place.lane, 0u);
  EXPECT_TRUE(j.done[0].place.known());
  EXPECT_EQ(j.done[1].device, 4u);
  EXPECT_EQ(j.done[1].place.worker, "node-b:9");
  EXPECT_EQ(j.done[1].place.kind, 1);
  EXPECT_EQ(j.done[1].place.lane, 2u);
}

// A file an older version wrote (no output sizes, no workers table) opens:
// its runs' sizes are unknown (taken as not empty) and so are its workers.
TEST(SqliteJobStoreTest, AnOlderFileGetsTheNewColumns) {
  std::string path = TempPath("old-version");
  std::filesystem::remove(path);
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open(path.c_str(), &db), SQLITE_OK);
  ASSERT_EQ(sqlite3_exec(db, R"sql(
    CREATE TABLE jobs (id INTEGER PRIMARY KEY, name TEXT NOT NULL, spec TEXT NOT NULL,
      state INTEGER NOT NULL DEFAULT 0, error TEXT NOT NULL DEFAULT '',
      submitted INTEGER NOT NULL, finished INTEGER NOT NULL DEFAULT -1);
    CREATE TABLE task_runs (job INTEGER NOT NULL, run INTEGER NOT NULL,
      attempt INTEGER NOT NULL, start INTEGER NOT NULL, end INTEGER NOT NULL,
      device INTEGER NOT NULL, PRIMARY KEY (job, run)) WITHOUT ROWID;
    INSERT INTO jobs(id, name, spec, submitted) VALUES (4, 'old', '{}', 10);
    INSERT INTO task_runs VALUES (4, 0, 0, 11, 12, 0);)sql",
                         nullptr, nullptr, nullptr),
            SQLITE_OK);
  sqlite3_close(db);
  {
    auto s = SqliteJobStore::Open(path);
    ASSERT_TRUE(s.ok()) << s.status().ToString();
    auto jobs = (*s)->Load();
    ASSERT_TRUE(jobs.ok()) << jobs.status().ToString();
    ASSERT_EQ(jobs->size(), 1u);
    ASSERT_EQ((*jobs)[0].done.size(), 1u);
    EXPECT_EQ((*jobs)[0].done[0].bytes, UINT64_MAX);
    EXPECT_EQ((*jobs)[0].done[0].buffers, 0u);
    EXPECT_EQ((*jobs)[0].finished_unix_ms, 0);
    EXPECT_EQ((*jobs)[0].started, -1);
    EXPECT_EQ((*jobs)[0].metrics, "");
    // No wall clock and no place: reports say the history is missing.
    EXPECT_EQ((*jobs)[0].submitted_unix_us, 0);
    EXPECT_EQ((*jobs)[0].done[0].start_unix_us, 0);
    EXPECT_FALSE((*jobs)[0].done[0].place.known());
    EXPECT_EQ((*jobs)[0].tenant, "") << "no tenant: an admin's to see";
    EXPECT_EQ((*jobs)[0].tenant_share, 1u);
    auto live = (*s)->LoadLiveWorkers();
    ASSERT_TRUE(live.ok());
    EXPECT_FALSE(live->has_value()) << "an older version did not record its workers";
    std::vector<StoreRecord> batch = {TaskDoneRecord{4, 1, 0, 12, 13, 0, 64}};
    ASSERT_TRUE((*s)->Write(batch).ok());
  }
  // From now on the file records its workers.
  auto s = SqliteJobStore::Open(path);
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  auto live = (*s)->LoadLiveWorkers();
  ASSERT_TRUE(live.ok());
  EXPECT_TRUE(live->has_value());
  auto jobs = (*s)->Load();
  ASSERT_TRUE(jobs.ok());
  EXPECT_EQ((*jobs)[0].done[1].bytes, 64u);
  for (const char* ext : {"", "-wal", "-shm", "-lock"}) std::filesystem::remove(path + ext);
}

// Job ids are 32-bit: a stored id out of range is corruption, named, not
// truncated into another job's id (-5 was served as job 4294967291).
TEST(SqliteJobStoreTest, AJobIdOutOfRangeIsCorruptionNotAnotherId) {
  for (const char* bad : {"-5", "4294967296", "9223372036854775807"}) {
    std::string path = TempPath(std::string("bad-id") + bad);
    std::filesystem::remove(path);
    {
      auto s = SqliteJobStore::Open(path);
      ASSERT_TRUE(s.ok()) << s.status().ToString();
      std::vector<StoreRecord> batch = {JobSubmittedRecord{4, "j", "{}", 10}};
      ASSERT_TRUE((*s)->Write(batch).ok());
    }
    sqlite3* db = nullptr;
    ASSERT_EQ(sqlite3_open(path.c_str(), &db), SQLITE_OK);
    const std::string sql = std::string("UPDATE jobs SET id = ") + bad + ";";
    ASSERT_EQ(sqlite3_exec(db, sql.c_str(), nullptr, nullptr, nullptr), SQLITE_OK);
    sqlite3_close(db);
    auto s = SqliteJobStore::Open(path);
    ASSERT_TRUE(s.ok()) << s.status().ToString();
    auto jobs = (*s)->Load();
    ASSERT_FALSE(jobs.ok()) << bad;
    EXPECT_EQ(jobs.status().code(), StatusCode::kCorruption);
    EXPECT_NE(jobs.status().message().find(std::string("job id ") + bad + " is not in 1 to"),
              std::string::npos)
        << jobs.status().message();
    s->reset();
    for (const char* ext : {"", "-wal", "-shm", "-lock"}) std::filesystem::remove(path + ext);
  }
}

// The data token is kept like the epoch: a controller restarted on the
// file hands out the token its workers hold (else peers not yet
// re-registered refuse the first ones back, and inputs are rebuilt).
TEST(SqliteJobStoreTest, TheDataTokenIsKeptInTheFileAndDiffersBetweenFiles) {
  std::string a = TempPath("token-a"), b = TempPath("token-b");
  for (const std::string& p : {a, b}) std::filesystem::remove(p);
  DataToken first;
  {
    auto s = SqliteJobStore::Open(a);
    ASSERT_TRUE(s.ok()) << s.status().ToString();
    auto t = (*s)->LoadDataToken();
    ASSERT_TRUE(t.ok()) << t.status().ToString();
    ASSERT_TRUE(t->has_value());
    EXPECT_FALSE((*t)->empty());
    first = **t;
  }
  auto again = SqliteJobStore::Open(a);
  ASSERT_TRUE(again.ok());
  EXPECT_EQ((*again)->LoadDataToken().value(), first);
  auto other = SqliteJobStore::Open(b);
  ASSERT_TRUE(other.ok());
  EXPECT_NE((*other)->LoadDataToken().value(), first);
  for (const std::string& p : {a, b}) {
    for (const char* ext : {"", "-wal", "-shm", "-lock"}) std::filesystem::remove(p + ext);
  }
}

// The epoch names the file: the same across reopenings (a restarted
// controller adopts what workers hold), another for another file.
TEST(SqliteJobStoreTest, TheEpochIsKeptInTheFileAndDiffersBetweenFiles) {
  std::string a = TempPath("epoch-a"), b = TempPath("epoch-b");
  for (const std::string& p : {a, b}) std::filesystem::remove(p);
  uint64_t first = 0;
  {
    auto s = SqliteJobStore::Open(a);
    ASSERT_TRUE(s.ok()) << s.status().ToString();
    auto e = (*s)->LoadEpoch();
    ASSERT_TRUE(e.ok()) << e.status().ToString();
    EXPECT_NE(*e, 0u);
    first = *e;
  }
  auto again = SqliteJobStore::Open(a);
  ASSERT_TRUE(again.ok());
  EXPECT_EQ((*again)->LoadEpoch().value(), first);
  auto other = SqliteJobStore::Open(b);
  ASSERT_TRUE(other.ok());
  EXPECT_NE((*other)->LoadEpoch().value(), first);
  for (const std::string& p : {a, b}) {
    for (const char* ext : {"", "-wal", "-shm", "-lock"}) std::filesystem::remove(p + ext);
  }
}

TEST(SqliteJobStoreTest, OneStoreAtATimeHoldsAFile) {
  // Two controllers on one --db both wrote job 1, each over the other's.
  std::string path = TempPath("locked");
  for (const char* ext : {"", "-wal", "-shm", "-lock"}) std::filesystem::remove(path + ext);
  {
    auto first = SqliteJobStore::Open(path);
    ASSERT_TRUE(first.ok()) << first.status().ToString();
    auto second = SqliteJobStore::Open(path);
    ASSERT_FALSE(second.ok());
    EXPECT_EQ(second.status().message(),
              "job store " + path + ": in use by another controller (pid " +
                  std::to_string(::getpid()) + "); one controller per file");
  }
  {
    auto after = SqliteJobStore::Open(path);  // the first closed: free again
    EXPECT_TRUE(after.ok()) << after.status().ToString();
  }
  for (const char* ext : {"", "-wal", "-shm", "-lock"}) std::filesystem::remove(path + ext);
}

TEST(SqliteJobStoreTest, ALinkToAHeldFileIsRefusedToo) {
  // A symbolic or hard link has its own FILE-lock name beside it; two
  // controllers through two names gave out the same job ids.
  std::string path = TempPath("linked");
  const std::string soft = path + ".soft", hard = path + ".hard";
  auto clean = [&] {
    for (const std::string& p : {path, soft, hard}) {
      for (const char* ext : {"", "-wal", "-shm", "-lock"}) std::filesystem::remove(p + ext);
    }
  };
  clean();
  {
    auto first = SqliteJobStore::Open(path);
    ASSERT_TRUE(first.ok()) << first.status().ToString();
    std::filesystem::create_symlink(path, soft);
    std::filesystem::create_hard_link(path, hard);
    for (const std::string& other : {soft, hard}) {
      auto second = SqliteJobStore::Open(other);
      ASSERT_FALSE(second.ok()) << other;
      EXPECT_NE(second.status().message().find("in use by another controller under another name"),
                std::string::npos)
          << second.status().message();
    }
  }
  {
    auto after = SqliteJobStore::Open(soft);  // the first closed: free again
    EXPECT_TRUE(after.ok()) << after.status().ToString();
  }
  clean();
}

TEST(SqliteJobStoreTest, WritesAreRefusedWhileTheFileIsDeletedOrReplaced) {
  // Deleted under a running controller, the file took every write without
  // an error, and a restart found none of them.
  std::string path = TempPath("deleted");
  const std::string kept = path + ".kept";
  auto clean = [&] {
    for (const std::string& p : {path, kept}) {
      for (const char* ext : {"", "-wal", "-shm", "-lock"}) std::filesystem::remove(p + ext);
    }
  };
  clean();
  {
    auto store = SqliteJobStore::Open(path);
    ASSERT_TRUE(store.ok()) << store.status().ToString();
    auto write = [&](JobId id) {
      std::vector<StoreRecord> r(1);
      r[0] = JobSubmittedRecord{id, "j", "{}", 1};
      return (*store)->Write(r);
    };
    ASSERT_TRUE(write(1).ok());
    std::filesystem::create_hard_link(path, kept);  // to put it back later
    std::filesystem::remove(path);
    Status st = write(2);
    EXPECT_EQ(st.code(), StatusCode::kUnavailable) << st.ToString();
    EXPECT_EQ(st.message(), "job store " + path +
                                ": the file was deleted or replaced while the controller ran; "
                                "what is written now would be lost at a restart (restore the "
                                "file or restart the controller)");
    std::ofstream(path) << "";  // another file under the name
    EXPECT_FALSE(write(2).ok());
    std::filesystem::rename(kept, path);  // the same file back: writes go on
    EXPECT_TRUE(write(2).ok());
  }
  auto again = SqliteJobStore::Open(path);
  ASSERT_TRUE(again.ok()) << again.status().ToString();
  auto jobs = (*again)->Load();
  ASSERT_TRUE(jobs.ok());
  ASSERT_EQ(jobs->size(), 2u);
  EXPECT_EQ((*jobs)[1].id, 2u);
  again->reset();
  clean();
}

TEST(SqliteJobStoreTest, NotADatabaseIsAnErrorNamingTheFile) {
  std::string path = TempPath("garbage");
  std::ofstream(path) << std::string(4096, 'x');
  auto s = SqliteJobStore::Open(path);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.status().message().find(path), std::string::npos) << s.status().ToString();
  std::filesystem::remove(path);
}

TEST(StoreWriterTest, BatchesAreWrittenAndFailedOnesRetried) {
  InMemoryJobStore store;
  StoreWriter writer(&store, StoreWriterOptions{1, 8192});
  std::vector<StoreRecord> recs = {JobSubmittedRecord{1, "a", "{}", 1}};
  writer.Append(&recs);
  EXPECT_TRUE(recs.empty());
  ASSERT_TRUE(writer.Flush().ok());
  EXPECT_EQ(store.records_written(), 1u);

  store.FailWrites(true);
  recs = {TaskDoneRecord{1, 0, 0, 1, 2, 0}};
  writer.Append(&recs);
  EXPECT_FALSE(writer.Flush().ok());
  EXPECT_GE(writer.write_errors(), 1u);
  store.FailWrites(false);
  recs = {TaskDoneRecord{1, 1, 0, 1, 2, 0}};
  writer.Append(&recs);
  ASSERT_TRUE(writer.Flush().ok());
  auto jobs = store.Load();
  ASSERT_TRUE(jobs.ok());
  EXPECT_EQ((*jobs)[0].done.size(), 2u);  // the failed batch was kept
}

TEST(StoreWriterTest, AfterWrittenTellsOnceWhetherTheRecordsAreStored) {
  InMemoryJobStore store;
  StoreWriter writer(&store, StoreWriterOptions{1, 8192});
  std::atomic<int> stored{0}, failed{0};
  auto count = [&](const Status& st) { ++(st.ok() ? stored : failed); };
  writer.AfterWritten(count);
  EXPECT_EQ(stored.load(), 1) << "nothing waited: called at once";
  store.FailWrites(true);
  std::vector<StoreRecord> recs = {JobSubmittedRecord{1, "a", "{}", 1}};
  writer.Append(&recs);
  writer.AfterWritten(count);
  EXPECT_FALSE(writer.Flush().ok());
  EXPECT_EQ(stored.load(), 1) << "not acknowledged while the write fails";
  EXPECT_EQ(failed.load(), 1) << "told of the failed write";
  // One waiting behind the failed records hears of their retry.
  store.FailWrites(false);
  writer.AfterWritten(count);
  recs = {TaskDoneRecord{1, 0, 0, 1, 2, 0}};
  writer.Append(&recs);
  ASSERT_TRUE(writer.Flush().ok());
  EXPECT_EQ(stored.load(), 2);
  EXPECT_EQ(failed.load(), 1) << "told once";
  EXPECT_EQ(store.records_written(), 2u) << "the failed records were retried";
}

// --- Scheduler::RestoreJob / AdoptRun, driven by hand ---

std::shared_ptr<const JobGraph> Chain() {
  auto spec = ParseJobSpec(R"({"tasks":[
      {"id":"a","kernel":"spin"},
      {"id":"b","kernel":"spin","inputs":["a"]},
      {"id":"c","kernel":"spin","inputs":["b"]}]})",
                           SpecLimits{});
  EXPECT_TRUE(spec.ok());
  auto g = JobGraph::Build(std::move(spec).value());
  EXPECT_TRUE(g.ok());
  return std::move(g).value();
}

DeviceDesc OneCube() {
  DeviceDesc d;
  d.name = "dev";
  d.cores[0] = 1;
  d.kernels = {"spin"};
  return d;
}

TEST(SchedulerRestoreTest, DoneRunsStayDoneAndTheNextOnesBecomeReady) {
  Scheduler s(SchedulerOptions{}, std::make_unique<HmpmdPolicy>());
  ASSERT_TRUE(s.RestoreJob(5, Chain(), {{0, 0, 10, 20}}, JobState::kRunning, "", 1, -1, 100).ok());
  s.AddDevice(OneCube());
  std::vector<Dispatch> out;
  s.Schedule(200, &out);
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].job, 5u);
  EXPECT_EQ(out[0].run, 1u);  // b; a is not run again
  EXPECT_EQ(s.job(5)->runs[0].state, TaskState::kDone);
  EXPECT_EQ(s.job(5)->started, 10) << "its done run's start";
  // An ended job whose start the store kept, with no run done.
  ASSERT_TRUE(s.RestoreJob(7, Chain(), {}, JobState::kCancelled, "", 1, 90, 100, 40).ok());
  EXPECT_EQ(s.job(7)->started, 40);
  // New jobs get ids above the restored ones.
  auto id = s.AddJob(Chain(), 300);
  ASSERT_TRUE(id.ok());
  EXPECT_EQ(*id, 8u);
}

TEST(SchedulerRestoreTest, AdoptedRunsAreNotDispatchedAgain) {
  SchedulerOptions opts;
  opts.pool.max_queue_per_core = 8;  // room for b beside the adopted c
  opts.pool.lookahead_us = 1e9;
  Scheduler s(opts, std::make_unique<HmpmdPolicy>());
  ASSERT_TRUE(s.RestoreJob(1, Chain(), {}, JobState::kQueued, "", 1, -1, 100).ok());
  DeviceId d = s.AddDevice(OneCube());
  // The worker still holds a (running) and c (finished, not yet recorded).
  EXPECT_TRUE(s.AdoptRun(1, 0, 0, d, CoreKind::kCube, 0, 110));
  EXPECT_TRUE(s.AdoptRun(1, 2, 0, d, CoreKind::kCube, 0, 110));
  EXPECT_FALSE(s.AdoptRun(1, 2, 0, d, CoreKind::kCube, 0, 110));    // twice
  EXPECT_FALSE(s.AdoptRun(1, 1, 0, d, CoreKind::kVector, 0, 110));  // no such core
  std::vector<Dispatch> out;
  s.Schedule(120, &out);
  EXPECT_TRUE(out.empty());
  ASSERT_TRUE(s.OnTaskDone(1, 0, 0, 100, 130, 130));
  s.Schedule(140, &out);
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].run, 1u);  // b, and never c
  ASSERT_TRUE(s.OnTaskDone(1, 2, 0, 100, 150, 150));
  ASSERT_TRUE(s.OnTaskDone(1, 1, 0, 140, 160, 160));
  out.clear();
  s.Schedule(170, &out);
  EXPECT_TRUE(out.empty());
  EXPECT_EQ(s.job(1)->state, JobState::kSucceeded);
}

TEST(SchedulerRestoreTest, ARunOutsideTheJobIsCorruption) {
  Scheduler s(SchedulerOptions{}, std::make_unique<HmpmdPolicy>());
  Status st = s.RestoreJob(1, Chain(), {{99, 0, 0, 0}}, JobState::kRunning, "", 0, -1, 0);
  EXPECT_EQ(st.code(), StatusCode::kCorruption);
}

}  // namespace
}  // namespace hmpmd

namespace hmpmd {
namespace {

// A driver session's open job restored with every run done stays open,
// with nothing ready, and a task appended after runs once (a run past the
// job's end was made ready, and the appended task placed twice).
TEST(SchedulerRestoreTest, ARestoredOpenJobWithEveryRunDoneTakesMoreTasks) {
  Scheduler s(SchedulerOptions{}, std::make_unique<HmpmdPolicy>());
  JobSpec spec;
  spec.name = "session";
  std::shared_ptr<JobGraph> graph = JobGraph::BuildOpen(spec).value();
  TaskSpec first;
  first.id = "a";
  first.kernel = "spin";
  ASSERT_TRUE(graph->Append({}, {first}).ok());
  ASSERT_TRUE(s.RestoreJob(3, graph, {{0, 0, 10, 20}}, JobState::kQueued, "", 1, -1, 100).ok());
  EXPECT_EQ(s.job(3)->state, JobState::kRunning) << "open: its driver closes it";
  EXPECT_EQ(s.job(3)->left_in_step, 0u);
  s.AddDevice(OneCube());
  s.AddDevice(OneCube());
  std::vector<Dispatch> none;
  s.Schedule(120, &none);
  EXPECT_TRUE(none.empty()) << "nothing to run until the driver appends";
  TaskSpec next;
  next.id = "b";
  next.kernel = "spin";
  Status appended = s.AppendTasks(3, {}, {next}, 150);
  ASSERT_TRUE(appended.ok()) << appended.ToString();
  std::vector<Dispatch> out;
  s.Schedule(200, &out);
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].run, 1u);
  EXPECT_EQ(out[0].attempt, 0u);
}

}  // namespace
}  // namespace hmpmd
