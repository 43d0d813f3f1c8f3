#include "hmpmd/store/sqlite_job_store.h"

#include <fcntl.h>
#include <sqlite3.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <limits>
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
  finished INTEGER NOT NULL DEFAULT -1,
  finished_unix_ms INTEGER NOT NULL DEFAULT 0,
  started INTEGER NOT NULL DEFAULT -1,
  metrics TEXT NOT NULL DEFAULT '');
CREATE TABLE IF NOT EXISTS task_runs (
  job INTEGER NOT NULL,
  run INTEGER NOT NULL,
  attempt INTEGER NOT NULL,
  start INTEGER NOT NULL,
  end INTEGER NOT NULL,
  device INTEGER NOT NULL,
  bytes INTEGER NOT NULL DEFAULT -1,
  buffers INTEGER NOT NULL DEFAULT 0,
  PRIMARY KEY (job, run)) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS session_groups (
  job INTEGER NOT NULL,
  idx INTEGER NOT NULL,
  seq INTEGER NOT NULL,
  error TEXT NOT NULL DEFAULT '',
  body BLOB NOT NULL,
  PRIMARY KEY (job, idx)) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS run_ends (
  job INTEGER NOT NULL,
  run INTEGER NOT NULL,
  cancelled INTEGER NOT NULL,
  error TEXT NOT NULL DEFAULT '',
  PRIMARY KEY (job, run)) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS workers (key TEXT PRIMARY KEY) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value INTEGER NOT NULL) WITHOUT ROWID;
INSERT OR IGNORE INTO meta(key, value) SELECT 'max_job', coalesce(max(id), 0) FROM jobs;
INSERT OR IGNORE INTO meta(key, value) VALUES ('epoch', (random() & 9223372036854775807) | 1);
INSERT OR IGNORE INTO meta(key, value) VALUES ('data_token_hi', random());
INSERT OR IGNORE INTO meta(key, value) VALUES ('data_token_lo', random());
)sql";

// Columns added after the first release, for files an older version made
// (-1 bytes: not known, so such an output counts as held nowhere).
constexpr const char* kAddedColumns[][3] = {
    {"jobs", "finished_unix_ms", "INTEGER NOT NULL DEFAULT 0"},
    {"task_runs", "bytes", "INTEGER NOT NULL DEFAULT -1"},
    {"jobs", "started", "INTEGER NOT NULL DEFAULT -1"},
    // 0 (not known): such a run kept outputs if it had bytes, as before.
    {"task_runs", "buffers", "INTEGER NOT NULL DEFAULT 0"},
    // '' (not known): the job shows its makespan only, as before.
    {"jobs", "metrics", "TEXT NOT NULL DEFAULT ''"},
    // Wall clock, Unix microseconds; 0: not known (RFC 3339 where shown).
    {"jobs", "submitted_unix_us", "INTEGER NOT NULL DEFAULT 0"},
    {"jobs", "started_unix_us", "INTEGER NOT NULL DEFAULT 0"},
    {"jobs", "finished_unix_us", "INTEGER NOT NULL DEFAULT 0"},
    {"task_runs", "start_unix_us", "INTEGER NOT NULL DEFAULT 0"},
    {"task_runs", "end_unix_us", "INTEGER NOT NULL DEFAULT 0"},
    // Where it ran (RunPlace); core_kind -1: not known, its history shows
    // the run without a place.
    {"task_runs", "worker", "TEXT NOT NULL DEFAULT ''"},
    {"task_runs", "core_kind", "INTEGER NOT NULL DEFAULT -1"},
    {"task_runs", "lane", "INTEGER NOT NULL DEFAULT 0"},
    // '': no tenant (submitted without tokens, or by an older version).
    {"jobs", "tenant", "TEXT NOT NULL DEFAULT ''"},
    {"jobs", "tenant_share", "INTEGER NOT NULL DEFAULT 1"},
};

// PRAGMA user_version of a file whose `workers` table is kept up to date.
constexpr int kVersionWithWorkers = 1;

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

