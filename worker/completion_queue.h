// CompletionQueue: where lanes leave TaskResults for the I/O thread.
//
// A lane's Push wakes the I/O thread only when the queue goes from empty to
// non-empty, so a burst of results costs one wake-up and leaves in one
// DoneBatch. The two vectors swap, so steady state allocates nothing.
//
// Thread-safety: Push() from any thread; TakeAll() from the I/O thread.
#pragma once

#include <cstddef>
#include <vector>

#include "hmpmd/protocol/messages.h"
#include "mutex.h"
#include "wakeup_fd.h"

namespace hmpmd::worker {

class CompletionQueue {
 public:
  // `wake` is signalled on the empty -> non-empty edge; it must outlive this.
  explicit CompletionQueue(WakeupFd* wake) : wake_(wake) {}

  void Push(TaskResult result) EXCLUDES(mu_);
  // A task ended whose result nobody wants (it was cancelled while it ran):
  // counted as ended, never sent.
  void PushUnwanted() EXCLUDES(mu_);

  // Appends every pending result to `out` and returns how many tasks ended,
  // the unwanted ones included.
  size_t TakeAll(std::vector<TaskResult>* out) EXCLUDES(mu_);

 private:
  WakeupFd* const wake_;
  Mutex mu_;
  std::vector<TaskResult> pending_ GUARDED_BY(mu_);
  size_t unwanted_ GUARDED_BY(mu_) = 0;
};

}  // namespace hmpmd::worker
