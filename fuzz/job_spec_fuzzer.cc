// libFuzzer harness for the job spec parser and the job graph builder:
// any text gives a JobSpec or a one-line error, within the SpecLimits, and
// never a crash, a hang or unbounded memory.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "hmpmd/controller/job_spec_parser.h"
#include "hmpmd/scheduler/job_graph.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view text(reinterpret_cast<const char*>(data), size);
  hmpmd::SpecLimits limits;
  limits.max_tasks = 10'000;  // keep each input cheap; the limit path is what matters
  auto spec = hmpmd::ParseJobSpec(text, limits);
  if (!spec.ok()) return 0;
  auto graph = hmpmd::JobGraph::Build(std::move(spec).value());
  (void)graph;
  return 0;
}
