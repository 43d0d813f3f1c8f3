#include "input_fetcher.h"

#include <pthread.h>

#include <algorithm>
#include <utility>

#include "peer_fetch.h"

namespace hmpmd::worker {
namespace fetch_detail {

enum class PartState { kQueued, kRunning, kDone };

// One remote input of a task.
struct Part {
  size_t index = 0;  // position among the task's inputs
  InputRef ref;
  PartState state = PartState::kQueued;
  bool ahead = false;  // started before a lane asked for it
  uint64_t held = 0;   // its bytes counted in InputFetcher::held_
  std::optional<Result<BufferList>> result;
  bool fetched = false;  // the producer answered with the outputs (no read counted)
  bool taken = false;    // a lane took them (Take)
  bool read = false;     // their read was taken from the producer (CommitReads)
};

// Every field is guarded by the fetcher's mutex.
struct Batch {
  JobId job = 0;
  std::vector<Part> parts;  // in input order
  size_t queued = 0;        // parts not started
  size_t unfinished = 0;    // parts not done
  bool demanded = false;    // a lane waits for it: fetch whatever the budget
  bool abandoned = false;   // the task was dropped: keep nothing
};

}  // namespace fetch_detail

using fetch_detail::Batch;
using fetch_detail::Part;
using fetch_detail::PartState;

// ---- PrefetchedInputs -------------------------------------------------

PrefetchedInputs::~PrefetchedInputs() { Reset(); }

PrefetchedInputs::PrefetchedInputs(PrefetchedInputs&& other) noexcept
    : fetcher_(other.fetcher_), batch_(std::move(other.batch_)) {
  other.batch_.reset();
}

PrefetchedInputs& PrefetchedInputs::operator=(PrefetchedInputs&& other) noexcept {
  if (this != &other) {
    Reset();
    fetcher_ = other.fetcher_;
    batch_ = std::move(other.batch_);
    other.batch_.reset();
  }
  return *this;
}

void PrefetchedInputs::Reset() {
  if (batch_ != nullptr) fetcher_->Abandon(batch_);
  batch_.reset();
}

bool PrefetchedInputs::WaitAll(const std::atomic<bool>* cancelled) const {
  return batch_ == nullptr || fetcher_->WaitAll(batch_, cancelled);
}

void PrefetchedInputs::Release() const {
  if (batch_ != nullptr) fetcher_->Abandon(batch_);
}

std::optional<Result<BufferList>> PrefetchedInputs::Take(size_t index) const {
  if (batch_ == nullptr) return std::nullopt;
  return fetcher_->Take(batch_, index);
}

void PrefetchedInputs::CommitReads() const {
  if (batch_ != nullptr) fetcher_->CommitReads(batch_);
}

// ---- InputFetcher -----------------------------------------------------

InputFetcher::InputFetcher(zmq::context_t* ctx, const ObjectStore* store, const DataTokens* tokens,
                           InputFetcherOptions options)
    : store_(store), options_(options), connections_(ctx, tokens) {}

InputFetcher::~InputFetcher() { Stop(); }

PrefetchedInputs InputFetcher::Begin(JobId job, const std::vector<InputRef>& inputs,
                                     const std::string& self) {
  auto batch = std::make_shared<Batch>();
  batch->job = job;
  for (size_t i = 0; i < inputs.size(); ++i) {
    const InputRef& in = inputs[i];
    // Nothing kept: nothing to read; no endpoint or our own: not a peer's.
    if (!in.kept() || in.endpoint.empty() || in.endpoint == self) continue;
    Part part;
    part.index = i;
    part.ref = in;
    batch->parts.push_back(std::move(part));
  }
  if (batch->parts.empty()) return {};
  {
    MutexLock lock(&mu_);
    ++batches_;
    if (stop_) {
      for (Part& p : batch->parts) {
        p.state = PartState::kDone;
        p.result = Status::Unavailable("fetch of job " + std::to_string(job) + " run " +
                                       std::to_string(p.ref.run) + ": the worker is stopping");
      }
    } else {
      batch->queued = batch->unfinished = batch->parts.size();
      pending_.push_back(batch);
      StartThreadsLocked();
    }
  }
  work_cv_.SignalAll();
  return PrefetchedInputs(this, std::move(batch));
}

void InputFetcher::StartThreadsLocked() {
  size_t queued = 0;
  for (const auto& b : pending_) queued += b->queued;
  // A thread per fetch that could start now, up to kMaxThreads.
  while (!stop_ && threads_.size() < kMaxThreads && idle_ < queued) {
    ++idle_;  // counts itself idle until it takes a fetch
    threads_.emplace_back([this] { Loop(); });
    pthread_setname_np(threads_.back().native_handle(), "hmpmd-fetch");
  }
}

std::optional<InputFetcher::Job> InputFetcher::StartLocked(const std::shared_ptr<Batch>& b,
                                                           bool ahead) {
  for (size_t i = 0; i < b->parts.size(); ++i) {
    Part& p = b->parts[i];
    if (p.state != PartState::kQueued) continue;
    p.state = PartState::kRunning;
    p.ahead = ahead;
    p.held = p.ref.bytes;
    held_ += p.held;
    --b->queued;
    if (ahead) {
      ++running_ahead_;
      ++fetched_ahead_;
    }
    return Job{b, i};
  }
  return std::nullopt;
}

std::optional<InputFetcher::Job> InputFetcher::NextLocked() {
  std::erase_if(pending_, [](const auto& b) { return b->queued == 0 || b->abandoned; });
  // A task a lane waits for first, whatever the budget.
  for (const auto& b : pending_) {
    if (b->demanded && b->queued > 0) return StartLocked(b, false);
  }
  // Then ahead, in push order; a fetch that does not fit holds back the
  // ones behind it, so a large input is not starved by small ones.
  if (running_ahead_ >= kMaxThreads / 2) return std::nullopt;
  for (const auto& b : pending_) {
    if (b->demanded || b->queued == 0) continue;
    const Part* next = nullptr;
    for (const Part& p : b->parts) {
      if (p.state == PartState::kQueued) {
        next = &p;
        break;
      }
    }
    const uint64_t bytes = next->ref.bytes;
    if (held_ + bytes > options_.prefetch_bytes) return std::nullopt;
    if (options_.cap_bytes != 0 && store_->used_bytes() + held_ + bytes > options_.cap_bytes) {
      return std::nullopt;
    }
    return StartLocked(b, true);
  }
  return std::nullopt;
}

void InputFetcher::Loop() {
  for (;;) {
    std::optional<Job> job;
    InputRef ref;
    JobId job_id = 0;
    {
      MutexLock lock(&mu_);
      // This thread was counted idle when it was made.
      for (;;) {
        if (stop_) {
          --idle_;
          return;
        }
        job = NextLocked();
        if (job) break;
        // With fetches held back by the budget, look again now and then:
        // the store frees outputs without telling the fetcher.
        if (pending_.empty()) {
          work_cv_.Wait(&mu_);
        } else {
          work_cv_.WaitForUs(&mu_, 10'000);
        }
      }
      --idle_;
      ref = job->batch->parts[job->part].ref;
      job_id = job->batch->job;
    }
    // No read counted yet: CommitReads takes it once the task runs.
    Result<BufferList> got =
        connections_.Fetch(ref.endpoint, job_id, ref.run, options_.timeout_us, /*peek=*/true);
    {
      MutexLock lock(&mu_);
      Batch& b = *job->batch;
      Part& p = b.parts[job->part];
      if (p.ahead) --running_ahead_;
      p.state = PartState::kDone;
      --b.unfinished;
      if (!got.ok() || b.abandoned) {
        held_ -= p.held;
        p.held = 0;
      }
      p.fetched = got.ok();
      if (!b.abandoned) p.result = std::move(got);
      ++fetches_done_;
      ++idle_;
    }
    done_cv_.SignalAll();
    work_cv_.SignalAll();
  }
}

void InputFetcher::Demand(const std::shared_ptr<Batch>& batch) {
  {
    MutexLock lock(&mu_);
    if (batch->demanded) return;
    batch->demanded = true;
    StartThreadsLocked();
  }
  work_cv_.SignalAll();
}

bool InputFetcher::WaitAll(const std::shared_ptr<Batch>& batch,
                           const std::atomic<bool>* cancelled) {
  Demand(batch);
  MutexLock lock(&mu_);
  while (batch->unfinished > 0) {
    if (cancelled != nullptr && cancelled->load(std::memory_order_relaxed)) return false;
    // Bounded slices: the cancel flag is not signalled on this condvar.
    done_cv_.WaitForUs(&mu_, 20'000);
  }
  return true;
}

std::optional<Result<BufferList>> InputFetcher::Take(const std::shared_ptr<Batch>& batch,
                                                     size_t index) {
  std::optional<Result<BufferList>> out;
  {
    MutexLock lock(&mu_);
    auto it = std::find_if(batch->parts.begin(), batch->parts.end(),
                           [&](const Part& p) { return p.index == index; });
    if (it == batch->parts.end()) return std::nullopt;
    if (it->state != PartState::kDone || !it->result) {
      return Result<BufferList>(
          Status::Internal("input " + std::to_string(index) + " taken before its fetch returned"));
    }
    out = std::move(it->result);
    it->result.reset();
    it->taken = true;
    held_ -= it->held;
    it->held = 0;
  }
  work_cv_.SignalAll();  // the budget it held is free for fetches ahead
  return out;
}

void InputFetcher::Abandon(const std::shared_ptr<Batch>& batch) {
  {
    MutexLock lock(&mu_);
    if (batch->abandoned) return;
    batch->abandoned = true;
    --batches_;
    for (Part& p : batch->parts) {
      if (p.state == PartState::kQueued) {
        p.state = PartState::kDone;
        --batch->queued;
        --batch->unfinished;
      } else if (p.state == PartState::kDone) {
        held_ -= p.held;
        p.held = 0;
        p.result.reset();
      }
      // A running fetch releases its bytes when it returns.
    }
  }
  work_cv_.SignalAll();
}

void InputFetcher::CommitReads(const std::shared_ptr<Batch>& batch) {
  std::vector<InputRef> reads;
  JobId job = 0;
  {
    MutexLock lock(&mu_);
    job = batch->job;
    for (Part& p : batch->parts) {
      if (!p.fetched || !p.taken || p.read) continue;
      p.read = true;
      reads.push_back(p.ref);
    }
  }
  // On PeerConnections' read sockets, which never wait; a producer that
  // is gone kept nothing to free.
  uint64_t taken = 0;
  for (const InputRef& ref : reads) {
    if (connections_.TakeRead(ref.endpoint, job, ref.run).ok()) ++taken;
  }
  MutexLock lock(&mu_);
  reads_taken_ += taken;
}

void InputFetcher::Stop() {
  std::vector<std::thread> threads;
  {
    MutexLock lock(&mu_);
    stop_ = true;
    for (const auto& b : pending_) {
      for (Part& p : b->parts) {
        if (p.state != PartState::kQueued) continue;
        p.state = PartState::kDone;
        p.result = Status::Unavailable("fetch of job " + std::to_string(b->job) + " run " +
                                       std::to_string(p.ref.run) + ": the worker is stopping");
        --b->queued;
        --b->unfinished;
      }
    }
    pending_.clear();
    threads.swap(threads_);
  }
  work_cv_.SignalAll();
  done_cv_.SignalAll();
  for (std::thread& t : threads) t.join();
}

uint64_t InputFetcher::held_bytes() const {
  MutexLock lock(&mu_);
  return held_;
}

size_t InputFetcher::batches() const {
  MutexLock lock(&mu_);
  return batches_;
}

uint64_t InputFetcher::fetched_ahead() const {
  MutexLock lock(&mu_);
  return fetched_ahead_;
}

uint64_t InputFetcher::reads_taken() const {
  MutexLock lock(&mu_);
  return reads_taken_;
}

uint64_t InputFetcher::fetches_done() const {
  MutexLock lock(&mu_);
  return fetches_done_;
}

}  // namespace hmpmd::worker
