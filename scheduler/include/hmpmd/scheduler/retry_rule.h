// RetryRule: whether a task whose kernel failed runs again (TaskSpec's
// max_retries and retry_on), and the checks on those fields. Re-runs after a
// worker died are not retries: the scheduler counts them apart, against
// SchedulerOptions::max_attempts.
// Thread-safety: free functions of their arguments only.
#pragma once

#include <cstdint>
#include <string_view>

#include "hmpmd/protocol/job_spec.h"
#include "hmpmd/protocol/status.h"

namespace hmpmd {

// Bounds of the fields, so that a spec cannot make a task run without end
// or make every failure scan a long list.
inline constexpr uint32_t kMaxTaskRetries = 100;
inline constexpr size_t kMaxRetryOn = 32;
inline constexpr size_t kMaxRetryOnBytes = 256;

// InvalidArgument naming `where` (e.g. "tasks[3] 'enc'") when max_retries
// or retry_on are out of bounds, retry_on has an empty entry, or a member
// of a collective group asks for retries (its gang runs as a whole).
Status CheckRetryRule(const TaskSpec& t, std::string_view where);

// True when a run of `t` whose kernel failed with `error`, after `retries`
// retries already, runs again: retries < max_retries and `error` contains
// one of retry_on (case-sensitive; any error when retry_on is empty).
bool ShouldRetry(const TaskSpec& t, uint32_t retries, std::string_view error);

}  // namespace hmpmd
