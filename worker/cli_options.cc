#include "cli_options.h"

#include <cctype>
#include <charconv>
#include <fstream>
#include <map>
#include <optional>
#include <string>

#include "hmpmd/protocol/address_list.h"
#include "hmpmd/protocol/job_spec.h"
#include "hmpmd/protocol/labels.h"
#include "hmpmd/protocol/read_file.h"
#include "hmpmd/protocol/strict_json.h"
#include "hmpmd/protocol/token_file.h"
#include "hmpmd/protocol/types.h"

namespace hmpmd::worker {
namespace {

// 1 PiB: far above any device, small enough to catch a unit mix-up.
constexpr uint64_t kMaxMemoryMb = uint64_t{1} << 30;
constexpr size_t kMaxNameLength = 255;

using json = nlohmann::ordered_json;

// An unsigned integer in [lo, hi] or an error naming `field`.
Result<uint64_t> UnsignedField(const json& value, const std::string& where, uint64_t lo,
                               uint64_t hi) {
  if (!value.is_number_unsigned() || value.get<uint64_t>() < lo || value.get<uint64_t>() > hi) {
    return Status::InvalidArgument(where + " is " + value.dump() + "; expected an integer in [" +
                                   std::to_string(lo) + ", " + std::to_string(hi) + "]");
  }
  return value.get<uint64_t>();
}

}  // namespace

Status ParseCores(std::string_view text, WorkerOptions* options) {
  // The flag lists the device's cores completely: a kind left out has none,
  // so `--cores cube=2` is a device without vector cores.
  Result<CoreCounts> counts = ParseCoreCounts(text);
  if (!counts.ok()) return Status::InvalidArgument("--cores: " + counts.status().message());
  options->cube_cores = counts->count[static_cast<int>(CoreKind::kCube)];
  options->vector_cores = counts->count[static_cast<int>(CoreKind::kVector)];
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

Status ParseLabels(const std::vector<std::string>& flags, WorkerOptions* options) {
  Labels given;
  for (const std::string& flag : flags) {
    ASSIGN_OR_RETURN(Label label, ParseLabelFlag(flag));
    RETURN_IF_ERROR(AddLabel("--label", std::move(label), &given));
  }
  std::map<std::string, std::string> out = options->labels;
  for (Label& l : given) out[l.key] = std::move(l.value);
  if (out.size() > kMaxLabels) {
    return Status::InvalidArgument("--label: more than " + std::to_string(kMaxLabels) +
                                   " labels with the device file's");
  }
  options->labels = std::move(out);
  return Status::Ok();
}

Status CheckWorkerName(std::string_view name, std::string_view where) {
  if (name.empty() || name.size() > kMaxNameLength) {
    return Status::InvalidArgument(std::string(where) + " must be a string of 1 to " +
                                   std::to_string(kMaxNameLength) + " characters");
  }
  if (!IsUtf8(name)) return Status::InvalidArgument(std::string(where) + " is not valid UTF-8");
  if (std::string c = FirstControlChar(name); !c.empty()) {
    return Status::InvalidArgument(std::string(where) + " contains the control character " + c);
  }
  return Status::Ok();
}

Status CheckControllerEndpoint(std::string_view endpoints) {
  // One, or a primary and its standbys separated by commas.
  for (const std::string& endpoint : SplitAddresses(endpoints)) {
    if (Status st = CheckEndpoint(endpoint, /*bind=*/false); !st.ok()) {
      return Status::InvalidArgument("--controller: " + st.message());
    }
  }
  return Status::Ok();
}

// Device files are a few lines; the limit keeps /dev/zero or a
// wrong big file from filling memory.
constexpr size_t kMaxSmallFile = size_t{1} << 20;

Result<std::string> ReadTokenFile(const std::string& path) {
  Result<std::string> token = hmpmd::ReadTokenFile(path);
  if (!token.ok()) return Status::InvalidArgument("--token-file: " + token.status().message());
  return token;
}

Status ParseDeviceDescription(std::string_view text, const std::string& source,
                              WorkerOptions* options) {
  const std::string at = "--device: " + source + ": ";
  // Strict: a field given twice is an error (nlohmann keeps the last one
  // silently, which would hide a typo'd file), named with its path.
  Result<json> parsed = ParseStrictJson(text);
  if (!parsed.ok()) {
    std::string what = parsed.status().message();
    // "invalid JSON: parse error at line 1, ..." reads "not valid JSON: ..." here.
    if (what.starts_with("invalid JSON: ")) what = "not valid JSON: " + what.substr(14);
    return Status::InvalidArgument(at + what);
  }
  const json& doc = *parsed;
  if (!doc.is_object()) return Status::InvalidArgument(at + "expected a JSON object");

  WorkerOptions out = *options;
  for (const auto& [key, value] : doc.items()) {
    if (key == "name") {
      if (!value.is_string()) {
        return Status::InvalidArgument(at + "field 'name' must be a string of 1 to " +
                                       std::to_string(kMaxNameLength) + " characters");
      }
      RETURN_IF_ERROR(CheckWorkerName(value.get<std::string>(), at + "field 'name'"));
      out.name = value.get<std::string>();
    } else if (key == "memory_mb") {
      // 0: no cap, as --memory-mb 0 (a device file describes what the flags do).
      Result<uint64_t> mb = UnsignedField(value, at + "field 'memory_mb'", 0, kMaxMemoryMb);
      if (!mb.ok()) return mb.status();
      out.memory_mb = *mb;
    } else if (key == "cores") {
      if (!value.is_object()) {
        return Status::InvalidArgument(at +
                                       "field 'cores' must be an object like "
                                       "{\"cube\": 1, \"vector\": 2}");
      }
      uint32_t counts[kNumCoreKinds] = {};
      for (const auto& [kind_name, count] : value.items()) {
        std::optional<CoreKind> kind = ParseCoreKind(kind_name);
        if (!kind) {
          return Status::InvalidArgument(at + "field 'cores." + kind_name +
                                         "': not a core kind (cube, vector)");
        }
        Result<uint64_t> n =
            UnsignedField(count, at + "field 'cores." + kind_name + "'", 0, kMaxCoresPerKind);
        if (!n.ok()) return n.status();
        counts[static_cast<int>(*kind)] = static_cast<uint32_t>(*n);
      }
      if (counts[0] + counts[1] == 0) {
        return Status::InvalidArgument(at + "field 'cores': the worker needs at least one core");
      }
      out.cube_cores = counts[static_cast<int>(CoreKind::kCube)];
      out.vector_cores = counts[static_cast<int>(CoreKind::kVector)];
    } else if (key == "labels") {
      if (!value.is_object()) {
        return Status::InvalidArgument(at +
                                       "field 'labels' must be an object like "
                                       "{\"accel\": \"910c\"}");
      }
      if (value.size() > kMaxLabels) {
        return Status::InvalidArgument(at + "field 'labels': more than " +
                                       std::to_string(kMaxLabels) + " labels");
      }
      std::map<std::string, std::string> labels;
      for (const auto& [k, v] : value.items()) {
        const std::string where = at + "field 'labels'";
        if (!v.is_string()) {
          return Status::InvalidArgument(where + ": values must be strings");
        }
        RETURN_IF_ERROR(CheckLabel(where, {k, v.get<std::string>()}));
        labels[k] = v.get<std::string>();
      }
      out.labels = std::move(labels);
    } else {
      return Status::InvalidArgument(at + "unknown field '" + key +
                                     "' (known: name, cores, memory_mb, labels)");
    }
  }
  *options = std::move(out);
  return Status::Ok();
}

Status LoadDeviceFile(const std::string& path, WorkerOptions* options) {
  Result<std::string> text = ReadFile(path, kMaxSmallFile);
  if (!text.ok()) return Status::InvalidArgument("--device: " + text.status().message());
  return ParseDeviceDescription(*text, path, options);
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
