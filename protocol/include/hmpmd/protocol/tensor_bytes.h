// ResizeTensorBytes: sizes a fresh tensor's byte vector so that a large one
// is backed by transparent huge pages where the kernel allows them on
// request (transparent_hugepage=madvise, the common default).
//
// The tensor pool: large byte vectors that are no longer needed (a freed
// output, a task's consumed inputs, a collective's scratch) are handed
// back with RecycleTensorBytes(), and SizeTensorBytesForOverwrite() gives
// them out again to a caller that writes every byte (a fetched tensor, a
// collective's output). A fresh 64 MB buffer costs its zeroing twice (the
// kernel's page clearing and std::vector's value-initialisation): about
// 16 ms on the 2-core development VM, a sixth to a third of a 64 MB
// collective there; a recycled one costs nothing.
//
// A large buffer comes from a fresh mmap() (glibc serves anything over
// its mmap threshold, at most 32 MiB, that way), and writing it faults in
// one page at a time: 16,384 faults for 64 MB. Asked for huge pages
// first, the same buffer takes 32 (README: bench_collectives --as-task).
//
// Thread-safety: ResizeTensorBytes is a free function over the caller's
// vector; the pool functions are thread-safe (one process-wide pool).
#pragma once

#include <sys/mman.h>

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "hmpmd/protocol/buffer.h"

namespace hmpmd {

// Resizes `v` to `n` bytes (new bytes zero); when `v` is empty and `n` is
// at least kTensorHugeBytes, it first reserves `n` and advises huge pages.
inline constexpr size_t kTensorHugeBytes = size_t{4} << 20;

inline void ResizeTensorBytes(std::vector<std::byte>* v, size_t n) {
  if (v->empty() && n >= kTensorHugeBytes && v->capacity() < n) {
    v->reserve(n);
    constexpr uintptr_t kHuge = uintptr_t{2} << 20;
    const auto begin = reinterpret_cast<uintptr_t>(v->data());
    const uintptr_t first = (begin + kHuge - 1) & ~(kHuge - 1);
    const uintptr_t last = (begin + n) & ~(kHuge - 1);
    // Advice only: where it is refused, the buffer is just slower to fill.
    if (last > first) (void)madvise(reinterpret_cast<void*>(first), last - first, MADV_HUGEPAGE);
  }
  v->resize(n);
}

// Sizes `v` to `n` bytes that the caller overwrites entirely before reading
// any: when `v` is empty and `n` is at least kTensorHugeBytes, a recycled
// buffer of capacity n..2n is taken from the pool if there is one (its
// bytes are what its last user left); otherwise as ResizeTensorBytes.
void SizeTensorBytesForOverwrite(std::vector<std::byte>* v, size_t n);

// Hands `*v` to the pool when its capacity is at least kTensorHugeBytes
// (the oldest pooled buffers make room; one larger than the limit is
// freed); `*v` is left empty either way.
void RecycleTensorBytes(std::vector<std::byte>* v);
// RecycleTensorBytes on the bytes of every buffer of `buffers`.
void RecycleTensorBytes(std::span<Buffer> buffers);

// Most bytes the pool keeps (default kTensorPoolDefaultBytes); 0 turns it
// off and frees what it holds.
inline constexpr uint64_t kTensorPoolDefaultBytes = uint64_t{256} << 20;
void SetTensorPoolLimit(uint64_t bytes);

struct TensorPoolStats {
  uint64_t held_bytes = 0;  // capacity of the buffers pooled now
  uint64_t reused = 0;      // SizeTensorBytesForOverwrite calls served from the pool
  uint64_t fresh = 0;       // large ones that found none and allocated
};
TensorPoolStats GetTensorPoolStats();

}  // namespace hmpmd
