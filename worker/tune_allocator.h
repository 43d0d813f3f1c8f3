// TuneAllocatorForTensors: process-wide malloc settings for a process that
// moves large tensors. Buffers up to 32 MiB come from the heap instead of
// fresh mmap()s, and up to 512 MiB of freed heap stays mapped, so ZeroMQ's
// received chunks and the kernels' outputs reuse pages instead of faulting
// in new ones every time (on a 64 MB all-to-all, page faults and munmap
// were about a fifth of the CPU time). The cost: up to 512 MiB of freed
// memory stays in the process. hmpmd-worker calls it first thing; a
// program embedding the worker may.
//
// Thread-safety: call before other threads start.
#pragma once

#include <malloc.h>

namespace hmpmd::worker {

inline void TuneAllocatorForTensors() {
  // 32 MiB is the largest mmap threshold glibc accepts (HEAP_MAX_SIZE / 2).
  mallopt(M_MMAP_THRESHOLD, 32 << 20);
  mallopt(M_TRIM_THRESHOLD, 512 << 20);
}

}  // namespace hmpmd::worker
