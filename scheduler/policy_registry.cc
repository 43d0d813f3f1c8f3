// The policy registry: one table of names and factories. PolicyNames() and
// MakePolicy() are derived from it, so a new policy is its own file plus
// one line here. A table rather than self-registering static objects: the
// linker drops an object file of a static library that nothing references.
#include <array>

#include "hmpmd/scheduler/eplb_policy.h"
#include "hmpmd/scheduler/fifo_policy.h"
#include "hmpmd/scheduler/hmpmd_policy.h"
#include "hmpmd/scheduler/policy.h"
#include "hmpmd/scheduler/spmd_policy.h"
#include "hmpmd/scheduler/spmd_search_policy.h"
#include "hmpmd/scheduler/zb_h1_policy.h"

namespace hmpmd {
namespace {

struct PolicyEntry {
  std::string_view name;
  std::unique_ptr<Policy> (*make)();
};

template <typename P>
std::unique_ptr<Policy> Make() {
  return std::make_unique<P>();
}

// The default first.
constexpr std::array kPolicies{
    PolicyEntry{"hmpmd", Make<HmpmdPolicy>},
    PolicyEntry{"fifo", Make<FifoPolicy>},
    PolicyEntry{"spmd-1f1b", Make<SpmdPolicy>},
    PolicyEntry{"spmd-zb-h1", Make<ZbH1Policy>},
    PolicyEntry{"spmd-search", Make<SpmdSearchPolicy>},
    PolicyEntry{"spmd-eplb", Make<EplbPolicy>},
};

}  // namespace

std::vector<std::string> PolicyNames() {
  std::vector<std::string> names;
  for (const PolicyEntry& e : kPolicies) names.emplace_back(e.name);
  return names;
}

Result<std::unique_ptr<Policy>> MakePolicy(std::string_view name) {
  for (const PolicyEntry& e : kPolicies) {
    if (e.name == name) return e.make();
  }
  std::string known;
  for (const PolicyEntry& e : kPolicies) known += (known.empty() ? "" : ", ") + std::string(e.name);
  return Status::NotFound("policy: unknown policy '" + std::string(name) + "' (known: " + known +
                          ")");
}

}  // namespace hmpmd
