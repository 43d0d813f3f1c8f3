// The bytes a task's outputs will take in its worker's object store, told
// from its built-in kernel's arguments and the sizes its inputs have now,
// for placement under a store cap (the engine and the simulator).
// Thread-safety: a pure function.
#pragma once

#include <cstdint>
#include <span>

#include "hmpmd/protocol/job_spec.h"

namespace hmpmd {

struct OutputGuess {
  bool known = false;  // false: only the run tells (a worker's own kernel...)
  uint64_t bytes = 0;
};

// `inputs`: the bytes each input run holds, in the order the kernel reads
// them (repeats included); UINT64_MAX for one whose size is not known yet.
// `group_size`: members of its collective gang (0: none).
OutputGuess GuessOutputBytes(const TaskSpec& spec, std::span<const uint64_t> inputs,
                             uint32_t group_size);

}  // namespace hmpmd
