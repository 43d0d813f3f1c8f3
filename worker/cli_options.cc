#include "cli_options.h"

#include <cctype>
#include <cerrno>
#include <charconv>
#include <cstring>
#include <fstream>
#include <optional>
#include <sstream>
#include <string>

#include "hmpmd/protocol/types.h"

namespace hmpmd::worker {
namespace {

constexpr uint32_t kMaxCoresPerKind = 256;

}  // namespace

Status ParseCores(std::string_view text, WorkerOptions* options) {
  const std::string flag = "--cores: ";
  if (text.empty()) return Status::InvalidArgument(flag + "empty; expected e.g. cube=1,vector=2");
  // The flag lists the device's cores completely: a kind left out has none,
  // so `--cores cube=2` is a device without vector cores.
  uint32_t counts[kNumCoreKinds] = {};
  bool seen[kNumCoreKinds] = {};
  size_t pos = 0;
  while (pos <= text.size()) {
    size_t comma = text.find(',', pos);
    if (comma == std::string_view::npos) comma = text.size();
    const std::string_view item = text.substr(pos, comma - pos);
    pos = comma + 1;

    const size_t eq = item.find('=');
    if (eq == std::string_view::npos) {
      return Status::InvalidArgument(flag + "'" + std::string(item) + "' is not KIND=COUNT");
    }
    const std::string_view kind_name = item.substr(0, eq);
    const std::string_view count_text = item.substr(eq + 1);
    std::optional<CoreKind> kind = ParseCoreKind(kind_name);
    if (!kind) {
      return Status::InvalidArgument(flag + "'" + std::string(kind_name) +
                                     "' is not a core kind (cube, vector)");
    }
    const int k = static_cast<int>(*kind);
    if (seen[k]) {
      return Status::InvalidArgument(flag + "'" + std::string(kind_name) + "' given twice");
    }
    seen[k] = true;
    uint32_t count = 0;
    auto [end, ec] =
        std::from_chars(count_text.data(), count_text.data() + count_text.size(), count);
    if (ec != std::errc() || end != count_text.data() + count_text.size() || count_text.empty() ||
        count > kMaxCoresPerKind) {
      return Status::InvalidArgument(flag + "count '" + std::string(count_text) + "' of " +
                                     std::string(kind_name) + " is not an integer in [0, " +
                                     std::to_string(kMaxCoresPerKind) + "]");
    }
    counts[k] = count;
  }
  if (counts[0] + counts[1] == 0) {
    return Status::InvalidArgument(flag + "the worker needs at least one core");
  }
  options->cube_cores = counts[static_cast<int>(CoreKind::kCube)];
  options->vector_cores = counts[static_cast<int>(CoreKind::kVector)];
  return Status::Ok();
}

Result<LogLevel> ParseLogLevel(std::string_view text) {
  if (text == "trace") return LogLevel::kTrace;
  if (text == "debug") return LogLevel::kDebug;
  if (text == "info") return LogLevel::kInfo;
  if (text == "warn") return LogLevel::kWarn;
  if (text == "error") return LogLevel::kError;
  return Status::InvalidArgument("--log-level: '" + std::string(text) +
                                 "' is not one of trace, debug, info, warn, error");
}

Status CheckControllerEndpoint(std::string_view endpoint) {
  const bool tcp = endpoint.starts_with("tcp://") && endpoint.size() > 6 &&
                   endpoint.find(':', 6) != std::string_view::npos;
  const bool ipc = endpoint.starts_with("ipc://") && endpoint.size() > 6;
  if (tcp || ipc) return Status::Ok();
  return Status::InvalidArgument("--controller: '" + std::string(endpoint) +
                                 "' is not tcp://HOST:PORT or ipc://PATH");
}

Result<std::string> ReadTokenFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    return Status::InvalidArgument("--token-file: cannot read '" + path +
                                   "': " + std::strerror(errno));
  }
  std::ostringstream text;
  text << in.rdbuf();
  std::string token = text.str();
  while (!token.empty() && std::isspace(static_cast<unsigned char>(token.back()))) token.pop_back();
  if (token.empty()) return Status::InvalidArgument("--token-file: '" + path + "' is empty");
  return token;
}

}  // namespace hmpmd::worker

namespace hmpmd::worker {

Status ReadCurveKeys(const std::string& dir, WorkerOptions* options) {
  std::string* fields[] = {&options->curve_server_key, &options->curve_public_key,
                           &options->curve_secret_key};
  const char* names[] = {"controller.pub", "worker.pub", "worker.key"};
  for (int i = 0; i < 3; ++i) {
    const std::string path = dir + "/" + names[i];
    std::ifstream in(path);
    std::string key;
    if (!in || !(in >> key) || key.size() != 40) {
      return Status::InvalidArgument("--curve-keys: " + path +
                                     ": missing or not a 40-character Z85 key");
    }
    *fields[i] = key;
  }
  return Status::Ok();
}

}  // namespace hmpmd::worker
