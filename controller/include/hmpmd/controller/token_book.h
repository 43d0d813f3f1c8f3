// TokenBook: the tokens a controller accepts and who holds each. One token
// comes from --token-file (or the default file): held by "admin", role
// admin. A --tokens file gives more, each with a holder's name and a role,
// and is read again when it changes, so tokens are added and revoked
// without a restart (docs/operations.md, "Several tokens").
//
// Each token belongs to a tenant: the jobs and sessions it makes are the
// tenant's, which its holders alone see and cancel, but for admins.
//
// Roles, each with what the one below may do:
//   read:   REST reads (pool, jobs, tasks, traces, events, metrics)
//   submit: REST writes (submit, cancel) and driver sessions
//   admin:  serving as a worker (which receives every job's inputs)
//
// Thread-safety: every member is safe from any thread (the ZAP handler's,
// the controller loop, HTTP threads); a reload runs inside Find(), under a
// mutex, at most every kRecheckMs.
#pragma once

#include <cstdint>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "hmpmd/protocol/status.h"

namespace hmpmd {

enum class TokenRole { kRead, kSubmit, kAdmin };

// "read", "submit", "admin".
std::string_view TokenRoleName(TokenRole role);

struct TokenHolder {
  std::string name;
  TokenRole role = TokenRole::kRead;
  // The tenant its jobs and sessions belong to (its name unless the file
  // says otherwise), and that tenant's share of the pool against the
  // others' (docs/operations.md, "Tenants").
  std::string tenant;
  uint32_t share = 1;
};

struct TokenEntry {
  std::string token;
  TokenHolder holder;
};

// The entries of a --tokens file's text:
//   {"tokens": [{"name": "vision", "role": "submit", "token": "...",
//                "tenant": "vision", "share": 2}, ...]}
// A name is 1 to 64 of [A-Za-z0-9._-], unique; a role is one of the three;
// a token is 16 to 256 printable ASCII characters without blanks, unique.
// A tenant (default: the name) is a name too; several tokens may share
// one. A share is 1 to 1,000,000 (default 1), given on any of the
// tenant's tokens, the same wherever given.
// InvalidArgument naming `path` and what is wrong (`tokens[2].role: ...`).
Result<std::vector<TokenEntry>> ParseTokens(std::string_view text, const std::string& path);

class TokenBook {
 public:
  // How often Find() may look at the file for a change.
  static constexpr int64_t kRecheckMs = 250;

  // `cluster`: the --token-file token, held by "admin"; empty: none.
  explicit TokenBook(std::string cluster = "");

  // Reads `path` (--tokens) now and again whenever it changes. A file that
  // every user may read, or that does not parse, is refused naming it; a
  // later change that is refused keeps the tokens read before (logged).
  // Call before the book is shared.
  Status Watch(std::string path);

  // False when there is neither a cluster token nor a tokens file: every
  // door is open.
  bool enabled() const { return !cluster_.empty() || !path_.empty(); }

  // Who holds `token` (each compared in constant time); nullopt for none.
  std::optional<TokenHolder> Find(std::string_view token) const;

 private:
  struct FileId {
    uint64_t dev = 0, ino = 0;
    int64_t size = -1, mtime_ns = 0;
    bool operator==(const FileId&) const = default;
  };
  // Rereads the file when its id changed; under mu_.
  void RefreshLocked() const;
  Result<std::vector<TokenEntry>> Read(FileId* id) const;

  const std::string cluster_;
  std::string path_;  // set once, before sharing
  mutable std::mutex mu_;
  mutable std::vector<TokenEntry> entries_;
  mutable FileId seen_;
  mutable int64_t next_check_ms_ = 0;
};

}  // namespace hmpmd
