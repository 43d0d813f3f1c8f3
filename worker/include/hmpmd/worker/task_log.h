// TaskLog: the log lines one task run's kernel writes (KernelArgs::Log, a
// Python kernel's ctx.log), bounded, sent to the controller with the
// run's result.
#pragma once

#include <cstddef>
#include <cstdint>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "hmpmd/worker/export.h"

namespace hmpmd::worker {

/// The lines of one task run, kept in order up to kMaxLines lines and
/// kMaxBytes bytes; a line is cut to kMaxLineBytes and made one line.
/// Lines beyond the bounds are counted, and Take() ends with a marker
/// line saying how many were dropped. Lines added after Take() are
/// ignored (the result has gone). Thread-safe: a kernel may log from
/// threads of its own.
class HMPMD_WORKER_EXPORT TaskLog {
 public:
  static constexpr size_t kMaxLines = 200;
  static constexpr size_t kMaxBytes = 16 * 1024;
  static constexpr size_t kMaxLineBytes = 1024;

  void Add(std::string_view line);
  /// The lines so far (plus the marker when some were dropped); later
  /// lines are ignored.
  std::vector<std::string> Take();

 private:
  std::mutex mu_;
  std::vector<std::string> lines_;  // guarded by mu_
  size_t bytes_ = 0;                // guarded by mu_
  uint64_t dropped_ = 0;            // guarded by mu_
  bool taken_ = false;              // guarded by mu_
};

}  // namespace hmpmd::worker