// The entry of job `id` as a column holds it; end() for none (ids are
// 32-bit: one out of range would name another job).
std::map<JobId, size_t>::const_iterator JobAt(const std::map<JobId, size_t>& index, int64_t id) {
  if (id < 1 || id > int64_t{std::numeric_limits<JobId>::max()}) return index.end();
  return index.find(static_cast<JobId>(id));
}

}  // namespace

Result<std::unique_ptr<SqliteJobStore>> SqliteJobStore::Open(const std::string& path) {
  std::unique_ptr<SqliteJobStore> store(new SqliteJobStore(path));
  // Two controllers on one file both started and wrote job 1, each over
  // the other's. The lock file is beside the database (like its -wal and
  // -shm files) and says which process holds it.
  const std::string lock_path = path + "-lock";
  store->lock_fd_ = ::open(lock_path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (store->lock_fd_ < 0) {
    return Status::Unavailable("job store " + path + ": cannot open " + lock_path + ": " +
                               std::strerror(errno));
  }
  if (::flock(store->lock_fd_, LOCK_EX | LOCK_NB) != 0) {
    char holder[32] = {};
    const ssize_t n = ::pread(store->lock_fd_, holder, sizeof holder - 1, 0);
    std::string pid = n > 0 ? std::string(holder, static_cast<size_t>(n)) : "";
    pid.erase(pid.find_last_not_of("\n ") + 1);
    return Status::InvalidArgument("job store " + path + ": in use by another controller" +
                                   (pid.empty() ? "" : " (pid " + pid + ")") +
                                   "; one controller per file");
  }
  // A symbolic or hard link to the file has its own FILE-lock: the file's
  // own lock (flock, apart from SQLite's POSIX locks) catches it.
  store->file_lock_fd_ = ::open(path.c_str(), O_RDONLY | O_CREAT | O_CLOEXEC, 0644);
  if (store->file_lock_fd_ < 0) {
    return Status::Unavailable("job store " + path + ": cannot open: " + std::strerror(errno));
  }
  if (::flock(store->file_lock_fd_, LOCK_EX | LOCK_NB) != 0) {
    return Status::InvalidArgument(
        "job store " + path +
        ": in use by another controller under another name (a link to the same file); one "
        "controller per file");
  }
  // The pid only serves a refused second controller's message.
  const std::string me = std::to_string(::getpid()) + "\n";
  if (::ftruncate(store->lock_fd_, 0) == 0) {
    (void)!::pwrite(store->lock_fd_, me.data(), me.size(), 0);
  }
  int rc =
      sqlite3_open_v2(path.c_str(), &store->db_,
                      SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX, nullptr);
  if (rc != SQLITE_OK) return store->Error("open");
  sqlite3_busy_timeout(store->db_, 5000);
  RETURN_IF_ERROR(store->Exec("PRAGMA journal_mode=WAL"));
  RETURN_IF_ERROR(store->Exec("PRAGMA synchronous=NORMAL"));
  // A file with jobs but an older version did not record its workers.
  ASSIGN_OR_RETURN(int64_t version, store->QueryInt("PRAGMA user_version"));
  ASSIGN_OR_RETURN(int64_t had_jobs,
                   store->QueryInt("SELECT count(*) FROM sqlite_master WHERE name = 'jobs'"));
  store->workers_known_ = version >= kVersionWithWorkers || had_jobs == 0;
  RETURN_IF_ERROR(store->Exec(kSchema));
  for (const auto& [table, column, decl] : kAddedColumns) {
    ASSIGN_OR_RETURN(int64_t has,
                     store->QueryInt("SELECT count(*) FROM pragma_table_info('" +
                                     std::string(table) + "') WHERE name = '" + column + "'"));
    if (has == 0) {
      RETURN_IF_ERROR(store->Exec(
          ("ALTER TABLE " + std::string(table) + " ADD COLUMN " + column + " " + decl).c_str()));
    }
  }
  RETURN_IF_ERROR(
      store->Exec(("PRAGMA user_version = " + std::to_string(kVersionWithWorkers)).c_str()));
  RETURN_IF_ERROR(store->Prepare(
      "INSERT OR REPLACE INTO jobs(id, name, spec, submitted, submitted_unix_us, tenant, "
      "tenant_share) VALUES (?, ?, ?, ?, ?, ?, ?)",
      &store->insert_job_));
  RETURN_IF_ERROR(
      store->Prepare("INSERT OR REPLACE INTO task_runs(job, run, attempt, start, end, device, "
                     "bytes, buffers, start_unix_us, end_unix_us, worker, core_kind, lane) "
                     "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                     &store->insert_run_));
  RETURN_IF_ERROR(store->Prepare(
      "UPDATE jobs SET state = ?, error = ?, finished = ?, finished_unix_ms = ?, started = ?, "
      "metrics = ?, started_unix_us = ?, finished_unix_us = ? WHERE id = ?",
      &store->end_job_));
  RETURN_IF_ERROR(
      store->Prepare("INSERT OR REPLACE INTO workers(key) VALUES (?)", &store->add_worker_));
  RETURN_IF_ERROR(store->Prepare("DELETE FROM workers WHERE key = ?", &store->drop_worker_));
  RETURN_IF_ERROR(store->Prepare("UPDATE meta SET value = max(value, ?) WHERE key = 'max_job'",
                                 &store->max_job_));
  RETURN_IF_ERROR(store->Prepare("DELETE FROM jobs WHERE id = ?", &store->forget_job_));
  RETURN_IF_ERROR(store->Prepare("DELETE FROM task_runs WHERE job = ?", &store->forget_runs_));
  RETURN_IF_ERROR(store->Prepare(
      "INSERT OR REPLACE INTO session_groups(job, idx, seq, error, body) VALUES (?, ?, ?, ?, ?)",
      &store->insert_group_));
  RETURN_IF_ERROR(store->Prepare(
      "INSERT OR REPLACE INTO run_ends(job, run, cancelled, error) VALUES (?, ?, ?, ?)",
      &store->insert_end_));
  RETURN_IF_ERROR(
      store->Prepare("DELETE FROM session_groups WHERE job = ?", &store->forget_groups_));
  RETURN_IF_ERROR(store->Prepare("DELETE FROM run_ends WHERE job = ?", &store->forget_ends_));
  return store;
}

SqliteJobStore::~SqliteJobStore() {
  for (sqlite3_stmt* s :
       {insert_job_, insert_run_, end_job_, forget_job_, forget_runs_, add_worker_, drop_worker_,
        max_job_, insert_group_, insert_end_, forget_groups_, forget_ends_}) {
    sqlite3_finalize(s);
  }
  sqlite3_close(db_);
  if (file_lock_fd_ >= 0) ::close(file_lock_fd_);
  if (lock_fd_ >= 0) ::close(lock_fd_);  // releases the lock
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

Result<int64_t> SqliteJobStore::QueryInt(const std::string& sql) {
  sqlite3_stmt* s = nullptr;
  if (sqlite3_prepare_v2(db_, sql.c_str(), -1, &s, nullptr) != SQLITE_OK) return Error("prepare");
  int rc = sqlite3_step(s);
  int64_t v = rc == SQLITE_ROW ? sqlite3_column_int64(s, 0) : 0;
  sqlite3_finalize(s);
  if (rc != SQLITE_ROW && rc != SQLITE_DONE) return Error("query");
  return v;
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
          sqlite3_bind_int64(max_job_, 1, static_cast<sqlite3_int64>(r.job));
          const int rc = sqlite3_step(max_job_);
          sqlite3_reset(max_job_);
          if (rc != SQLITE_DONE) return;  // s stays null: an error
          s = insert_job_;
          sqlite3_bind_int64(s, 1, static_cast<sqlite3_int64>(r.job));
          BindText(s, 2, r.name);
          BindText(s, 3, r.spec_json);
          sqlite3_bind_int64(s, 4, r.submitted);
          sqlite3_bind_int64(s, 5, r.submitted_unix_us);
          BindText(s, 6, r.tenant);
          sqlite3_bind_int64(s, 7, r.tenant_share);
        } else if constexpr (std::is_same_v<T, TaskDoneRecord>) {
          s = insert_run_;
          sqlite3_bind_int64(s, 1, static_cast<sqlite3_int64>(r.job));
          sqlite3_bind_int64(s, 2, r.run);
          sqlite3_bind_int64(s, 3, r.attempt);
          sqlite3_bind_int64(s, 4, r.start);
          sqlite3_bind_int64(s, 5, r.end);
          sqlite3_bind_int64(s, 6, r.device);
          sqlite3_bind_int64(s, 7, static_cast<sqlite3_int64>(r.bytes));
          sqlite3_bind_int64(s, 8, r.buffers);
          sqlite3_bind_int64(s, 9, r.start_unix_us);
          sqlite3_bind_int64(s, 10, r.end_unix_us);
          BindText(s, 11, r.place.worker);
          sqlite3_bind_int(s, 12, r.place.kind);
          sqlite3_bind_int64(s, 13, r.place.lane);
        } else if constexpr (std::is_same_v<T, JobEndedRecord>) {
          s = end_job_;
          sqlite3_bind_int(s, 1, static_cast<int>(r.state));
          BindText(s, 2, r.error);
          sqlite3_bind_int64(s, 3, r.finished);
          sqlite3_bind_int64(s, 4, r.finished_unix_ms);
          sqlite3_bind_int64(s, 5, r.started);
          BindText(s, 6, r.metrics);
          sqlite3_bind_int64(s, 7, r.started_unix_us);
          sqlite3_bind_int64(s, 8, r.finished_unix_us);
          sqlite3_bind_int64(s, 9, static_cast<sqlite3_int64>(r.job));
        } else if constexpr (std::is_same_v<T, WorkerRecord>) {
          s = r.alive ? add_worker_ : drop_worker_;
          BindText(s, 1, r.key);
        } else if constexpr (std::is_same_v<T, SessionGroupRecord>) {
          s = insert_group_;
          sqlite3_bind_int64(s, 1, static_cast<sqlite3_int64>(r.job));
          sqlite3_bind_int64(s, 2, r.index);
          sqlite3_bind_int64(s, 3, static_cast<sqlite3_int64>(r.seq));
          BindText(s, 4, r.error);
          sqlite3_bind_blob(s, 5, r.body.data(), static_cast<int>(r.body.size()), SQLITE_TRANSIENT);
        } else if constexpr (std::is_same_v<T, RunEndedRecord>) {
          s = insert_end_;
          sqlite3_bind_int64(s, 1, static_cast<sqlite3_int64>(r.job));
          sqlite3_bind_int64(s, 2, r.run);
          sqlite3_bind_int(s, 3, r.cancelled ? 1 : 0);
          BindText(s, 4, r.error);
        } else {
          static_assert(std::is_same_v<T, JobForgottenRecord>);
          // Its runs, groups and run ends first, then the job.
          for (sqlite3_stmt* part : {forget_runs_, forget_groups_, forget_ends_}) {
            sqlite3_bind_int64(part, 1, static_cast<sqlite3_int64>(r.job));
            const int rc = sqlite3_step(part);
            sqlite3_reset(part);
            if (rc != SQLITE_DONE) return;  // s stays null: an error
          }
          s = forget_job_;
          sqlite3_bind_int64(s, 1, static_cast<sqlite3_int64>(r.job));
        }
      },
      record);
  if (s == nullptr) return Error("write");
  int rc = sqlite3_step(s);
  sqlite3_reset(s);
  sqlite3_clear_bindings(s);
  if (rc != SQLITE_DONE) return Error("write");
  return Status::Ok();
}

Status SqliteJobStore::CheckStillThere() const {
  struct stat open_file = {};
  struct stat named = {};
  if (::fstat(file_lock_fd_, &open_file) != 0) return Status::Ok();  // cannot tell
  const bool same = ::stat(path_.c_str(), &named) == 0 && named.st_dev == open_file.st_dev &&
                    named.st_ino == open_file.st_ino;
  if (same) return Status::Ok();
  return Status::Unavailable("job store " + path_ +
                             ": the file was deleted or replaced while the controller ran; what "
                             "is written now would be lost at a restart (restore the file or "
                             "restart the controller)");
}

Status SqliteJobStore::Write(std::span<const StoreRecord> batch) {
  if (batch.empty()) return Status::Ok();
  // A deleted file takes writes without an error, and a restart finds
  // none of them: refuse them, as a full disk's are, until it is back.
  RETURN_IF_ERROR(CheckStillThere());
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
      "SELECT id, name, spec, state, error, submitted, finished, finished_unix_ms, started, "
      "metrics, submitted_unix_us, started_unix_us, finished_unix_us, tenant, tenant_share "
      "FROM jobs ORDER BY id",
      &s));
  int rc;
  while ((rc = sqlite3_step(s)) == SQLITE_ROW) {
    StoredJob j;
    const int64_t id = sqlite3_column_int64(s, 0);
    // Ids are 32-bit: one out of range would name another job (-5 was
    // served as 4294967291) and its updates would miss its row.
    if (id < 1 || id > int64_t{std::numeric_limits<JobId>::max()}) {
      sqlite3_finalize(s);
      return Status::Corruption("job store " + path_ + ": job id " + std::to_string(id) +
                                " is not in 1 to " +
                                std::to_string(std::numeric_limits<JobId>::max()));
    }
    j.id = static_cast<JobId>(id);
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
    j.finished_unix_ms = sqlite3_column_int64(s, 7);
    j.started = sqlite3_column_int64(s, 8);
    j.metrics = ColumnText(s, 9);
    j.submitted_unix_us = sqlite3_column_int64(s, 10);
    j.started_unix_us = sqlite3_column_int64(s, 11);
    j.finished_unix_us = sqlite3_column_int64(s, 12);
    j.tenant = ColumnText(s, 13);
    const int64_t share = sqlite3_column_int64(s, 14);
    j.tenant_share = share >= 1 && share <= UINT32_MAX ? static_cast<uint32_t>(share) : 1;
    index[j.id] = jobs.size();
    jobs.push_back(std::move(j));
  }
  sqlite3_finalize(s);
  if (rc != SQLITE_DONE) return Error("read jobs");
  RETURN_IF_ERROR(
      Prepare("SELECT job, run, attempt, start, end, device, bytes, buffers, start_unix_us, "
              "end_unix_us, worker, core_kind, lane FROM task_runs ORDER BY job, run",
              &s));
  while ((rc = sqlite3_step(s)) == SQLITE_ROW) {
    TaskDoneRecord r;
    const int64_t job = sqlite3_column_int64(s, 0);
    if (job < 1 || job > int64_t{std::numeric_limits<JobId>::max()}) continue;  // no such job
    r.job = static_cast<JobId>(job);
    r.run = static_cast<uint32_t>(sqlite3_column_int64(s, 1));
    r.attempt = static_cast<uint32_t>(sqlite3_column_int64(s, 2));
    r.start = sqlite3_column_int64(s, 3);
    r.end = sqlite3_column_int64(s, 4);
    r.device = static_cast<DeviceId>(sqlite3_column_int64(s, 5));
    // -1 (written by an older version): size not known, taken as not empty.
    r.bytes = static_cast<uint64_t>(sqlite3_column_int64(s, 6));
    r.buffers = static_cast<uint32_t>(sqlite3_column_int64(s, 7));
    r.start_unix_us = sqlite3_column_int64(s, 8);
    r.end_unix_us = sqlite3_column_int64(s, 9);
    r.place.worker = ColumnText(s, 10);
    // Only the kinds there are; anything else is a place not known.
    const int64_t kind = sqlite3_column_int64(s, 11);
    r.place.kind =
        kind >= 0 && kind < int64_t{kNumCoreKinds} ? static_cast<int8_t>(kind) : int8_t{-1};
    r.place.lane = static_cast<uint32_t>(sqlite3_column_int64(s, 12));
    auto it = index.find(r.job);
    if (it != index.end()) jobs[it->second].done.push_back(r);
  }
  sqlite3_finalize(s);
  if (rc != SQLITE_DONE) return Error("read task runs");
  RETURN_IF_ERROR(
      Prepare("SELECT job, idx, seq, error, body FROM session_groups ORDER BY job, idx", &s));
  while ((rc = sqlite3_step(s)) == SQLITE_ROW) {
    auto it = JobAt(index, sqlite3_column_int64(s, 0));
    if (it == index.end()) continue;  // no such job
    SessionGroupRecord g;
    g.job = it->first;
    g.index = static_cast<uint32_t>(sqlite3_column_int64(s, 1));
    g.seq = static_cast<uint64_t>(sqlite3_column_int64(s, 2));
    g.error = ColumnText(s, 3);
    const void* body = sqlite3_column_blob(s, 4);
    g.body.assign(static_cast<const char*>(body),
                  body ? static_cast<size_t>(sqlite3_column_bytes(s, 4)) : 0);
    jobs[it->second].groups.push_back(std::move(g));
  }
  sqlite3_finalize(s);
  if (rc != SQLITE_DONE) return Error("read session groups");
  RETURN_IF_ERROR(Prepare("SELECT job, run, cancelled, error FROM run_ends ORDER BY job, run", &s));
  while ((rc = sqlite3_step(s)) == SQLITE_ROW) {
    auto it = JobAt(index, sqlite3_column_int64(s, 0));
    if (it == index.end()) continue;  // no such job
    RunEndedRecord e;
    e.job = it->first;
    e.run = static_cast<uint32_t>(sqlite3_column_int64(s, 1));
    e.cancelled = sqlite3_column_int(s, 2) != 0;
    e.error = ColumnText(s, 3);
    jobs[it->second].ended.push_back(std::move(e));
  }
  sqlite3_finalize(s);
  if (rc != SQLITE_DONE) return Error("read run ends");
  return jobs;
}

}  // namespace hmpmd

