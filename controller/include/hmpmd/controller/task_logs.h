// TaskLogs: what each task run's attempts said, as the workers reported
// with their results: the kernel's log lines and, for a failed attempt,
// its one-line error. Kept in memory, bounded, for REST and the dashboard.
// Thread-safety: none; the controller's loop owns it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "hmpmd/protocol/types.h"

namespace hmpmd {

class TaskLogs {
 public:
  // Bounds: lines kept per run (over all its attempts, after the worker's
  // own bound per attempt) and bytes kept over all runs. Beyond them the
  // oldest runs' entries go first (Add), or a run's new lines are
  // counted in `dropped` only.
  static constexpr size_t kMaxLinesPerRun = 1000;
  static constexpr size_t kMaxLineBytes = 1024;
  static constexpr size_t kMaxTotalBytes = size_t{64} << 20;

  struct Attempt {
    uint32_t attempt = 0;
    bool ok = true;
    std::string error;  // one line; empty when ok
    std::vector<std::string> lines;
  };
  struct Run {
    std::vector<Attempt> attempts;  // in the order they ended
    size_t lines = 0;
    uint64_t dropped = 0;  // lines not kept (kMaxLinesPerRun)
  };

  // Records an ended attempt of (job, run). Nothing is kept for an
  // attempt that ended ok with no lines.
  void Add(JobId job, uint32_t run, uint32_t attempt, bool ok, std::string error,
           std::vector<std::string> lines);
  // nullptr when nothing was kept for it.
  const Run* Find(JobId job, uint32_t run) const;
  // Drops what was kept for `job` (it was forgotten).
  void Forget(JobId job);
  size_t bytes() const { return bytes_; }

 private:
  static size_t BytesOf(const Run& r);
  // Drops whole runs, oldest job first, until bytes_ fits `room` more.
  void MakeRoom(size_t room);

  std::map<std::pair<JobId, uint32_t>, Run> runs_;
  size_t bytes_ = 0;
};

}  // namespace hmpmd
