#include "completion_queue.h"

#include <iterator>
#include <utility>

namespace hmpmd::worker {

void CompletionQueue::Push(TaskResult result) {
  bool was_empty;
  {
    MutexLock lock(&mu_);
    was_empty = pending_.empty() && unwanted_ == 0;
    pending_.push_back(std::move(result));
  }
  // The I/O thread drains the eventfd before it takes the results, so a
  // result pushed after its TakeAll always finds the queue empty and wakes
  // it again; no wake-up is lost.
  if (was_empty) wake_->Signal();
}

void CompletionQueue::PushUnwanted() {
  bool was_empty;
  {
    MutexLock lock(&mu_);
    was_empty = pending_.empty() && unwanted_ == 0;
    ++unwanted_;
  }
  if (was_empty) wake_->Signal();
}

size_t CompletionQueue::TakeAll(std::vector<TaskResult>* out) {
  MutexLock lock(&mu_);
  const size_t n = pending_.size() + std::exchange(unwanted_, 0);
  if (out->empty()) {
    std::swap(*out, pending_);
  } else {
    out->insert(out->end(), std::make_move_iterator(pending_.begin()),
                std::make_move_iterator(pending_.end()));
    pending_.clear();
  }
  return n;
}

}  // namespace hmpmd::worker
