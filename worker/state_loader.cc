#include "state_loader.h"

#include <pthread.h>

#include <iterator>

#include "clock.h"

namespace hmpmd::worker {

StateLoader::StateLoader(LoadFn load, DropFn drop)
    : load_(std::move(load)), drop_(std::move(drop)) {}

StateLoader::~StateLoader() { Stop(); }

void StateLoader::Begin(JobId job, const std::string& submodel, const std::string& from) {
  MutexLock lock(&mu_);
  if (stop_) return;
  auto [it, added] = entries_.try_emplace({job, submodel});
  if (!added) {
    // One queued, running or done well stands. A failed one no task took
    // (its task was cancelled) would fail the next task with its stale
    // answer: it is asked again.
    const Entry& e = it->second;
    if (!e.done || e.outcome.status.ok()) return;
    it->second = Entry{};
  }
  it->second.from = from;
  queue_.push_back(it->first);
  ++begun_;
  if (!thread_.joinable()) {
    thread_ = std::thread([this] { Loop(); });
    pthread_setname_np(thread_.native_handle(), "hmpmd-state");
  }
  work_cv_.Signal();
}

std::optional<StateLoader::Outcome> StateLoader::Take(JobId job, const std::string& submodel,
                                                      const std::atomic<bool>* cancelled) {
  const Key key{job, submodel};
  MutexLock lock(&mu_);
  for (;;) {
    auto it = entries_.find(key);
    if (it == entries_.end()) return std::nullopt;
    if (it->second.done) {
      Outcome out = std::move(it->second.outcome);
      entries_.erase(it);
      return out;
    }
    if (cancelled != nullptr && cancelled->load(std::memory_order_relaxed)) {
      return Outcome{Status::Cancelled("cancelled while its state loaded"), 0, 0, 0};
    }
    // Bounded waits: a cancel is noticed within 10 ms.
    (void)done_cv_.WaitForUs(&mu_, 10'000);
  }
}

void StateLoader::ForgetJob(JobId job) {
  MutexLock lock(&mu_);
  std::erase_if(queue_, [job](const Key& k) { return k.first == job; });
  // A running load stays listed until it ends (the thread erases it then).
  for (auto it = entries_.lower_bound({job, std::string()});
       it != entries_.end() && it->first.first == job;) {
    it->second.forgotten = true;
    it = it->second.running ? std::next(it) : entries_.erase(it);
  }
}

void StateLoader::Stop() {
  {
    MutexLock lock(&mu_);
    stop_ = true;
    for (const Key& k : queue_) {
      Entry& e = entries_[k];
      e.done = true;
      e.outcome.status = Status::Unavailable("the worker is stopping");
    }
    queue_.clear();
    work_cv_.SignalAll();
    done_cv_.SignalAll();
  }
  if (thread_.joinable()) thread_.join();
}

uint64_t StateLoader::begun() const {
  MutexLock lock(&mu_);
  return begun_;
}

uint64_t StateLoader::ended() const {
  MutexLock lock(&mu_);
  return ended_;
}

StateLoader::Outcome StateLoader::LoadNow(JobId job, const std::string& submodel,
                                          const std::string& from) const {
  Outcome out;
  out.start_us = NowUs();
  Result<uint64_t> loaded = load_(job, submodel, from);
  out.end_us = NowUs();
  if (loaded.ok()) {
    out.bytes = *loaded;
  } else {
    out.status = loaded.status();
  }
  return out;
}

void StateLoader::Loop() {
  for (;;) {
    Key key;
    std::string from;
    {
      MutexLock lock(&mu_);
      while (!stop_ && queue_.empty()) work_cv_.Wait(&mu_);
      if (stop_) return;
      key = std::move(queue_.front());
      queue_.pop_front();
      Entry& e = entries_[key];
      e.running = true;
      from = e.from;
    }
    Outcome out = LoadNow(key.first, key.second, from);
    bool forgotten;
    {
      MutexLock lock(&mu_);
      ++ended_;
      auto it = entries_.find(key);
      forgotten = it == entries_.end() || it->second.forgotten;
      if (!forgotten) {
        it->second.running = false;
        it->second.done = true;
        it->second.outcome = std::move(out);
      } else if (it != entries_.end()) {
        entries_.erase(it);
      }
      done_cv_.SignalAll();
    }
    // Outside the lock: the job was freed while this load ran.
    if (forgotten) drop_(key.first);
  }
}

}  // namespace hmpmd::worker
