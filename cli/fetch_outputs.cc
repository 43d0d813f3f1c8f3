#include "fetch_outputs.h"

#include <cctype>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "hmpmd/client/fetch.h"
#include "hmpmd/protocol/json_text.h"

namespace hmpmd {

Status PrepareFetchDir(const std::string& dir) {
  namespace fs = std::filesystem;
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) return Status::InvalidArgument("--fetch: cannot create '" + dir + "': " + ec.message());
  if (!fs::is_directory(dir, ec)) {
    return Status::InvalidArgument("--fetch: '" + dir + "' is not a directory");
  }
  if (!fs::is_empty(dir, ec) || ec) {
    return Status::InvalidArgument("--fetch: '" + dir +
                                   "' is not empty; give a new or empty directory (the outputs "
                                   "and manifest.json must not mix with other files)");
  }
  const fs::path probe = fs::path(dir) / ".hmpmd-fetch-probe";
  {
    std::ofstream out(probe, std::ios::binary);
    if (!out) {
      return Status::InvalidArgument("--fetch: cannot write in '" + dir +
                                     "': " + std::strerror(errno));
    }
  }
  fs::remove(probe, ec);
  return Status::Ok();
}

std::string OutputFileName(const std::string& task, size_t index) {
  std::string name;
  for (size_t i = 0; i < task.size(); ++i) {
    const auto c = static_cast<unsigned char>(task[i]);
    const bool safe = std::isalnum(c) || c == '_' || c == '-' || c >= 0x80 || (c == '.' && i > 0);
    if (safe) {
      name += static_cast<char>(c);
    } else {
      char buf[4];
      std::snprintf(buf, sizeof buf, "%%%02X", c);
      name += buf;
    }
  }
  // A task id may be 4096 bytes, escapes triple some, but a file name has
  // at most 255 (NAME_MAX): a longer one is cut, not inside an escape or a
  // UTF-8 character, and ends with a hash of the whole id (FNV-1a) so that
  // names stay distinct; '~' occurs only there (an id's '~' is escaped).
  const std::string suffix = "." + std::to_string(index) + ".bin";
  constexpr size_t kMaxFileName = 255, kHashChars = 17;  // "~" + 16 hex digits
  if (name.size() + suffix.size() > kMaxFileName) {
    size_t cut = kMaxFileName - suffix.size() - kHashChars;
    while (cut > 0 && (static_cast<unsigned char>(name[cut]) & 0xC0) == 0x80) --cut;
    if (name[cut - 1] == '%') {
      cut -= 1;
    } else if (name[cut - 2] == '%') {
      cut -= 2;
    }
    uint64_t hash = 14695981039346656037ull;
    for (unsigned char c : task) hash = (hash ^ c) * 1099511628211ull;
    char hex[kHashChars + 1];
    std::snprintf(hex, sizeof hex, "~%016llx", static_cast<unsigned long long>(hash));
    name = name.substr(0, cut) + hex;
  }
  return name + suffix;
}

Status FetchOutputsTo(const nlohmann::json& outputs, JobId job, const std::string& dir,
                      double timeout_s) {
  // Nothing is written when an output cannot be had: a partial manifest
  // would read as the whole result.
  const nlohmann::json lost = outputs.value("lost", nlohmann::json::array());
  if (!lost.empty()) {
    const nlohmann::json& first = lost.front();
    std::string more;
    if (lost.size() > 1) more = " (and " + std::to_string(lost.size() - 1) + " more)";
    const std::string with = first.contains("worker")
                                 ? "with worker '" + first.value("worker", std::string()) + "'"
                                 : "(no worker that came back holds them)";
    return Status::Unavailable("--fetch: task '" + first.value("task", std::string()) +
                               "': its final outputs were lost " + with + more);
  }
  // The workers serve only fetches with the controller's data token, which
  // it gives to callers it would let submit.
  const nlohmann::json list = outputs.value("outputs", nlohmann::json::array());
  DataToken token;
  if (!list.empty()) {
    const nlohmann::json hex = outputs.value("data_token", nlohmann::json());
    if (!hex.is_string()) {
      return Status::PermissionDenied(
          "--fetch: the controller gave no data token for the job's outputs; give --token-file "
          "with its token");
    }
    Result<DataToken> parsed = ParseDataToken(hex.get<std::string>());
    if (!parsed.ok()) return Status::Corruption("--fetch: " + parsed.status().message());
    token = *parsed;
  }
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) return Status::InvalidArgument("--fetch: cannot create '" + dir + "': " + ec.message());
  nlohmann::json manifest = nlohmann::json::array();
  for (const auto& o : list) {
    const std::string task = o.value("task", "");
    const std::string endpoint = o.value("endpoint", "");
    const uint32_t run = o.value("run", 0u);
    if (task.empty() || endpoint.empty()) {
      return Status::Corruption("--fetch: malformed output entry " + JsonText(o));
    }
    auto buffers =
        client::FetchOutputs(endpoint, token, job, run, static_cast<int64_t>(timeout_s * 1000));
    if (!buffers.ok())
      return Status(buffers.status().code(),
                    "--fetch: task '" + task + "': " + buffers.status().message());
    for (size_t i = 0; i < buffers->size(); ++i) {
      const Buffer& b = (*buffers)[i];
      const std::string name = OutputFileName(task, i);
      std::ofstream out(std::filesystem::path(dir) / name, std::ios::binary);
      out.write(reinterpret_cast<const char*>(b.data.data()),
                static_cast<std::streamsize>(b.data.size()));
      if (!out) return Status::Internal("--fetch: cannot write '" + dir + "/" + name + "'");
      manifest.push_back({{"task", task},
                          {"index", i},
                          {"file", name},
                          {"dtype", b.dtype},
                          {"shape", b.shape},
                          {"bytes", b.data.size()}});
    }
  }
  std::ofstream m(std::filesystem::path(dir) / "manifest.json");
  m << JsonText(manifest, 2) << "\n";
  if (!m) return Status::Internal("--fetch: cannot write '" + dir + "/manifest.json'");
  return Status::Ok();
}

}  // namespace hmpmd
