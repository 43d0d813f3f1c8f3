// The processes bench_collectives forks: members of a collective (a data
// socket, inbox and Communicator each, as in hmpmd-worker), members of the
// raw ZeroMQ ring, and the raw point-to-point pair. Each measures its own
// repetitions and reports to the parent over a pipe.
//
// Thread-safety: call from the bench's one thread; the children are
// separate processes.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace hmpmd::worker {

double Median(std::vector<double> v);  // -1 when empty

struct GangTime {
  double wall = -1;  // rank 0's median seconds; <0: a member failed
  double cpu = 0;    // CPU seconds per repetition, all members together
};

// Forks `p` members running `op` ("allreduce", "alltoall", or "ring": the
// raw ring moving `bytes` per rank) on `bytes` and collects their reports.
// `as_task`: members run the collective as a lane runs a task's kernel
// (RunCollective: an input buffer in, a new output buffer out, as the task
// path allocates and copies), not the Communicator call in place.
GangTime RunGang(const std::string& op, uint32_t p, size_t bytes, bool as_task = false);

// Raw ZeroMQ: median seconds to move `bytes` from one process to another
// over DEALER -> ROUTER, acknowledged, as one message or (chunked) in
// messages of Communicator::kChunkBytes, which pipelines the two ends.
// Sends are zero-copy, so this is ZeroMQ and the kernel's loopback alone.
double RawPointToPoint(size_t bytes, bool chunked);

}  // namespace hmpmd::worker
