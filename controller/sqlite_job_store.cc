#include "sqlite_job_store.h"

#include <sqlite3.h>

#include <map>

namespace hmpmd {
namespace {

constexpr const char* kSchema = R"sql(
CREATE TABLE IF NOT EXISTS jobs (
  id INTEGER PRIMARY KEY,
  name TEXT NOT NULL,
  spec TEXT NOT NULL,
  state INTEGER NOT NULL DEFAULT 0,
  error TEXT NOT NULL DEFAULT '',
  submitted INTEGER NOT NULL,
  finished INTEGER NOT NULL DEFAULT -1);
CREATE TABLE IF NOT EXISTS task_runs (
  job INTEGER NOT NULL,
  run INTEGER NOT NULL,
  attempt INTEGER NOT NULL,
  start INTEGER NOT NULL,
  end INTEGER NOT NULL,
  device INTEGER NOT NULL,
  PRIMARY KEY (job, run)) WITHOUT ROWID;
)sql";

// Binds a std::string as text that SQLite copies.
int BindText(sqlite3_stmt* s, int i, const std::string& v) {
  return sqlite3_bind_text(s, i, v.data(), static_cast<int>(v.size()), SQLITE_TRANSIENT);
}

std::string ColumnText(sqlite3_stmt* s, int i) {
  const unsigned char* p = sqlite3_column_text(s, i);
  return p ? std::string(reinterpret_cast<const char*>(p),
                         static_cast<size_t>(sqlite3_column_bytes(s, i)))
           : std::string();
}

}  // namespace

Result<std::unique_ptr<SqliteJobStore>> SqliteJobStore::Open(const std::string& path) {
  std::unique_ptr<SqliteJobStore> store(new SqliteJobStore(path));
  int rc =
      sqlite3_open_v2(path.c_str(), &store->db_,
                      SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX, nullptr);
  if (rc != SQLITE_OK) return store->Error("open");
  sqlite3_busy_timeout(store->db_, 5000);
  RETURN_IF_ERROR(store->Exec("PRAGMA journal_mode=WAL"));
  RETURN_IF_ERROR(store->Exec("PRAGMA synchronous=NORMAL"));
  RETURN_IF_ERROR(store->Exec(kSchema));
  RETURN_IF_ERROR(
      store->Prepare("INSERT OR REPLACE INTO jobs(id, name, spec, submitted) VALUES (?, ?, ?, ?)",
                     &store->insert_job_));
  RETURN_IF_ERROR(
      store->Prepare("INSERT OR REPLACE INTO task_runs(job, run, attempt, start, end, device) "
                     "VALUES (?, ?, ?, ?, ?, ?)",
                     &store->insert_run_));
  RETURN_IF_ERROR(store->Prepare("UPDATE jobs SET state = ?, error = ?, finished = ? WHERE id = ?",
                                 &store->end_job_));
  RETURN_IF_ERROR(store->Prepare("DELETE FROM jobs WHERE id = ?", &store->forget_job_));
  RETURN_IF_ERROR(store->Prepare("DELETE FROM task_runs WHERE job = ?", &store->forget_runs_));
  return store;
}

SqliteJobStore::~SqliteJobStore() {
  for (sqlite3_stmt* s : {insert_job_, insert_run_, end_job_, forget_job_, forget_runs_}) {
    sqlite3_finalize(s);
  }
  sqlite3_close(db_);
}

Status SqliteJobStore::Error(const std::string& what) const {
  return Status::Unavailable("job store " + path_ + ": " + what + ": " +
                             (db_ ? sqlite3_errmsg(db_) : "out of memory"));
}

Status SqliteJobStore::Exec(const char* sql) {
  char* msg = nullptr;
  int rc = sqlite3_exec(db_, sql, nullptr, nullptr, &msg);
  if (rc == SQLITE_OK) return Status::Ok();
  std::string text = msg ? msg : sqlite3_errstr(rc);
  sqlite3_free(msg);
  return Status::Unavailable("job store " + path_ + ": " + text);
}

Status SqliteJobStore::Prepare(const char* sql, sqlite3_stmt** out) {
  if (sqlite3_prepare_v3(db_, sql, -1, SQLITE_PREPARE_PERSISTENT, out, nullptr) != SQLITE_OK) {
    return Error("prepare");
  }
  return Status::Ok();
}

