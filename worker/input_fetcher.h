// InputFetcher: fetches the remote inputs of the tasks pushed to a worker's
// lanes, on the data side of the worker (its own fetch threads), never on
// a lane thread.
//
// When the I/O thread pushes a task, Begin() queues one fetch per remote
// input (an input kept by another worker). Fetch threads take them and
// fetch from the producers at once (up to kMaxThreads in flight), so a
// task's producers are read concurrently, not one after another, and the
// inputs of a task still queued behind a running one arrive while that one
// runs (prefetch). A queued task's fetch starts only while its bytes fit:
// the bytes fetched ahead and not yet taken (held_bytes()) plus the object
// store's used bytes stay within the store's cap (--memory-mb), and
// held_bytes() within `prefetch_bytes` (0: no fetching ahead). Once a lane
// starts the task (PrefetchedInputs::WaitAll), its remaining fetches start
// whatever the budget, as before prefetching existed.
//
// Fetches go over connections kept per producer (PeerConnections), shared
// by the fetch threads.
//
// A fetch here takes no read from the producer's store (DataOp::kFetchPeek):
// the lane takes the reads (CommitReads) once the task has every input and
// runs. A task dropped, cancelled or short of an input before that leaves
// the producer's outputs as they were, for whichever worker runs it next.
// A task dropped before it ran (cancelled, or the worker stopping) drops its
// PrefetchedInputs: queued fetches never start, and fetched buffers (and
// their share of held_bytes()) are freed at once, or as soon as a fetch in
// flight returns.
//
// Thread-safety: thread-safe (one mutex). Begin() is called by the I/O
// thread, a PrefetchedInputs is used by the lane running its task (and
// dropped by whichever thread drops the task).
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>
#include <zmq.hpp>

#include "hmpmd/protocol/messages.h"
#include "mutex.h"
#include "object_store.h"
#include "peer_fetch.h"

namespace hmpmd::worker {

class InputFetcher;

namespace fetch_detail {
struct Batch;
}

// The remote inputs of one task as the fetcher gets them: a move-only
// handle. Dropping it abandons the fetches (see InputFetcher).
class PrefetchedInputs {
 public:
  PrefetchedInputs() = default;
  ~PrefetchedInputs();
  PrefetchedInputs(PrefetchedInputs&& other) noexcept;
  PrefetchedInputs& operator=(PrefetchedInputs&& other) noexcept;
  PrefetchedInputs(const PrefetchedInputs&) = delete;
  PrefetchedInputs& operator=(const PrefetchedInputs&) = delete;

  // False when the task has no remote input.
  explicit operator bool() const { return batch_ != nullptr; }

  // Starts every fetch not yet started, whatever the budget, and waits
  // until all have returned (each is bounded by the fetch timeout). False
  // when `*cancelled` (may be null) became true first. The lane thread.
  bool WaitAll(const std::atomic<bool>* cancelled) const;
  // After WaitAll(): the outputs of input `index` (moved out), or nullopt
  // when that input is not one of the remote ones fetched here.
  std::optional<Result<BufferList>> Take(size_t index) const;
  // Takes one read from the producer of every input taken with a result
  // (once each): the task runs with them. The lane thread.
  void CommitReads() const;
  // Frees whatever was not taken and stops fetches not started, as
  // dropping the handle would (idempotent).
  void Release() const;

 private:
  friend class InputFetcher;
  PrefetchedInputs(InputFetcher* fetcher, std::shared_ptr<fetch_detail::Batch> batch)
      : fetcher_(fetcher), batch_(std::move(batch)) {}
  void Reset();

  InputFetcher* fetcher_ = nullptr;
  std::shared_ptr<fetch_detail::Batch> batch_;
};

struct InputFetcherOptions {
  uint64_t cap_bytes = 0;                  // the object store's cap; 0: none
  uint64_t prefetch_bytes = 256ull << 20;  // most bytes fetched ahead; 0: none
  int64_t timeout_us = 10'000'000;         // one fetch's limit (FetchFromPeer)
};

class InputFetcher {
 public:
  // Most fetches in flight at once; at most half of them fetch ahead for
  // queued tasks, so a starting task always finds threads.
  static constexpr size_t kMaxThreads = 8;