namespace hmpmd {

Result<std::optional<std::vector<std::string>>> SqliteJobStore::LoadLiveWorkers() {
  if (!workers_known_) return std::optional<std::vector<std::string>>();
  sqlite3_stmt* s = nullptr;
  RETURN_IF_ERROR(Prepare("SELECT key FROM workers ORDER BY key", &s));
  std::vector<std::string> keys;
  int rc;
  while ((rc = sqlite3_step(s)) == SQLITE_ROW) keys.push_back(ColumnText(s, 0));
  sqlite3_finalize(s);
  if (rc != SQLITE_DONE) return Error("read workers");
  return std::optional<std::vector<std::string>>(std::move(keys));
}

}  // namespace hmpmd

namespace hmpmd {

Result<uint64_t> SqliteJobStore::LoadEpoch() {
  ASSIGN_OR_RETURN(int64_t epoch, QueryInt("SELECT value FROM meta WHERE key = 'epoch'"));
  return static_cast<uint64_t>(epoch);
}

// SQLite's random() draws from a generator seeded by the OS's randomness
// (/dev/urandom), good enough for a secret of 128 bits. Files made before
// the token get theirs on the first open by this version (kSchema).
Result<std::optional<DataToken>> SqliteJobStore::LoadDataToken() {
  ASSIGN_OR_RETURN(int64_t hi, QueryInt("SELECT value FROM meta WHERE key = 'data_token_hi'"));
  ASSIGN_OR_RETURN(int64_t lo, QueryInt("SELECT value FROM meta WHERE key = 'data_token_lo'"));
  const DataToken t{static_cast<uint64_t>(hi), static_cast<uint64_t>(lo)};
  if (t.empty()) return std::optional<DataToken>();
  return std::optional<DataToken>(t);
}

Result<JobId> SqliteJobStore::LoadMaxJobId() {
  ASSIGN_OR_RETURN(int64_t max_id, QueryInt("SELECT value FROM meta WHERE key = 'max_job'"));
  if (max_id < 0 || max_id > int64_t{std::numeric_limits<JobId>::max()}) {
    return Status::Corruption("job store " + path_ + ": the largest job id " +
                              std::to_string(max_id) + " is not in 0 to " +
                              std::to_string(std::numeric_limits<JobId>::max()));
  }
  return static_cast<JobId>(max_id);
}

}  // namespace hmpmd