Status SqliteJobStore::Apply(const StoreRecord& record) {
  sqlite3_stmt* s = nullptr;
  std::visit(
      [&](const auto& r) {
        using T = std::decay_t<decltype(r)>;
        if constexpr (std::is_same_v<T, JobSubmittedRecord>) {
          s = insert_job_;
          sqlite3_bind_int64(s, 1, static_cast<sqlite3_int64>(r.job));
          BindText(s, 2, r.name);
          BindText(s, 3, r.spec_json);
          sqlite3_bind_int64(s, 4, r.submitted);
        } else if constexpr (std::is_same_v<T, TaskDoneRecord>) {
          s = insert_run_;
          sqlite3_bind_int64(s, 1, static_cast<sqlite3_int64>(r.job));
          sqlite3_bind_int64(s, 2, r.run);
          sqlite3_bind_int64(s, 3, r.attempt);
          sqlite3_bind_int64(s, 4, r.start);
          sqlite3_bind_int64(s, 5, r.end);
          sqlite3_bind_int64(s, 6, r.device);
        } else if constexpr (std::is_same_v<T, JobEndedRecord>) {
          s = end_job_;
          sqlite3_bind_int(s, 1, static_cast<int>(r.state));
          BindText(s, 2, r.error);
          sqlite3_bind_int64(s, 3, r.finished);
          sqlite3_bind_int64(s, 4, static_cast<sqlite3_int64>(r.job));
        } else {
          s = forget_runs_;
          sqlite3_bind_int64(s, 1, static_cast<sqlite3_int64>(r.job));
          if (sqlite3_step(s) != SQLITE_DONE) {
            sqlite3_reset(s);
            s = nullptr;
            return;
          }
          sqlite3_reset(s);
          s = forget_job_;
          sqlite3_bind_int64(s, 1, static_cast<sqlite3_int64>(r.job));
        }
      },
      record);
  if (s == nullptr) return Error("delete");
  int rc = sqlite3_step(s);
  sqlite3_reset(s);
  sqlite3_clear_bindings(s);
  if (rc != SQLITE_DONE) return Error("write");
  return Status::Ok();
}

Status SqliteJobStore::Write(std::span<const StoreRecord> batch) {
  if (batch.empty()) return Status::Ok();
  RETURN_IF_ERROR(Exec("BEGIN IMMEDIATE"));
  for (const StoreRecord& r : batch) {
    Status st = Apply(r);
    if (!st.ok()) {
      (void)Exec("ROLLBACK");
      return st;
    }
  }
  Status st = Exec("COMMIT");
  if (!st.ok()) (void)Exec("ROLLBACK");
  return st;
}

Result<std::vector<StoredJob>> SqliteJobStore::Load() {
  std::vector<StoredJob> jobs;
  std::map<JobId, size_t> index;
  sqlite3_stmt* s = nullptr;
  RETURN_IF_ERROR(Prepare(
      "SELECT id, name, spec, state, error, submitted, finished FROM jobs ORDER BY id", &s));
  int rc;
  while ((rc = sqlite3_step(s)) == SQLITE_ROW) {
    StoredJob j;
    j.id = static_cast<JobId>(sqlite3_column_int64(s, 0));
    j.name = ColumnText(s, 1);
    j.spec_json = ColumnText(s, 2);
    int state = sqlite3_column_int(s, 3);
    if (state < 0 || state > static_cast<int>(JobState::kCancelled)) {
      sqlite3_finalize(s);
      return Status::Corruption("job store " + path_ + ": job " + std::to_string(j.id) +
                                ": state " + std::to_string(state) + " is not a job state");
    }
    j.state = static_cast<JobState>(state);
    j.error = ColumnText(s, 4);
    j.submitted = sqlite3_column_int64(s, 5);
    j.finished = sqlite3_column_int64(s, 6);
    index[j.id] = jobs.size();
    jobs.push_back(std::move(j));
  }
  sqlite3_finalize(s);
  if (rc != SQLITE_DONE) return Error("read jobs");
  RETURN_IF_ERROR(
      Prepare("SELECT job, run, attempt, start, end, device FROM task_runs ORDER BY job, run", &s));
  while ((rc = sqlite3_step(s)) == SQLITE_ROW) {
    TaskDoneRecord r;
    r.job = static_cast<JobId>(sqlite3_column_int64(s, 0));
    r.run = static_cast<uint32_t>(sqlite3_column_int64(s, 1));
    r.attempt = static_cast<uint32_t>(sqlite3_column_int64(s, 2));
    r.start = sqlite3_column_int64(s, 3);
    r.end = sqlite3_column_int64(s, 4);
    r.device = static_cast<DeviceId>(sqlite3_column_int64(s, 5));
    auto it = index.find(r.job);
    if (it != index.end()) jobs[it->second].done.push_back(r);
  }
  sqlite3_finalize(s);
  if (rc != SQLITE_DONE) return Error("read task runs");
  return jobs;
}

}  // namespace hmpmd
