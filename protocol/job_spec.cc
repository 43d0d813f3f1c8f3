#include "hmpmd/protocol/job_spec.h"

#include <algorithm>
#include <array>
#include <cstdio>
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

std::string FirstControlChar(std::string_view text) {
  for (size_t i = 0; i < text.size(); ++i) {
    const auto c = static_cast<unsigned char>(text[i]);
    int code = c < 0x20 || c == 0x7f ? c : -1;
    if (c == 0xc2 && i + 1 < text.size()) {
      const auto d = static_cast<unsigned char>(text[i + 1]);
      if (d >= 0x80 && d <= 0x9f) code = d;
    }
    if (code >= 0) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "U+%04X", code);
      return buf;
    }
  }
  return "";
}

bool IsUtf8(std::string_view text) {
  size_t i = 0;
  while (i < text.size()) {
    const auto c = static_cast<unsigned char>(text[i]);
    size_t len = 0;
    uint32_t cp = 0;
    if (c < 0x80) {
      ++i;
      continue;
    } else if (c >= 0xc2 && c <= 0xdf) {
      len = 2, cp = c & 0x1f;
    } else if (c >= 0xe0 && c <= 0xef) {
      len = 3, cp = c & 0x0f;
    } else if (c >= 0xf0 && c <= 0xf4) {
      len = 4, cp = c & 0x07;
    } else {
      return false;
    }
    if (i + len > text.size()) return false;
    for (size_t k = 1; k < len; ++k) {
      const auto d = static_cast<unsigned char>(text[i + k]);
      if ((d & 0xc0) != 0x80) return false;
      cp = (cp << 6) | (d & 0x3f);
    }
    if ((len == 3 && (cp < 0x800 || (cp >= 0xd800 && cp <= 0xdfff))) ||
        (len == 4 && (cp < 0x10000 || cp > 0x10ffff))) {
      return false;
    }
    i += len;
  }
  return true;
}

// A send with "cost": {"bytes": 0} moves nothing.
std::optional<double> GivenCommBytes(const TaskSpec& t) {
  const bool cost = t.cost.bytes_given || t.cost.bytes > 0;
  const bool group = t.collective && (t.collective->bytes_given || t.collective->bytes > 0);
  if (!cost && !group) return std::nullopt;
  return std::max(cost ? t.cost.bytes : 0.0, group ? t.collective->bytes : 0.0);
}

double CommBytes(const TaskSpec& t) {
  if (!t.collective && !IsCommKernel(t.kernel)) return 0;
  if (const std::optional<double> given = GivenCommBytes(t)) return *given;
  // As the worker sizes a member without input data (collective_kernels.cc,
  // builtin_kernels.cc): `n` floats (collectives), else `bytes`, else 4 KiB.
  const bool collective = t.collective || IsCollectiveKernel(t.kernel);
  if (collective && ArgNumber(t.args, "n", -1) >= 0) return 4 * ArgNumber(t.args, "n", 0);
  if (ArgNumber(t.args, "bytes", -1) >= 0) return ArgNumber(t.args, "bytes", 0);
  return 4096;
}

bool CommSizedByInputsOnly(const TaskSpec& t) {
  if (!t.collective && !IsCommKernel(t.kernel)) return false;
  return !GivenCommBytes(t) && !t.inputs.empty() && ArgNumber(t.args, "n", -1) < 0 &&
         ArgNumber(t.args, "bytes", -1) < 0;
}

}  // namespace hmpmd
