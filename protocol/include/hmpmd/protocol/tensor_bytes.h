// ResizeTensorBytes: sizes a fresh tensor's byte vector so that a large one
// is backed by transparent huge pages where the kernel allows them on
// request (transparent_hugepage=madvise, the common default).
//
// A large buffer comes from a fresh mmap() (glibc serves anything over
// its mmap threshold, at most 32 MiB, that way), and writing it faults in
// one page at a time: 16,384 faults for 64 MB. Asked for huge pages
// first, the same buffer takes 32 (README: bench_collectives --as-task).
//
// Thread-safety: a free function over the caller's vector.
#pragma once

#include <sys/mman.h>

#include <cstddef>
#include <cstdint>
#include <vector>

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

}  // namespace hmpmd
