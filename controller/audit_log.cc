#include "hmpmd/controller/audit_log.h"

#include <fcntl.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <ctime>
#include <nlohmann/json.hpp>

namespace hmpmd {
namespace {

// UTC, to the millisecond: 2026-11-29T17:40:01.123Z.
std::string NowUtc() {
  const auto now = std::chrono::system_clock::now();
  const auto ms =
      std::chrono::duration_cast<std::chrono::milliseconds>(now.time_since_epoch()).count();
  const std::time_t secs = static_cast<std::time_t>(ms / 1000);
  std::tm tm{};
  gmtime_r(&secs, &tm);
  char buf[40];
  const size_t n = std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%S", &tm);
  std::snprintf(buf + n, sizeof buf - n, ".%03dZ", static_cast<int>(ms % 1000));
  return buf;
}

}  // namespace

Result<std::unique_ptr<AuditLog>> AuditLog::Open(const std::string& path) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0600);
  if (fd < 0) {
    return Status::InvalidArgument("audit log " + path + ": " + std::strerror(errno));
  }
  return std::unique_ptr<AuditLog>(new AuditLog(fd, path));
}

AuditLog::~AuditLog() { ::close(fd_); }

void AuditLog::Append(std::string_view who, std::string_view role, std::string_view from,
                      std::string_view call, std::string_view outcome) {
  nlohmann::ordered_json line;
  line["time"] = NowUtc();
  line["who"] = who;
  line["role"] = role;
  line["from"] = from;
  line["call"] = call;
  line["outcome"] = outcome;
  // Bytes that are not UTF-8 (a path, a session name) are replaced, not
  // thrown on.
  const std::string text =
      line.dump(-1, ' ', false, nlohmann::ordered_json::error_handler_t::replace) + "\n";
  const ssize_t n = ::write(fd_, text.data(), text.size());
  if (n == static_cast<ssize_t>(text.size())) return;
  const int error = n < 0 ? errno : ENOSPC;
  if (failed_.fetch_add(1, std::memory_order_relaxed) == 0) {
    spdlog::error("audit log {}: a line could not be written: {}", path_, std::strerror(error));
  }
}

}  // namespace hmpmd
