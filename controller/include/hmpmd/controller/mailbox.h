// Mailbox: how other threads hand work to the controller loop.
//
// Post() queues a closure and wakes the loop through an eventfd that the
// loop polls beside its ZeroMQ socket; the loop calls Drain() to run what
// was posted, in order, on its own thread. This is the only door into the
// loop's state from another thread.
// Thread-safety: Post() is thread-safe; Drain() and fd() are the loop's.
#pragma once

#include <deque>
#include <functional>
#include <mutex>

namespace hmpmd {

class Mailbox {
 public:
  Mailbox();
  ~Mailbox();
  Mailbox(const Mailbox&) = delete;
  Mailbox& operator=(const Mailbox&) = delete;

  void Post(std::function<void()> fn);
  // Runs every queued closure; returns how many ran.
  size_t Drain();
  // Readable when something was posted.
  int fd() const { return fd_; }

 private:
  int fd_ = -1;
  std::mutex mu_;
  std::deque<std::function<void()>> queue_;  // guarded by mu_
};

}  // namespace hmpmd
