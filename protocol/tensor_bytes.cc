#include "hmpmd/protocol/tensor_bytes.h"

#include <algorithm>
#include <deque>
#include <mutex>
#include <utility>

namespace hmpmd {
namespace {

// The process's pool: buffers oldest first, the bytes they hold, counters.
// Never destroyed, so a buffer recycled while the process exits (by
// ZeroMQ's I/O thread releasing a sent frame) finds it alive.
class TensorPool {
 public:
  bool Take(size_t n, std::vector<std::byte>* v) {
    std::lock_guard<std::mutex> lock(mu_);
    // Best fit among capacities n..2n, so a small tensor does not pin a
    // much larger buffer.
    auto best = pool_.end();
    for (auto it = pool_.begin(); it != pool_.end(); ++it) {
      const size_t c = it->capacity();
      if (c >= n && c / 2 <= n && (best == pool_.end() || c < best->capacity())) best = it;
    }
    if (best == pool_.end()) {
      ++fresh_;
      return false;
    }
    held_ -= best->capacity();
    *v = std::move(*best);
    pool_.erase(best);
    ++reused_;
    return true;
  }

  void Give(std::vector<std::byte>* v) {
    std::vector<std::byte> drop;  // freed outside the lock
    std::deque<std::vector<std::byte>> evicted;
    {
      std::lock_guard<std::mutex> lock(mu_);
      const uint64_t c = v->capacity();
      if (c > limit_) {
        drop = std::move(*v);
      } else {
        while (held_ + c > limit_ && !pool_.empty()) {
          held_ -= pool_.front().capacity();
          evicted.push_back(std::move(pool_.front()));
          pool_.pop_front();
        }
        held_ += c;
        pool_.push_back(std::move(*v));
      }
    }
    v->clear();
    v->shrink_to_fit();
  }

  void SetLimit(uint64_t bytes) {
    std::deque<std::vector<std::byte>> evicted;
    std::lock_guard<std::mutex> lock(mu_);
    limit_ = bytes;
    while (held_ > limit_) {
      held_ -= pool_.front().capacity();
      evicted.push_back(std::move(pool_.front()));
      pool_.pop_front();
    }
  }

  TensorPoolStats Stats() {
    std::lock_guard<std::mutex> lock(mu_);
    return TensorPoolStats{held_, reused_, fresh_};
  }

 private:
  std::mutex mu_;
  std::deque<std::vector<std::byte>> pool_;  // oldest first
  uint64_t held_ = 0;
  uint64_t limit_ = kTensorPoolDefaultBytes;
  uint64_t reused_ = 0;
  uint64_t fresh_ = 0;
};

TensorPool& Pool() {
  static TensorPool* pool = new TensorPool;  // never destroyed, see above
  return *pool;
}

}  // namespace

void SizeTensorBytesForOverwrite(std::vector<std::byte>* v, size_t n) {
  if (v->empty() && n >= kTensorHugeBytes) {
    std::vector<std::byte> pooled;
    if (Pool().Take(n, &pooled)) {
      // Only bytes past the pooled size are value-initialised; a buffer
      // used at this size before costs nothing.
      pooled.resize(n);
      *v = std::move(pooled);
      return;
    }
  }
  ResizeTensorBytes(v, n);
}

void RecycleTensorBytes(std::vector<std::byte>* v) {
  if (v->capacity() < kTensorHugeBytes) return;
  Pool().Give(v);
}

void RecycleTensorBytes(std::span<Buffer> buffers) {
  for (Buffer& b : buffers) RecycleTensorBytes(&b.data);
}

void SetTensorPoolLimit(uint64_t bytes) { Pool().SetLimit(bytes); }

TensorPoolStats GetTensorPoolStats() { return Pool().Stats(); }

}  // namespace hmpmd
