// The collective kernels (allreduce, allgather, reduce_scatter, alltoall,
// broadcast) as a lane runs them: on the task's gang, through a
// Communicator. Data is float32: the task's inputs concatenated, or, with
// no inputs, `n` generated elements (value (i % 251) * 0.5 + rank), or
// `bytes` / 4 of them.
//   allreduce       sum, same shape
//   reduce_scatter  segment `rank` of the sum
//   allgather       every rank's data, in rank order
//   alltoall        arg `sizes` "a,b,..." elements per destination (default
//                   an even split); gets the blocks sent here, rank order
//   broadcast       arg `root` (default 0); the root's data
//
// Thread-safety: stateless functions.
#pragma once

#include <cstddef>
#include <span>
#include <stdexcept>
#include <string_view>
#include <utility>
#include <vector>

#include "communicator.h"
#include "hmpmd/worker/kernel_args.h"
#include "object_store.h"

namespace hmpmd::worker {

// A collective that failed on the wire rather than on its arguments.
class CollectiveError : public std::runtime_error {
 public:
  explicit CollectiveError(Status status)
      : std::runtime_error(status.ToString()), status_(std::move(status)) {}
  const Status& status() const { return status_; }
  // Worth running the gang again: a peer did not answer in time or could
  // not be reached (Unavailable), which says nothing about the task itself.
  bool retryable() const { return status_.code() == StatusCode::kUnavailable; }

 private:
  Status status_;
};

// Runs collective `kernel`; throws std::invalid_argument for bad
// arguments and CollectiveError when the communication fails. A single
// input buffer is used where it lies (sent from, reduced from); the one
// output buffer is the only whole-size allocation.
BufferList RunCollective(std::string_view kernel, const KernelArgs& args,
                         std::span<const Buffer> inputs, Communicator& comm);

// The float32 data of a collective member (inputs joined, or generated) as
// a vector: the serial reference of tests.
std::vector<float> CollectiveInput(const KernelArgs& args, std::span<const Buffer> inputs,
                                   uint32_t rank);

// The same data as bytes (whole floats only): the single non-empty input
// buffer itself, or else joined or generated into `*scratch`.
std::span<const std::byte> CollectiveBytes(const KernelArgs& args, std::span<const Buffer> inputs,
                                           uint32_t rank, std::vector<std::byte>* scratch);

}  // namespace hmpmd::worker
