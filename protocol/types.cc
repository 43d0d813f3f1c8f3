#include "hmpmd/protocol/types.h"

namespace hmpmd {

std::string_view CoreKindName(CoreKind kind) {
  switch (kind) {
    case CoreKind::kCube: return "cube";
    case CoreKind::kVector: return "vector";
  }
  return "unknown";
}

std::optional<CoreKind> ParseCoreKind(std::string_view name) {
  if (name == "cube") return CoreKind::kCube;
  if (name == "vector") return CoreKind::kVector;
  return std::nullopt;
}

double ArgNumber(const Args& args, std::string_view name, double fallback) {
  for (const Arg& a : args) {
    if (a.name != name) continue;
    if (const auto* i = std::get_if<int64_t>(&a.value)) return static_cast<double>(*i);
    if (const auto* d = std::get_if<double>(&a.value)) return *d;
    return fallback;
  }
  return fallback;
}

bool IsCollectiveKernel(std::string_view k) {
  return k == "allreduce" || k == "allgather" || k == "reduce_scatter" || k == "alltoall" ||
         k == "broadcast";
}

bool IsCommKernel(std::string_view k) { return k == "send" || IsCollectiveKernel(k); }

}  // namespace hmpmd
