// DataTokens: the data tokens (hmpmd/protocol/data_token.h) this worker's
// data socket accepts, and the one its own requests carry.
//
// The controller hands a token over in every RegisterAck. When it changes
// (a controller restarted without a store, or on another one), the worker
// keeps accepting the previous token too: peers that have not re-registered
// yet still send it, and their fetches and take-reads go on instead of
// failing into rebuilds. Two tokens, no more: an older one is refused.
// Until the first Set() nothing is accepted and requests carry no token.
//
// Thread-safety: thread-safe; the I/O thread sets, the data server, the
// fetcher's threads and the lanes read.
#pragma once

#include "hmpmd/protocol/data_token.h"
#include "mutex.h"

namespace hmpmd::worker {

class DataTokens {
 public:
  DataTokens() = default;
  explicit DataTokens(const DataToken& current) { Set(current); }

  // Makes `token` the current one; the current one, if another, becomes
  // the previous. An empty token is ignored.
  void Set(const DataToken& token) EXCLUDES(mu_) {
    if (token.empty()) return;
    MutexLock lock(&mu_);
    if (token == current_) return;
    previous_ = current_;
    current_ = token;
    set_.SignalAll();
  }
  // Waits up to `timeout_us` for the first Set(); false when there is
  // still no token.
  bool WaitForFirst(int64_t timeout_us) const EXCLUDES(mu_) {
    MutexLock lock(&mu_);
    while (current_.empty()) {
      if (!set_.WaitForUs(&mu_, timeout_us)) break;
    }
    return !current_.empty();
  }
  // The token requests carry (empty before the first Set()).
  DataToken current() const EXCLUDES(mu_) {
    MutexLock lock(&mu_);
    return current_;
  }
  // True when `token` is the current or the previous one (constant-time
  // comparisons; never an empty token).
  bool Accepts(const DataToken& token) const EXCLUDES(mu_) {
    MutexLock lock(&mu_);
    const bool current = SameDataToken(token, current_);
    const bool previous = SameDataToken(token, previous_);  // looked at either way
    return current || previous;
  }
  // True when `token` opens job `job`'s outputs: one Accepts() takes, or
  // that job's own token (JobDataToken) under the current or the previous.
  bool AcceptsFor(const DataToken& token, JobId job) const EXCLUDES(mu_) {
    MutexLock lock(&mu_);
    const bool cluster = SameDataToken(token, current_) | SameDataToken(token, previous_);
    const bool own = SameDataToken(token, JobDataToken(current_, job)) |
                     SameDataToken(token, JobDataToken(previous_, job));
    return cluster || own;
  }

 private:
  mutable Mutex mu_;
  mutable CondVar set_;  // signalled by Set()
  DataToken current_ GUARDED_BY(mu_);
  DataToken previous_ GUARDED_BY(mu_);
};

}  // namespace hmpmd::worker
