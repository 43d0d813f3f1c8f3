// ApiSnapshots: what the read-mostly REST routes answer (/api/v1/pool,
// /api/v1/jobs, /api/v1/jobs/{id}, /metrics), rendered on the controller
// loop at a bounded rate and published as one immutable ApiSnapshot that the
// HTTP thread serves without posting to the loop.
//
// Freshness, so that serving from a snapshot reads like asking the loop:
//  - Discrete changes (a job submitted, started, ended or forgotten; a
//    worker joined or left) bump an epoch at once, on the loop. A snapshot of
//    an older epoch is never served: the reader asks the loop for a fresh
//    one (Fresh() returns null). So a client that saw a 201, a job end in the
//    event stream, or a worker join never reads an older state afterwards.
//  - Progress (counters, done/running, metrics) may be up to `period` old:
//    the loop marks the snapshot dirty when progress moves, and a snapshot
//    dirty for longer than `period` is not served either.
//  - The loop renders only while someone reads (a read since it last rendered):
//    an unwatched controller renders nothing but the cheap change checks.
// Ended jobs never change, so their entries are rendered once and reused.
//
// Thread-safety: Tick(), Publish(), MarkChanged() and the other methods
// marked "loop" run on the controller loop; Fresh() and Detach() on any
// thread.
#pragma once

#include <atomic>
#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "hmpmd/controller/controller.h"

namespace hmpmd {

struct ApiSnapshot {
  uint64_t epoch = 0;
  TimeUs taken = 0;
  std::string pool;     // GET /api/v1/pool body
  std::string jobs;     // GET /api/v1/jobs body
  std::string metrics;  // GET /metrics body
  struct Job {
    JobId id = 0;
    std::string tenant;                        // JobTenant's name
    std::shared_ptr<const std::string> brief;  // its entry in `jobs`
    // GET /api/v1/jobs/{id} body; null: the job exists but its summary (an
    // ended job's, with metrics) is not rendered yet.
    std::shared_ptr<const std::string> full;
  };
  std::vector<Job> summaries;  // sorted by id

  // The job's entry: nullptr when the job is unknown.
  const Job* Find(JobId id) const;
  // The GET /api/v1/jobs body with `tenant`'s jobs only.
  std::string JobsOf(std::string_view tenant) const;
  // The /metrics body without the per-job series ({job="N",...}) of jobs
  // that are not `tenant`'s.
  std::string MetricsOf(std::string_view tenant) const;
};

struct ApiSnapshotOptions {
  // Most a served answer lags behind the loop's progress counters. Lower:
  // fresher numbers, more rendering on the loop while clients read.
  // Default: 100 ms.
  std::chrono::milliseconds period{100};
};

// What publishing has cost the loop so far (for benchmarks and tuning).
struct ApiSnapshotStats {
  uint64_t publishes = 0;  // snapshots rendered
  uint64_t render_us = 0;  // loop CPU time spent rendering them
};

class ApiSnapshots {
 public:
  using MetricsFn = std::function<std::string(TimeUs now)>;  // runs on the loop

  // `controller` outlives this object; `metrics` renders /metrics (loop).
  ApiSnapshots(const Controller* controller, ApiSnapshotOptions options, MetricsFn metrics);

  // Any thread: the current snapshot if it may be served, else null (ask
  // the loop: RefreshOnLoop()). Records that someone reads.
  std::shared_ptr<const ApiSnapshot> Fresh();
  // Any thread.
  ApiSnapshotStats stats() const {
    return {publishes_.load(std::memory_order_relaxed), render_us_.load(std::memory_order_relaxed)};
  }
  // Any thread: after it returns, the loop renders nothing more (Tick and
  // Publish do nothing), so what `metrics` uses may go.
  void Detach();

  // --- loop ---
  // Called every loop iteration: notices changes (cheap), and republishes
  // when readers want it and the snapshot is out of date.
  void Tick(TimeUs now);
  // A discrete change the caller made (submit, cancel): the next read waits
  // for a fresh snapshot.
  void MarkChanged() { epoch_.fetch_add(1, std::memory_order_acq_rel); }
  // Renders a fresh snapshot now when the published one may not be served;
  // returns the current one.
  std::shared_ptr<const ApiSnapshot> RefreshOnLoop(TimeUs now);
  // Renders and keeps an ended job's full summary (with metrics); the next
  // snapshot carries it. Returns it.
  std::shared_ptr<const std::string> EndedSummary(const JobRun& job);

 private:
  struct Signature {
    size_t jobs = 0;
    JobId last_job = 0;
    size_t workers = 0, alive = 0;
    bool operator==(const Signature&) const = default;
  };
  Signature Discrete() const;
  bool LiveJobsChanged() const;
  uint64_t Progress() const;
  // Notices discrete changes (bumps the epoch) and progress (marks dirty).
  void Observe(TimeUs now);
  std::shared_ptr<const ApiSnapshot> Current() const;
  void Publish(TimeUs now);

  const Controller* const controller_;
  const ApiSnapshotOptions options_;
  MetricsFn metrics_;

  std::atomic<uint64_t> epoch_{1};
  std::atomic<TimeUs> dirty_since_{0};  // 0: the snapshot is up to date
  std::atomic<bool> demand_{false};     // read since the last publish
  std::atomic<uint64_t> publishes_{0}, render_us_{0};

  std::mutex render_mu_;   // held by Tick and RefreshOnLoop, so Detach() waits for them
  bool detached_ = false;  // guarded by render_mu_
  mutable std::mutex snap_mu_;
  std::shared_ptr<const ApiSnapshot> snapshot_;  // guarded by snap_mu_

  // Loop only.
  Signature seen_;
  std::vector<std::pair<JobId, JobState>> live_;  // non-terminal at the last check
  uint64_t progress_ = 0;
  uint64_t published_epoch_ = 0;
  TimeUs published_at_ = 0;
  std::map<JobId, std::shared_ptr<const std::string>> ended_brief_;  // list entries
  std::map<JobId, std::shared_ptr<const std::string>> ended_full_;   // with metrics
  uint64_t updated_full_ = 0;  // ended_full_ additions not yet published
};

}  // namespace hmpmd
