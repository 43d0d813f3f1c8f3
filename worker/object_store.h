// ObjectStore: the outputs of the task runs this worker ran, kept until
// their consumers have read them.
//
// Each run's outputs are one entry, keyed by (job, run), with a count of
// reads left: every read (a local consumer or a peer's fetch) takes one,
// and the last read frees the entry. An entry put with 0 reads is a final
// output of its job and stays until FreeJob(). The bytes held are capped;
// a Put past the cap fails (the task fails with the reason). Freed
// buffers go back to the tensor pool (hmpmd/protocol/tensor_bytes.h).
//
// Thread-safety: thread-safe (one mutex); lanes put and read, the data
// server reads, the I/O thread frees.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <utility>
#include <vector>

#include "hmpmd/protocol/buffer.h"
#include "hmpmd/protocol/messages.h"
#include "hmpmd/protocol/status.h"
#include "hmpmd/protocol/types.h"
#include "mutex.h"

namespace hmpmd::worker {

using BufferList = std::vector<Buffer>;

class ObjectStore {
 public:
  // `cap_bytes`: most bytes held at once; 0 means no cap.
  explicit ObjectStore(uint64_t cap_bytes) : cap_bytes_(cap_bytes) {}

  // Keeps `outputs` of (job, run) for `reads` reads (0: until FreeJob).
  // ResourceExhausted when they do not fit under the cap. A second Put of
  // the same run (a retried attempt) replaces the first.
  Status Put(JobId job, uint32_t run, BufferList outputs, uint32_t reads) EXCLUDES(mu_);

  // The outputs of (job, run), counting one read; nullptr when absent. The
  // returned list stays valid after the entry is freed.
  std::shared_ptr<const BufferList> Read(JobId job, uint32_t run) EXCLUDES(mu_);
  // The outputs of (job, run) without counting a read; nullptr when absent.
  std::shared_ptr<const BufferList> Peek(JobId job, uint32_t run) const EXCLUDES(mu_);

  // The entries held, as (job, run, bytes), at most `max` of them (the
  // lowest keys first): what a re-registration reports.
  std::vector<HeldOutput> List(size_t max) const EXCLUDES(mu_);

  // Frees every entry of `job`; returns how many bytes that released.
  uint64_t FreeJob(JobId job) EXCLUDES(mu_);
  // Frees the entry of (job, run) if there is one; returns its bytes.
  uint64_t FreeRun(JobId job, uint32_t run) EXCLUDES(mu_);

  uint64_t used_bytes() const EXCLUDES(mu_);
  size_t entries() const EXCLUDES(mu_);

  static uint64_t BytesOf(const BufferList& outputs);

 private:
  struct Entry {
    std::shared_ptr<const BufferList> outputs;
    uint64_t bytes = 0;
    uint32_t reads_left = 0;  // 0: kept until FreeJob
  };

  const uint64_t cap_bytes_;
  mutable Mutex mu_;
  std::map<std::pair<JobId, uint32_t>, Entry> entries_ GUARDED_BY(mu_);
  uint64_t used_ GUARDED_BY(mu_) = 0;
};

}  // namespace hmpmd::worker
