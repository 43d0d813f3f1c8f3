// bench_sim --detail: where a simulated schedule leaves communication
// unmasked and cores idle (a diagnostic for the issue-3 targets).
#pragma once

#include <cstdint>
#include <string>

#include "hmpmd/protocol/job_spec.h"

namespace hmpmd {

// Simulates `spec` on `devices` devices under `policy` and prints: the
// communication per sub-model and kernel, masked and not; the task-id
// patterns (digit runs as '#', the last kept) with the most unmasked time;
// what each unmasked interval's device ran next; the busy cube cores per
// sub-model over 20 slices of the makespan. Returns 0, or 1 on failure.
int PrintDetail(const JobSpec& spec, uint32_t devices, const std::string& policy);

}  // namespace hmpmd
