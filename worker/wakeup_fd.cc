#include "wakeup_fd.h"

#include <sys/eventfd.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstring>
#include <string>

namespace hmpmd::worker {

WakeupFd::WakeupFd() {
  fd_ = ::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  if (fd_ < 0) status_ = Status::Internal(std::string("eventfd: ") + std::strerror(errno));
}

WakeupFd::~WakeupFd() {
  if (fd_ >= 0) ::close(fd_);
}

void WakeupFd::Signal() {
  if (fd_ < 0) return;
  // Only write(2) here, so that a signal handler may call it. EAGAIN means
  // the counter is saturated, which still reads as "readable".
  const uint64_t one = 1;
  ssize_t n = ::write(fd_, &one, sizeof(one));
  (void)n;
}

void WakeupFd::Drain() {
  if (fd_ < 0) return;
  // One read returns and zeroes the whole counter.
  uint64_t value = 0;
  ssize_t n = ::read(fd_, &value, sizeof(value));
  (void)n;
}

}  // namespace hmpmd::worker
