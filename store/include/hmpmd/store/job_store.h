// JobStore: the seam between the controller and durable storage of jobs.
//
// The controller describes every change worth keeping as a StoreRecord (a
// job was submitted with its spec, a task run finished, a job ended, a job
// was forgotten) and a StoreWriter hands them to a JobStore in batches. After
// a restart, Load() gives back every job the store holds, so unfinished jobs
// resume and finished ones stay queryable.
//
// Implementations: SqliteJobStore (the real one) and InMemoryJobStore (the
// fake for tests). Thread-safety: an implementation is used by one thread at
// a time (the StoreWriter's, or the loop's before the writer starts).
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <variant>
#include <vector>

#include "hmpmd/protocol/data_token.h"
#include "hmpmd/protocol/status.h"
#include "hmpmd/scheduler/scheduler.h"

namespace hmpmd {

struct JobSubmittedRecord {
  JobId job = 0;
  std::string name;
  std::string spec_json;  // the spec as submitted; parsed again on reload
  TimeUs submitted = 0;
  int64_t submitted_unix_us = 0;  // wall clock (Unix microseconds); 0: not known
  std::string tenant;             // JobTenant; "": none
  uint32_t tenant_share = 1;
};

// Where a run ran, for history after a restart: the worker's name, and its
// core by kind and lane. `kind` -1: not known (written by an older version).
struct RunPlace {
  std::string worker;
  int8_t kind = -1;
  uint32_t lane = 0;
  bool known() const { return kind >= 0; }
};

// One task run that finished well. `start`, `end` are on the controller's
// monotonic clock (CLOCK_MONOTONIC), which a restart on the same host keeps
// and a reboot does not; `*_unix_us` are the same instants on the wall
// clock (0: not known), which both keep.
struct TaskDoneRecord {
  JobId job = 0;
  uint32_t run = 0;
  uint32_t attempt = 0;
  TimeUs start = 0;
  TimeUs end = 0;
  DeviceId device = 0;
  uint64_t bytes = 0;    // its outputs' size
  uint32_t buffers = 0;  // how many (empty ones count); both 0: none, nothing to rebuild
  int64_t start_unix_us = 0;
  int64_t end_unix_us = 0;
  RunPlace place;  // its worker and core
};

struct JobEndedRecord {
  JobId job = 0;
  JobState state = JobState::kSucceeded;
  std::string error;
  TimeUs finished = 0;
  int64_t finished_unix_ms = 0;  // wall clock, for age-based retention
  TimeUs started = -1;           // its first dispatch; -1: never started
  // Its figures (job_report's MetricsJson, as JSON text; empty: none). Runs
  // reloaded after a restart have no cores to compute them from again.
  std::string metrics;
  int64_t started_unix_us = 0;  // wall clock; 0: not known or never started
  int64_t finished_unix_us = 0;
};

// The job left the retention window: the store drops it and its runs.
struct JobForgottenRecord {
  JobId job = 0;
};

// A worker registered (alive) or left: declared dead, or it did not come
// back after a restart. `key` names the worker process (Controller's
// WorkerKey). The workers alive when a controller died are the ones a
// restarted controller waits for.
struct WorkerRecord {
  std::string key;
  bool alive = true;
};

// A group a driver session appended, or had refused, in the order the
// controller took them: what a restarted controller replays to rebuild the
// session's job. `body` is opaque here (the controller's encoding).
struct SessionGroupRecord {
  JobId job = 0;
  uint32_t index = 0;  // its place among the session's groups, from 0
  uint64_t seq = 0;    // the driver's number for it
  std::string error;   // empty: appended; else why it was refused
  std::string body;
};

// A run of a driver session that failed or was cancelled. A session goes
// on past it (a job ends at its first failure), so a restart must know it
// ended, or it would run again.
struct RunEndedRecord {
  JobId job = 0;
  uint32_t run = 0;
  bool cancelled = false;  // else failed
  std::string error;
};

using StoreRecord =
    std::variant<JobSubmittedRecord, TaskDoneRecord, JobEndedRecord, JobForgottenRecord,
                 WorkerRecord, SessionGroupRecord, RunEndedRecord>;

// A job as Load() gives it back.
struct StoredJob {
  JobId id = 0;
  std::string name;
  std::string spec_json;
  JobState state = JobState::kQueued;  // kQueued: not ended when last written
  std::string error;
  TimeUs submitted = 0;
  TimeUs finished = -1;
  int64_t finished_unix_ms = 0;      // wall clock; 0: not known
  TimeUs started = -1;               // ended jobs; -1: not known
  std::string metrics;               // ended jobs (JobEndedRecord); empty: none
  std::vector<TaskDoneRecord> done;  // by run
  // Wall clock (Unix microseconds) of submitted, started, finished; 0: not
  // known (written by an older version, or not yet).
  int64_t submitted_unix_us = 0;
  int64_t started_unix_us = 0;
  int64_t finished_unix_us = 0;
  std::string tenant;  // JobTenant; "": none (or written by an older version)
  uint32_t tenant_share = 1;
  // A driver session's groups, by index, and its runs that failed or were
  // cancelled, by run.
  std::vector<SessionGroupRecord> groups;
  std::vector<RunEndedRecord> ended;
};

class JobStore {
 public:
  virtual ~JobStore() = default;
  // Applies `batch` in order and all at once: after a crash either every
  // record of the batch is there or none is.
  virtual Status Write(std::span<const StoreRecord> batch) = 0;
  // Every job held, by ascending id, with its finished runs.
  virtual Result<std::vector<StoredJob>> Load() = 0;
  // The keys of the workers alive when the store was last written
  // (WorkerRecord); nullopt when the store does not know (written by an
  // older version).
  virtual Result<std::optional<std::vector<std::string>>> LoadLiveWorkers() {
    return std::optional<std::vector<std::string>>();
  }
  // The largest job id ever written (JobSubmittedRecord), forgotten jobs
  // included, so that new ids never reuse one; 0 when none.
  virtual Result<JobId> LoadMaxJobId() { return JobId{0}; }
  // A random number drawn once when the store was created and kept in it
  // (RegisterAck::epoch); 0 when the store keeps none (the controller then
  // draws one per process).
  virtual Result<uint64_t> LoadEpoch() { return uint64_t{0}; }
  // The data token (RegisterAck::data_token) drawn once when the store was
  // created (or first opened by a version that keeps one) and kept in it,
  // so that a restarted controller hands out the one its workers hold;
  // nullopt when the store keeps none (the controller then draws one per
  // process).
  virtual Result<std::optional<DataToken>> LoadDataToken() { return std::optional<DataToken>(); }
};

}  // namespace hmpmd
