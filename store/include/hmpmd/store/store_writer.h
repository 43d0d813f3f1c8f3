// StoreWriter: the thread that writes StoreRecords to a JobStore, so the
// controller loop never blocks on disk.
//
// The loop collects the records of one iteration and hands them over with
// Append(), which only swaps vectors under a mutex. The writer thread wakes
// every `flush_ms` (or at once when `max_batch` records wait) and writes
// everything waiting as one batch, i.e. one transaction. A failed batch is
// logged, counted and retried with the next one, so a full disk delays
// records but does not drop them while memory lasts.
// Thread-safety: Append(), Flush() and the counters are thread-safe; the
// JobStore is used by the writer thread only.
#pragma once

#include <array>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>
#include <utility>
#include <vector>

#include "hmpmd/store/job_store.h"

namespace hmpmd {

struct StoreWriterOptions {
  // Longest a record waits before it is written. Shorter loses less to a
  // power cut; longer makes bigger, cheaper transactions. Default: 20 ms.
  uint32_t flush_ms = 20;
  // Records that trigger a write before flush_ms is up. Default: 8192.
  size_t max_batch = 8192;
};

// How long JobStore::Write() took per batch (failed ones included), as a
// Prometheus-style histogram.
struct StoreWriteLatency {
  // Upper bounds of the buckets, in seconds.
  static constexpr std::array<double, 12> kBuckets = {100e-6, 250e-6, 500e-6, 1e-3,   2.5e-3, 5e-3,
                                                      10e-3,  25e-3,  50e-3,  100e-3, 250e-3, 1.0};
  std::array<uint64_t, kBuckets.size() + 1> counts{};  // per bucket, not cumulative; last: +Inf
  double sum_s = 0;
  uint64_t count = 0;

  void Add(double seconds);
};

class StoreWriter {
 public:
  // `store` must outlive the writer. Starts the thread.
  StoreWriter(JobStore* store, StoreWriterOptions options);
  // Writes what is waiting, then stops the thread.
  ~StoreWriter();
  StoreWriter(const StoreWriter&) = delete;
  StoreWriter& operator=(const StoreWriter&) = delete;

  // Takes the records in `*records` (leaving it empty, capacity kept).
  void Append(std::vector<StoreRecord>* records);
  // Blocks until everything appended before the call is written (or failed).
  // Returns the status of the last write.
  Status Flush();
  // Calls `fn` once on the writer thread: with OK once everything appended
  // before this call is in the store, or with the error of the first write
  // of those records that fails (they stay queued and are retried, but the
  // caller learns now that they are not stored: a full disk must not leave
  // a client waiting for an answer). For acknowledgements that must survive
  // a crash (a submitted job's 201); the writer writes at once instead of at
  // its next period. Callbacks still waiting when the writer stops are
  // dropped.
  void AfterWritten(std::function<void(const Status&)> fn);

  uint64_t batches_written() const;
  uint64_t write_errors() const;
  // The status of the latest write: not OK while records wait for a failed
  // batch to succeed (a full disk). Thread-safe.
  Status last_write() const;
  // A copy of the write latency histogram. Thread-safe.
  StoreWriteLatency write_latency() const;

 private:
  void Loop();

  JobStore* const store_;
  const StoreWriterOptions options_;
  mutable std::mutex mu_;
  std::condition_variable cv_;        // wakes the writer
  std::condition_variable flushed_;   // wakes Flush() callers
  std::vector<StoreRecord> pending_;  // guarded by mu_
  uint64_t appended_ = 0;             // batches handed over; guarded by mu_
  uint64_t written_ = 0;              // of those, written or failed; guarded by mu_
  uint64_t batches_ = 0;              // guarded by mu_
  uint64_t errors_ = 0;               // guarded by mu_
  bool flush_now_ = false;            // guarded by mu_
  uint64_t durable_ = 0;              // batches handed over and written; guarded by mu_
  // AfterWritten() callbacks with the `appended_` they wait for; guarded by mu_.
  std::vector<std::pair<uint64_t, std::function<void(const Status&)>>> after_written_;
  bool stop_ = false;          // guarded by mu_
  Status last_{};              // guarded by mu_
  StoreWriteLatency latency_;  // guarded by mu_
  std::thread thread_;         // last: starts after the fields above
};

}  // namespace hmpmd
