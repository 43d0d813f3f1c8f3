// Buffer: a tensor as kernels see it. The type lives in the protocol
// (hmpmd::Buffer, hmpmd/protocol/buffer.h) so that drivers share it; this
// alias keeps the embedded worker API unchanged.
#pragma once

#include "hmpmd/protocol/buffer.h"

namespace hmpmd::worker {

/// See hmpmd::Buffer.
using Buffer = hmpmd::Buffer;

}  // namespace hmpmd::worker
