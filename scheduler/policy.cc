#include "hmpmd/scheduler/policy.h"

#include "hmpmd/scheduler/fifo_policy.h"
#include "hmpmd/scheduler/hmpmd_policy.h"
#include "hmpmd/scheduler/spmd_policy.h"

namespace hmpmd {

std::vector<std::string> PolicyNames() { return {"hmpmd", "fifo", "spmd-1f1b"}; }

Result<std::unique_ptr<Policy>> MakePolicy(std::string_view name) {
  if (name == "hmpmd") return std::unique_ptr<Policy>(std::make_unique<HmpmdPolicy>());
  if (name == "spmd-1f1b") return std::unique_ptr<Policy>(std::make_unique<SpmdPolicy>());
  if (name == "fifo") return std::unique_ptr<Policy>(std::make_unique<FifoPolicy>());
  std::string known;
  for (const std::string& n : PolicyNames()) known += (known.empty() ? "" : ", ") + n;
  return Status::NotFound("policy: unknown policy '" + std::string(name) + "' (known: " + known +
                          ")");
}

}  // namespace hmpmd
