#include "hmpmd/protocol/job_spec.h"

#include <array>
#include <utility>

namespace hmpmd {
namespace {

constexpr std::array<std::pair<SubmodelKind, std::string_view>, 7> kKindNames = {{
    {SubmodelKind::kGeneric, "generic"},
    {SubmodelKind::kEncoder, "encoder"},
    {SubmodelKind::kPipelineStage, "pipeline_stage"},
    {SubmodelKind::kExpert, "expert"},
    {SubmodelKind::kActor, "actor"},
    {SubmodelKind::kReward, "reward"},
    {SubmodelKind::kLearner, "learner"},
}};

}  // namespace

std::string_view SubmodelKindName(SubmodelKind kind) {
  for (const auto& [k, name] : kKindNames) {
    if (k == kind) return name;
  }
  return "unknown";
}

std::optional<SubmodelKind> ParseSubmodelKind(std::string_view name) {
  for (const auto& [k, n] : kKindNames) {
    if (n == name) return k;
  }
  return std::nullopt;
}

}  // namespace hmpmd
