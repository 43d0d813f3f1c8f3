#include "hmpmd/scheduler/retry_rule.h"

#include <algorithm>
#include <string>

namespace hmpmd {

Status CheckRetryRule(const TaskSpec& t, std::string_view where) {
  const std::string at(where);
  if (t.max_retries > kMaxTaskRetries) {
    return Status::InvalidArgument(at + ": max_retries: " + std::to_string(t.max_retries) +
                                   " is over the limit of " + std::to_string(kMaxTaskRetries));
  }
  if (t.retry_on.size() > kMaxRetryOn) {
    return Status::InvalidArgument(at + ": retry_on: more than " + std::to_string(kMaxRetryOn) +
                                   " entries");
  }
  for (size_t i = 0; i < t.retry_on.size(); ++i) {
    const std::string field = at + ": retry_on[" + std::to_string(i) + "]";
    // An empty entry would match every error: say "any" by leaving it out.
    if (t.retry_on[i].empty()) return Status::InvalidArgument(field + ": empty");
    if (t.retry_on[i].size() > kMaxRetryOnBytes) {
      return Status::InvalidArgument(field + ": longer than the limit of " +
                                     std::to_string(kMaxRetryOnBytes));
    }
  }
  // A gang starts over as a whole when a member fails, counted per gang;
  // one member's own retries would not say what the others do.
  if (t.collective && t.max_retries > 0) {
    return Status::InvalidArgument(at +
                                   ": max_retries: not for a member of a collective group "
                                   "(its gang runs again as a whole after a worker dies)");
  }
  return Status::Ok();
}

bool ShouldRetry(const TaskSpec& t, uint32_t retries, std::string_view error) {
  if (retries >= t.max_retries) return false;
  if (t.retry_on.empty()) return true;
  return std::any_of(t.retry_on.begin(), t.retry_on.end(),
                     [&](const std::string& s) { return error.find(s) != std::string_view::npos; });
}

}  // namespace hmpmd
