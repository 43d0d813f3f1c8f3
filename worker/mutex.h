// Mutex, MutexLock and CondVar: std::mutex and std::condition_variable
// with Clang thread-safety annotations, so -Wthread-safety checks every
// GUARDED_BY field of the worker.
//
// Thread-safety: a Mutex and a CondVar are shared between threads by
// design; a MutexLock belongs to the thread that made it.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <mutex>

#if defined(__clang__)
#define HMPMD_THREAD_ANNOTATION(x) __attribute__((x))
#else
#define HMPMD_THREAD_ANNOTATION(x)
#endif

#define CAPABILITY(x) HMPMD_THREAD_ANNOTATION(capability(x))
#define SCOPED_CAPABILITY HMPMD_THREAD_ANNOTATION(scoped_lockable)
#define GUARDED_BY(x) HMPMD_THREAD_ANNOTATION(guarded_by(x))
#define REQUIRES(...) HMPMD_THREAD_ANNOTATION(requires_capability(__VA_ARGS__))
#define EXCLUDES(...) HMPMD_THREAD_ANNOTATION(locks_excluded(__VA_ARGS__))
#define ACQUIRE(...) HMPMD_THREAD_ANNOTATION(acquire_capability(__VA_ARGS__))
#define RELEASE(...) HMPMD_THREAD_ANNOTATION(release_capability(__VA_ARGS__))

namespace hmpmd::worker {

class CAPABILITY("mutex") Mutex {
 public:
  void Lock() ACQUIRE() { mu_.lock(); }
  void Unlock() RELEASE() { mu_.unlock(); }

 private:
  friend class CondVar;
  std::mutex mu_;
};

class SCOPED_CAPABILITY MutexLock {
 public:
  explicit MutexLock(Mutex* mu) ACQUIRE(mu) : mu_(mu) { mu_->Lock(); }
  ~MutexLock() RELEASE() { mu_->Unlock(); }
  MutexLock(const MutexLock&) = delete;
  MutexLock& operator=(const MutexLock&) = delete;

 private:
  Mutex* mu_;
};

// A condition variable; each Wait names the Mutex it releases.
class CondVar {
 public:
  // Releases `mu` while it waits; spurious wake-ups happen, so call it in a
  // loop that re-checks the condition.
  void Wait(Mutex* mu) REQUIRES(mu) {
    std::unique_lock<std::mutex> lock(mu->mu_, std::adopt_lock);
    cv_.wait(lock);
    lock.release();
  }
  // As Wait(), for at most `timeout_us`; false when it timed out.
  bool WaitForUs(Mutex* mu, int64_t timeout_us) REQUIRES(mu) {
    std::unique_lock<std::mutex> lock(mu->mu_, std::adopt_lock);
    const bool woke =
        cv_.wait_for(lock, std::chrono::microseconds(timeout_us)) == std::cv_status::no_timeout;
    lock.release();
    return woke;
  }
  void Signal() { cv_.notify_one(); }
  void SignalAll() { cv_.notify_all(); }

 private:
  std::condition_variable cv_;
};

}  // namespace hmpmd::worker
