// The kernels every worker ships with.
//
// Thread-safety: the returned kernels are stateless; each may run on
// several lanes at once.
#pragma once

#include <string>
#include <vector>

#include "hmpmd/worker/export.h"
#include "hmpmd/worker/kernel_args.h"

namespace hmpmd::worker {

struct NamedKernel {
  std::string name;
  Kernel kernel;
};

/// The built-in kernels, which a Worker registers from the start:
///   - `noop`: returns nothing at once.
///   - `spin`: busy-waits `us` microseconds (steady clock).
///   - `sleep`: sleeps `us` microseconds.
///   - `gemm`: C = A * B in float32, A m x k, B k x n (args `m`, `n`, `k`,
///     required). A and B are inputs[0] and inputs[1] when given, else
///     deterministic values. Returns C, shape {m, n}.
///   - `add`: inputs[0] + inputs[1] element-wise, or, without inputs, two
///     generated vectors of `n` (default 1024) elements.
///   - `scale`: inputs[0] * `factor` (default 1.0), or a generated vector
///     of `n` elements times `factor`.
///   - `send`: passes its inputs on unchanged (its consumers fetch them from
///     this worker), or makes `bytes` bytes (default 4096); a vector-lane
///     communication kernel.
///   - `allreduce`, `allgather`, `reduce_scatter`, `alltoall`, `broadcast`:
///     collectives; they run only as members of a gang the controller
///     assigns (called directly they throw).
/// Float kernels take and return dtype "f32". Bad arguments or inputs throw
/// std::invalid_argument, which fails the task.
///
/// @code
///   for (const auto& k : hmpmd::worker::BuiltinKernels()) {
///     if (k.name != "gemm") continue;
///     hmpmd::Args raw = {{"m", int64_t{2}}, {"n", int64_t{3}}, {"k", int64_t{4}}};
///     auto out = k.kernel(hmpmd::worker::KernelArgs(raw), {});  // out[0].shape == {2, 3}
///   }
/// @endcode
HMPMD_WORKER_EXPORT std::vector<NamedKernel> BuiltinKernels();

}  // namespace hmpmd::worker
