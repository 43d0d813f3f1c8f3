#include "hmpmd/protocol/types.h"

#include <charconv>
#include <chrono>
#include <random>

namespace hmpmd {

std::string_view CoreKindName(CoreKind kind) {
  switch (kind) {
    case CoreKind::kCube:
      return "cube";
    case CoreKind::kVector:
      return "vector";
  }
  return "unknown";
}

std::optional<CoreKind> ParseCoreKind(std::string_view name) {
  if (name == "cube") return CoreKind::kCube;
  if (name == "vector") return CoreKind::kVector;
  return std::nullopt;
}

Result<CoreCounts> ParseCoreCounts(std::string_view text) {
  if (text.empty()) return Status::InvalidArgument("empty; expected e.g. cube=1,vector=2");
  CoreCounts counts;
  bool seen[kNumCoreKinds] = {};
  size_t pos = 0;
  while (pos <= text.size()) {
    size_t comma = text.find(',', pos);
    if (comma == std::string_view::npos) comma = text.size();
    const std::string_view item = text.substr(pos, comma - pos);
    pos = comma + 1;

    const size_t eq = item.find('=');
    if (eq == std::string_view::npos) {
      return Status::InvalidArgument("'" + std::string(item) + "' is not KIND=COUNT");
    }
    const std::string_view kind_name = item.substr(0, eq);
    const std::string_view count_text = item.substr(eq + 1);
    std::optional<CoreKind> kind = ParseCoreKind(kind_name);
    if (!kind) {
      return Status::InvalidArgument("'" + std::string(kind_name) +
                                     "' is not a core kind (cube, vector)");
    }
    const int k = static_cast<int>(*kind);
    if (seen[k]) return Status::InvalidArgument("'" + std::string(kind_name) + "' given twice");
    seen[k] = true;
    uint32_t count = 0;
    auto [end, ec] =
        std::from_chars(count_text.data(), count_text.data() + count_text.size(), count);
    if (ec != std::errc() || end != count_text.data() + count_text.size() || count_text.empty() ||
        count > kMaxCoresPerKind) {
      return Status::InvalidArgument("count '" + std::string(count_text) + "' of " +
                                     std::string(kind_name) + " is not an integer in [0, " +
                                     std::to_string(kMaxCoresPerKind) + "]");
    }
    counts.count[k] = count;
  }
  uint32_t total = 0;
  for (uint32_t c : counts.count) total += c;
  if (total == 0) return Status::InvalidArgument("a device needs at least one core");
  return counts;
}

Status CheckEndpoint(std::string_view endpoint, bool bind) {
  const std::string quoted = "'" + std::string(endpoint) + "' ";
  if (endpoint.starts_with("ipc://") && endpoint.size() > 6) return Status::Ok();
  const size_t colon = endpoint.rfind(':');
  if (!endpoint.starts_with("tcp://") || colon < 6) {
    return Status::InvalidArgument(quoted + "is not tcp://HOST:PORT or ipc://PATH");
  }
  if (colon == 6) return Status::InvalidArgument(quoted + "has no host; expected tcp://HOST:PORT");
  const std::string_view port = endpoint.substr(colon + 1);
  if (bind && port == "*") return Status::Ok();
  uint32_t number = 0;
  auto [end, ec] = std::from_chars(port.data(), port.data() + port.size(), number);
  if (port.empty() || ec != std::errc() || end != port.data() + port.size() ||
      number < (bind ? 0u : 1u) || number > 65535) {
    return Status::InvalidArgument(quoted + "port '" + std::string(port) + "' is not a number " +
                                   (bind ? "from 0 to 65535 or *" : "from 1 to 65535"));
  }
  return Status::Ok();
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

uint64_t RandomId() {
  std::random_device rd;
  const auto clock = std::chrono::steady_clock::now().time_since_epoch().count();
  const uint64_t id = ((uint64_t{rd()} << 32) | rd()) ^ static_cast<uint64_t>(clock);
  return id != 0 ? id : 1;
}

}  // namespace hmpmd
