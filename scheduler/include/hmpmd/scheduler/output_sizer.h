// OutputSizer: the bytes a task run will store in its worker's object
// store, for placement under a store cap (PoolOptions::count_store).
// 1. A built-in kernel's outputs follow from its spec and the sizes its
//    inputs have now (GuessOutputBytes, output_bytes.h).
// 2. A worker's own kernel's only the runs tell: it learns what runs of
//    each kernel stored by the bytes of their inputs (Observe,
//    LearnedOutputs) and guesses from that.
// An input whose size no worker has reported yet (not done, or done before
// a restart and not reported again) leaves the size unknown.
// Cost: O(inputs) per guess, with no allocation once warm.
// Thread-safety: not thread-safe; owned by the Scheduler's thread.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "hmpmd/scheduler/job_run.h"
#include "hmpmd/scheduler/learned_outputs.h"
#include "hmpmd/scheduler/output_bytes.h"

namespace hmpmd {

class OutputSizer {
 public:
  // What run `run` of `job` will store (rule 1, else rule 2); unknown when
  // neither tells.
  OutputGuess Guess(const JobRun& job, uint32_t run);
  // Run `run` of `job` stored `bytes`; remembered for a worker's own kernel
  // when its inputs' sizes are known (rule 2).
  void Observe(const JobRun& job, uint32_t run, uint64_t bytes);

 private:
  // The bytes of `run`'s inputs (repeats counted), or nullopt while one is
  // not done with a known size.
  static std::optional<uint64_t> InputBytes(const JobRun& job, uint32_t run);

  LearnedOutputs learned_;
  std::vector<uint64_t> input_sizes_;  // Guess scratch
};

}  // namespace hmpmd