  // `ctx`, `store` and `tokens` must outlive the fetcher; `store` is only
  // read (used_bytes()) to keep fetches ahead under its cap; fetches and
  // take-reads carry tokens->current().
  InputFetcher(zmq::context_t* ctx, const ObjectStore* store, const DataTokens* tokens,
               InputFetcherOptions options);
  ~InputFetcher();
  InputFetcher(const InputFetcher&) = delete;
  InputFetcher& operator=(const InputFetcher&) = delete;

  // Queues the fetches of `inputs` of `job` that live on another worker
  // (an endpoint other than `self`, more than 0 bytes). An empty handle
  // when there is none.
  PrefetchedInputs Begin(JobId job, const std::vector<InputRef>& inputs, const std::string& self)
      EXCLUDES(mu_);

  // Fails whatever has not started, then joins the fetch threads (a fetch
  // in flight ends within its timeout). Idempotent.
  void Stop() EXCLUDES(mu_);

  // Bytes of fetches started or fetched and not yet taken by a lane.
  uint64_t held_bytes() const EXCLUDES(mu_);
  // Tasks whose handle is alive (queued, fetching or waiting for a lane).
  size_t batches() const EXCLUDES(mu_);
  // Fetches started before a lane asked for them (ahead of their task).
  uint64_t fetched_ahead() const EXCLUDES(mu_);
  // Fetches that returned (with data or failed).
  uint64_t fetches_done() const EXCLUDES(mu_);
  // Reads taken from producers by CommitReads (requests handed to a
  // connection).
  uint64_t reads_taken() const EXCLUDES(mu_);
  // The connections the fetch threads use; others may fetch over them too.
  PeerConnections& connections() { return connections_; }

 private:
  friend class PrefetchedInputs;
  struct Job {  // one fetch a thread took
    std::shared_ptr<fetch_detail::Batch> batch;
    size_t part = 0;
  };

  void Loop() EXCLUDES(mu_);
  // The next fetch allowed to start, or nullopt.
  std::optional<Job> NextLocked() REQUIRES(mu_);
  // Marks the first queued fetch of `batch` running and counts its bytes.
  std::optional<Job> StartLocked(const std::shared_ptr<fetch_detail::Batch>& batch, bool ahead)
      REQUIRES(mu_);
  void StartThreadsLocked() REQUIRES(mu_);
  void Demand(const std::shared_ptr<fetch_detail::Batch>& batch) EXCLUDES(mu_);
  bool WaitAll(const std::shared_ptr<fetch_detail::Batch>& batch,
               const std::atomic<bool>* cancelled) EXCLUDES(mu_);
  std::optional<Result<BufferList>> Take(const std::shared_ptr<fetch_detail::Batch>& batch,
                                         size_t index) EXCLUDES(mu_);
  void Abandon(const std::shared_ptr<fetch_detail::Batch>& batch) EXCLUDES(mu_);
  void CommitReads(const std::shared_ptr<fetch_detail::Batch>& batch) EXCLUDES(mu_);

  const ObjectStore* const store_;
  const InputFetcherOptions options_;

  mutable Mutex mu_;
  CondVar work_cv_;  // fetch threads: a fetch may start, or stop
  CondVar done_cv_;  // lanes: a fetch returned
  // Batches with fetches not yet started, in push order.
  std::deque<std::shared_ptr<fetch_detail::Batch>> pending_ GUARDED_BY(mu_);
  uint64_t held_ GUARDED_BY(mu_) = 0;
  size_t batches_ GUARDED_BY(mu_) = 0;
  size_t running_ahead_ GUARDED_BY(mu_) = 0;  // fetches in flight not yet asked for
  size_t idle_ GUARDED_BY(mu_) = 0;           // threads waiting for work
  uint64_t fetched_ahead_ GUARDED_BY(mu_) = 0;
  uint64_t fetches_done_ GUARDED_BY(mu_) = 0;
  uint64_t reads_taken_ GUARDED_BY(mu_) = 0;
  bool stop_ GUARDED_BY(mu_) = false;
  std::vector<std::thread> threads_ GUARDED_BY(mu_);
  PeerConnections connections_;  // thread-safe; outlives the threads (joined in Stop)
};

}  // namespace hmpmd::worker
