// AuditLog: who did what, when and from where. Every mutating call (a REST
// POST or DELETE, refused or not; a driver session opened, refused or
// closed) appends one JSON line to --audit-log:
//   {"time":"2026-11-29T17:40:01.123Z","who":"vision","role":"submit",
//    "from":"10.0.0.7:51234","call":"POST /api/v1/jobs","outcome":"201"}
// "who" is the token's holder (TokenBook), "" for none or a wrong one; the
// token itself is never written. A line is one write(2) to a file opened
// O_APPEND, so lines from several threads never interleave.
//
// Thread-safety: Append() is safe from any thread.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "hmpmd/protocol/status.h"

namespace hmpmd {

class AuditLog {
 public:
  // Opens (creates, mode 0600) `path` for appending; InvalidArgument naming
  // it when it cannot be.
  static Result<std::unique_ptr<AuditLog>> Open(const std::string& path);
  ~AuditLog();
  AuditLog(const AuditLog&) = delete;
  AuditLog& operator=(const AuditLog&) = delete;

  void Append(std::string_view who, std::string_view role, std::string_view from,
              std::string_view call, std::string_view outcome);
  // Lines that could not be written (a full disk); only the first is
  // logged.
  uint64_t failed() const { return failed_.load(std::memory_order_relaxed); }

 private:
  AuditLog(int fd, std::string path) : fd_(fd), path_(std::move(path)) {}
  const int fd_;
  const std::string path_;
  std::atomic<uint64_t> failed_{0};
};

}  // namespace hmpmd
