// Parses a job spec (docs/job-spec.md) from JSON text into a JobSpec.
//
// Strict: unknown fields, wrong types and out-of-range values are errors,
// reported in one line that names the place ("tasks[3] 'x': core: ..."). The
// size of what it accepts is bounded by SpecLimits, checked before parsing
// where possible so a hostile spec cannot exhaust memory.
// Thread-safety: a free function; safe from any thread.
#pragma once

#include <cstddef>
#include <string_view>

#include "hmpmd/protocol/job_spec.h"
#include "hmpmd/protocol/status.h"

namespace hmpmd {

struct SpecLimits {
  // Bytes of JSON text. Default: 128 MiB.
  size_t max_bytes = 128u << 20;
  // Tasks in one step. Default: 1,000,000.
  size_t max_tasks = 1'000'000;
  // Nesting depth of the JSON text. Default: 32 (a valid spec needs 5).
  size_t max_depth = 32;
  // Length of any one string (ids, names, argument values). Default: 4096.
  size_t max_string = 4096;
  // Inputs of one task and arguments of one task. Default: 4096 and 64.
  size_t max_inputs = 4096;
  size_t max_args = 64;
  // Steps (repeat). Default: 100,000.
  uint32_t max_repeat = 100'000;
  // Task runs of the job (tasks x repeat): each keeps a record in the
  // controller or simulator. Default: 100,000,000 (the most a flag takes).
  uint64_t max_runs = 100'000'000;
};

// What `hmpmd controller` and `hmpmd run` take by default: a controller
// keeps about 80 bytes per task run from submission on, so a 34 KB spec
// of 1e8 runs wanted 7.7 GB and aborted a controller short of it.
inline constexpr uint64_t kDefaultMaxRuns = 20'000'000;
// Task runs the controller holds across all its jobs, ended ones included
// (ControllerOptions::max_held_runs): many jobs each under --max-runs
// added up without a bound until the controller ran out of memory.
inline constexpr uint64_t kDefaultMaxHeldRuns = 2 * kDefaultMaxRuns;

Result<JobSpec> ParseJobSpec(std::string_view json_text, const SpecLimits& limits = {});

}  // namespace hmpmd
