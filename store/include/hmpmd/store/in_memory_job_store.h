// InMemoryJobStore: a JobStore kept in a map, for tests (the fake of the
// store seam). It applies batches with the same meaning as SqliteJobStore,
// and can be told to fail writes to test how errors surface.
// Thread-safety: like every JobStore, one thread at a time.
#pragma once

#include <atomic>
#include <map>
#include <set>
#include <string>

#include "hmpmd/store/job_store.h"

namespace hmpmd {

class InMemoryJobStore : public JobStore {
 public:
  Status Write(std::span<const StoreRecord> batch) override;
  Result<std::vector<StoredJob>> Load() override;
  Result<std::optional<std::vector<std::string>>> LoadLiveWorkers() override;
  Result<JobId> LoadMaxJobId() override { return max_job_; }

  // Makes every later Write() fail with Unavailable (true) or work (false).
  void FailWrites(bool fail) { fail_writes_ = fail; }
  size_t batches_written() const { return batches_; }
  size_t records_written() const { return records_; }

 private:
  std::map<JobId, StoredJob> jobs_;
  std::set<std::string> live_workers_;
  JobId max_job_ = 0;
  std::atomic<bool> fail_writes_{false};  // set by a test's thread
  size_t batches_ = 0;
  size_t records_ = 0;
};

}  // namespace hmpmd
