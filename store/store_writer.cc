#include "hmpmd/store/store_writer.h"

#include <spdlog/spdlog.h>

#include <chrono>

namespace hmpmd {

StoreWriter::StoreWriter(JobStore* store, StoreWriterOptions options)
    : store_(store), options_(options), thread_([this] { Loop(); }) {}

StoreWriter::~StoreWriter() {
  {
    std::lock_guard lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  thread_.join();
}

void StoreWriter::Append(std::vector<StoreRecord>* records) {
  if (records->empty()) return;
  bool wake;
  {
    std::lock_guard lock(mu_);
    if (pending_.empty()) {
      pending_.swap(*records);
    } else {
      for (auto& r : *records) pending_.push_back(std::move(r));
      records->clear();
    }
    ++appended_;
    wake = pending_.size() >= options_.max_batch;
  }
  if (wake) cv_.notify_one();
}

Status StoreWriter::Flush() {
  std::unique_lock lock(mu_);
  uint64_t target = appended_;
  flush_now_ = true;
  cv_.notify_one();
  flushed_.wait(lock, [&] { return written_ >= target; });
  return last_;
}

void StoreWriter::AfterWritten(std::function<void(const Status&)> fn) {
  bool queued = false;
  {
    std::lock_guard lock(mu_);
    if (durable_ < appended_) {
      after_written_.emplace_back(appended_, std::move(fn));
      flush_now_ = true;  // someone waits: write now, not at the next period
      queued = true;
    }
  }
  if (queued) {
    cv_.notify_one();
  } else {
    fn(Status::Ok());  // nothing waits to be written
  }
}

void StoreWriteLatency::Add(double seconds) {
  size_t b = 0;
  while (b < kBuckets.size() && seconds > kBuckets[b]) ++b;
  ++counts[b];
  sum_s += seconds;
  ++count;
}

StoreWriteLatency StoreWriter::write_latency() const {
  std::lock_guard lock(mu_);
  return latency_;
}

uint64_t StoreWriter::batches_written() const {
  std::lock_guard lock(mu_);
  return batches_;
}

Status StoreWriter::last_write() const {
  std::lock_guard lock(mu_);
  return last_;
}

uint64_t StoreWriter::write_errors() const {
  std::lock_guard lock(mu_);
  return errors_;
}

void StoreWriter::Loop() {
  std::vector<StoreRecord> batch;  // records not yet written, oldest first
  std::unique_lock lock(mu_);
  for (;;) {
    cv_.wait_for(lock, std::chrono::milliseconds(options_.flush_ms),
                 [&] { return stop_ || flush_now_ || pending_.size() >= options_.max_batch; });
    flush_now_ = false;
    bool stopping = stop_;
    uint64_t target = appended_;
    if (batch.empty()) {
      batch.swap(pending_);
    } else {
      for (auto& r : pending_) batch.push_back(std::move(r));
      pending_.clear();
    }
    if (!batch.empty()) {
      lock.unlock();
      auto t0 = std::chrono::steady_clock::now();
      Status st = store_->Write(batch);
      double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      lock.lock();
      latency_.Add(seconds);
      if (st.ok()) {
        ++batches_;
        batch.clear();
      } else {
        // Keep the batch and try again with the next one.
        if (errors_++ % 100 == 0) spdlog::error("{}", st.ToString());
      }
      last_ = st;
    }
    if (batch.empty()) durable_ = target;  // written (or nothing to write)
    if (!after_written_.empty()) {
      // Written: those waiting up to durable_. Failed: every one whose
      // records were in this try, told once.
      const uint64_t told = batch.empty() ? durable_ : target;
      const Status st = last_;
      std::vector<std::function<void(const Status&)>> due;
      std::erase_if(after_written_, [&](auto& w) {
        if (w.first > told) return false;
        due.push_back(std::move(w.second));
        return true;
      });
      lock.unlock();
      for (auto& fn : due) fn(batch.empty() ? Status::Ok() : st);
      lock.lock();
    }
    written_ = target;
    flushed_.notify_all();
    if (stopping) return;
  }
}

}  // namespace hmpmd
