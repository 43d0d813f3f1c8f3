// The element-wise float32 kernels `add` and `scale`.
//
// Thread-safety: stateless; safe to run on several lanes at once.
#pragma once

#include <span>
#include <vector>

#include "hmpmd/protocol/buffer.h"
#include "hmpmd/worker/kernel_args.h"

namespace hmpmd::worker {

// inputs[0] + inputs[1] (same element count; the output takes inputs[0]'s
// shape), or without inputs two generated vectors of args.n (default 1024).
std::vector<Buffer> AddKernel(const KernelArgs& args, std::span<const Buffer> inputs);

// inputs[0] * args.factor (default 1.0), or a generated vector of args.n
// (default 1024) elements times factor.
std::vector<Buffer> ScaleKernel(const KernelArgs& args, std::span<const Buffer> inputs);

}  // namespace hmpmd::worker
