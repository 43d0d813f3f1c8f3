// WakeupFd: an eventfd that other threads (and signal handlers) write to
// wake the I/O thread out of zmq_poll.
//
// Thread-safety: Signal() is safe from any thread and is
// async-signal-safe; Drain() belongs to the thread that polls fd().
#pragma once

#include "hmpmd/protocol/status.h"

namespace hmpmd::worker {

class WakeupFd {
 public:
  // Opens the eventfd; status() says whether that worked.
  WakeupFd();
  ~WakeupFd();
  WakeupFd(const WakeupFd&) = delete;
  WakeupFd& operator=(const WakeupFd&) = delete;

  const Status& status() const { return status_; }
  int fd() const { return fd_; }

  // Makes fd() readable until the next Drain().
  void Signal();
  // Resets fd() to not readable.
  void Drain();

 private:
  int fd_ = -1;
  Status status_;
};

}  // namespace hmpmd::worker
