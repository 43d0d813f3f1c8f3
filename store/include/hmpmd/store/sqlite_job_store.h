// SqliteJobStore: the JobStore on an SQLite file in WAL mode.
//
// Schema: jobs(id, name, spec, state, error, submitted, finished,
// finished_unix_ms), task_runs(job, run, attempt, start, end, device, bytes),
// one row per finished run, workers(key), the workers alive, and
// meta(key, value) with the largest job id ever written ('max_job') and the
// store's epoch, drawn at random when the file is made ('epoch'), and the
// data token ('data_token_hi', 'data_token_lo'; also drawn then). Files of an
// older version get the new columns on Open(). Write() is one transaction; with synchronous=NORMAL
// a power loss may drop the last transactions but never corrupts the file, and a process crash
// (kill -9) loses nothing that Write() returned for. One store at a time holds a file: Open()
// takes an exclusive lock on FILE-lock (flock, released when the store closes or its process
// dies), so a second controller on the same --db is refused instead of overwriting the first's
// jobs. This is an adapter: SQLite errors become Status, naming the file. Thread-safety: one
// thread at a time (SQLITE_OPEN_NOMUTEX).
#pragma once

#include <memory>
#include <string>

#include "hmpmd/store/job_store.h"

struct sqlite3;
struct sqlite3_stmt;

namespace hmpmd {

class SqliteJobStore : public JobStore {
 public:
  // Opens or creates the database at `path` and its tables.
  static Result<std::unique_ptr<SqliteJobStore>> Open(const std::string& path);
  ~SqliteJobStore() override;
  SqliteJobStore(const SqliteJobStore&) = delete;
  SqliteJobStore& operator=(const SqliteJobStore&) = delete;

  Status Write(std::span<const StoreRecord> batch) override;
  Result<std::vector<StoredJob>> Load() override;
  Result<std::optional<std::vector<std::string>>> LoadLiveWorkers() override;
  Result<JobId> LoadMaxJobId() override;
  Result<uint64_t> LoadEpoch() override;
  Result<std::optional<DataToken>> LoadDataToken() override;

 private:
  explicit SqliteJobStore(std::string path) : path_(std::move(path)) {}
  Status Exec(const char* sql);
  Status Prepare(const char* sql, sqlite3_stmt** out);
  // The first column of the first row of `sql` (0 without rows).
  Result<int64_t> QueryInt(const std::string& sql);
  Status Error(const std::string& what) const;
  Status Apply(const StoreRecord& record);
  // Ok while `path_` still names the file this store has open; an error
  // once it was deleted or replaced (writes would go to a file no restart
  // reads).
  Status CheckStillThere() const;

  std::string path_;
  int lock_fd_ = -1;  // FILE-lock, held (flock) while the store is open
  // The database file itself, held (flock) too: a link to it has another
  // FILE-lock beside it. Closed only after SQLite lets go of the file
  // (closing any descriptor of it drops SQLite's POSIX locks).
  int file_lock_fd_ = -1;
  sqlite3* db_ = nullptr;
  sqlite3_stmt* insert_job_ = nullptr;
  sqlite3_stmt* insert_run_ = nullptr;
  sqlite3_stmt* end_job_ = nullptr;
  sqlite3_stmt* forget_job_ = nullptr;
  sqlite3_stmt* forget_runs_ = nullptr;
  sqlite3_stmt* add_worker_ = nullptr;
  sqlite3_stmt* drop_worker_ = nullptr;
  sqlite3_stmt* max_job_ = nullptr;
  sqlite3_stmt* insert_group_ = nullptr;
  sqlite3_stmt* insert_end_ = nullptr;
  sqlite3_stmt* forget_groups_ = nullptr;
  sqlite3_stmt* forget_ends_ = nullptr;
  bool workers_known_ = true;  // false: an older version wrote the file
};

}  // namespace hmpmd
