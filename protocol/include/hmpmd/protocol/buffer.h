// Buffer: a dense tensor as kernels, workers and drivers see it.
//
// Thread-safety: a plain value; distinct objects may be used from distinct
// threads, one object needs external synchronisation.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace hmpmd {

/// A dense tensor: raw bytes, a shape and an element type.
///
/// `data` holds the elements in row-major order. For dtype "f32" it holds
/// 4 bytes per element; read and write it through std::memcpy, not through
/// a reinterpret_cast'ed float pointer.
///
/// Kernels return their outputs as Buffers. The worker keeps them in its
/// object store until every consumer task has read them (fetched straight
/// from this worker by the consumer's worker); a consumer kernel gets its
/// producers' outputs, in input order, as its `inputs`.
struct Buffer {
  std::vector<std::byte> data;
  std::vector<int64_t> shape;
  std::string dtype = "f32";
};

}  // namespace hmpmd
