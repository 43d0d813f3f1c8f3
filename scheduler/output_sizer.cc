#include "hmpmd/scheduler/output_sizer.h"

#include <algorithm>
#include <iterator>

namespace hmpmd {
namespace {

// A done run whose outputs a worker reported; else their size is unknown.
uint64_t KnownOutputBytes(const TaskRecord& p) {
  return p.state == TaskState::kDone && p.output_device != UINT32_MAX ? p.output_bytes : UINT64_MAX;
}

}  // namespace

std::optional<uint64_t> OutputSizer::InputBytes(const JobRun& job, uint32_t run) {
  const uint32_t index = run % job.graph->size();
  uint64_t total = 0;
  for (uint32_t in : job.graph->kernel_inputs(index)) {
    const uint64_t b = KnownOutputBytes(job.runs[run - index + in]);
    if (b == UINT64_MAX) return std::nullopt;
    total += b;
  }
  return total;
}

OutputGuess OutputSizer::Guess(const JobRun& job, uint32_t run) {
  const JobGraph& g = *job.graph;
  const uint32_t index = run % g.size();
  input_sizes_.clear();
  for (uint32_t in : g.kernel_inputs(index)) {
    input_sizes_.push_back(KnownOutputBytes(job.runs[run - index + in]));
  }
  const uint32_t group = g.task(index).group;
  const OutputGuess builtin = GuessOutputBytes(
      g.spec_task(index), input_sizes_,
      group == kNoGroup ? 0 : static_cast<uint32_t>(g.groups()[group].members.size()));
  if (builtin.known) return builtin;
  const std::optional<uint64_t> in = InputBytes(job, run);
  const std::optional<uint64_t> learned =
      in ? learned_.Guess(job.kernel_ids[index], *in) : std::nullopt;
  return {learned.has_value(), learned.value_or(0)};
}

void OutputSizer::Observe(const JobRun& job, uint32_t run, uint64_t bytes) {
  const uint32_t index = run % job.graph->size();
  const std::string& kernel = job.graph->spec_task(index).kernel;
  // A built-in kernel's size its arguments and inputs tell (rule 1).
  if (std::find(std::begin(kBuiltinKernels), std::end(kBuiltinKernels), kernel) !=
      std::end(kBuiltinKernels)) {
    return;
  }
  if (const std::optional<uint64_t> in = InputBytes(job, run)) {
    learned_.Observe(job.kernel_ids[index], *in, bytes);
  }
}

}  // namespace hmpmd
