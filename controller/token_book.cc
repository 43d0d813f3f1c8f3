#include "hmpmd/controller/token_book.h"

#include <spdlog/spdlog.h>
#include <sys/stat.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <map>
#include <set>
#include <utility>

#include "hmpmd/protocol/read_file.h"
#include "hmpmd/protocol/same_secret.h"
#include "hmpmd/protocol/strict_json.h"

namespace hmpmd {
namespace {

constexpr size_t kMaxFileBytes = size_t{1} << 20;
constexpr size_t kMaxName = 64;
constexpr size_t kMinToken = 16;
constexpr size_t kMaxToken = 256;
constexpr uint32_t kMaxShare = 1'000'000;

int64_t NowMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

bool NameChar(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' ||
         c == '_' || c == '-';
}

Status Bad(const std::string& path, const std::string& what) {
  return Status::InvalidArgument("tokens file " + path + ": " + what);
}

// A holder's or tenant's name: printed in logs, the audit log and job
// listings, so short and plain.
Status CheckName(const std::string& name, const std::string& path, const std::string& at) {
  if (name.empty() || name.size() > kMaxName) {
    return Bad(path, at + ": 1 to " + std::to_string(kMaxName) + " characters");
  }
  for (char c : name) {
    if (!NameChar(c)) return Bad(path, at + ": only letters, digits and . _ -");
  }
  return Status::Ok();
}

}  // namespace

std::string_view TokenRoleName(TokenRole role) {
  switch (role) {
    case TokenRole::kRead:
      return "read";
    case TokenRole::kSubmit:
      return "submit";
    case TokenRole::kAdmin:
      return "admin";
  }
  return "?";
}

Result<std::vector<TokenEntry>> ParseTokens(std::string_view text, const std::string& path) {
  Result<nlohmann::ordered_json> doc = ParseStrictJson(text);
  if (!doc.ok()) return Bad(path, doc.status().message());
  if (!doc->is_object()) return Bad(path, "expected an object {\"tokens\": [...]}");
  for (const auto& [key, value] : doc->items()) {
    if (key != "tokens") return Bad(path, "unknown field '" + key + "' (it takes \"tokens\")");
  }
  if (!doc->contains("tokens") || !(*doc)["tokens"].is_array()) {
    return Bad(path, "\"tokens\": expected an array");
  }
  std::vector<TokenEntry> out;
  std::set<std::string> names;
  std::map<std::string, std::pair<uint32_t, std::string>> shares;  // by tenant: share, where
  for (size_t i = 0; i < (*doc)["tokens"].size(); ++i) {
    const auto& t = (*doc)["tokens"][i];
    const std::string at = "tokens[" + std::to_string(i) + "]";
    if (!t.is_object()) return Bad(path, at + ": expected an object with name, role and token");
    for (const auto& [key, value] : t.items()) {
      if (key == "share") {
        if (!value.is_number_unsigned() || value.get<uint64_t>() < 1 ||
            value.get<uint64_t>() > kMaxShare) {
          return Bad(path, at + ".share: a whole number from 1 to " + std::to_string(kMaxShare));
        }
        continue;
      }
      if (key != "name" && key != "role" && key != "token" && key != "tenant") {
        return Bad(
            path, at + ": unknown field '" + key + "' (it takes name, role, token, tenant, share)");
      }
      if (!value.is_string()) return Bad(path, at + "." + key + ": expected a string");
    }
    for (const char* key : {"name", "role", "token"}) {
      if (!t.contains(key)) return Bad(path, at + ": missing '" + key + "'");
    }
    TokenEntry e;
    e.holder.name = t["name"].get<std::string>();
    RETURN_IF_ERROR(CheckName(e.holder.name, path, at + ".name"));
    e.holder.tenant = t.contains("tenant") ? t["tenant"].get<std::string>() : e.holder.name;
    RETURN_IF_ERROR(CheckName(e.holder.tenant, path, at + ".tenant"));
    if (t.contains("share")) {
      e.holder.share = t["share"].get<uint32_t>();
      auto [it, fresh] = shares.emplace(e.holder.tenant, std::pair{e.holder.share, at});
      if (!fresh && it->second.first != e.holder.share) {
        return Bad(path, at + ".share: tenant '" + e.holder.tenant + "' has share " +
                             std::to_string(it->second.first) + " at " + it->second.second);
      }
    }
    if (!names.insert(e.holder.name).second) {
      return Bad(path, at + ".name: '" + e.holder.name + "' is given twice");
    }
    const std::string role = t["role"].get<std::string>();
    if (role == "admin") {
      e.holder.role = TokenRole::kAdmin;
    } else if (role == "submit") {
      e.holder.role = TokenRole::kSubmit;
    } else if (role == "read") {
      e.holder.role = TokenRole::kRead;
    } else {
      return Bad(path, at + ".role: '" + role + "' is not admin, submit or read");
    }
    e.token = t["token"].get<std::string>();
    // The token itself is never printed: errors name its holder.
    if (e.token.size() < kMinToken || e.token.size() > kMaxToken) {
      return Bad(path, at + ".token: " + std::to_string(kMinToken) + " to " +
                           std::to_string(kMaxToken) + " characters (this one has " +
                           std::to_string(e.token.size()) + ")");
    }
    for (char c : e.token) {
      if (c <= ' ' || c > '~') return Bad(path, at + ".token: printable ASCII without blanks");
    }
    for (const TokenEntry& other : out) {
      if (other.token == e.token) {
        return Bad(path, at + ".token: the same as '" + other.holder.name + "''s");
      }
    }
    out.push_back(std::move(e));
  }
  // A tenant's share, given on any of its tokens, holds for all of them.
  for (TokenEntry& e : out) {
    if (auto it = shares.find(e.holder.tenant); it != shares.end())
      e.holder.share = it->second.first;
  }
  return out;
}

TokenBook::TokenBook(std::string cluster) : cluster_(std::move(cluster)) {}

Result<std::vector<TokenEntry>> TokenBook::Read(FileId* id) const {
  struct stat st {};
  if (::stat(path_.c_str(), &st) != 0) {
    return Bad(path_, std::string("cannot be read: ") + std::strerror(errno));
  }
  *id = FileId{st.st_dev, st.st_ino, st.st_size,
               int64_t{st.st_mtim.tv_sec} * 1'000'000'000 + st.st_mtim.tv_nsec};
  if ((st.st_mode & S_IRWXO) != 0) {
    return Bad(path_, "every user of this host may read or change it; chmod o-rwx it");
  }
  Result<std::string> text = ReadFile(path_, kMaxFileBytes);
  if (!text.ok()) return Bad(path_, text.status().message());
  ASSIGN_OR_RETURN(std::vector<TokenEntry> entries, ParseTokens(*text, path_));
  for (const TokenEntry& e : entries) {
    if (!cluster_.empty() && SameSecret(cluster_, e.token)) {
      return Bad(path_, "the token of '" + e.holder.name + "' is the --token-file token");
    }
  }
  return entries;
}

Status TokenBook::Watch(std::string path) {
  path_ = std::move(path);
  std::lock_guard<std::mutex> lock(mu_);
  FileId id;
  ASSIGN_OR_RETURN(entries_, Read(&id));
  seen_ = id;
  next_check_ms_ = NowMs() + kRecheckMs;
  return Status::Ok();
}

void TokenBook::RefreshLocked() const {
  const int64_t now = NowMs();
  if (now < next_check_ms_) return;
  next_check_ms_ = now + kRecheckMs;
  struct stat st {};
  FileId id;
  if (::stat(path_.c_str(), &st) == 0) {
    id = FileId{st.st_dev, st.st_ino, st.st_size,
                int64_t{st.st_mtim.tv_sec} * 1'000'000'000 + st.st_mtim.tv_nsec};
  }
  if (id == seen_) return;
  Result<std::vector<TokenEntry>> read = Read(&id);
  seen_ = id;  // a refused change is not read again until the file changes
  if (!read.ok()) {
    spdlog::warn("{}; keeping the {} token(s) read before", read.status().message(),
                 entries_.size());
    return;
  }
  size_t kept = 0;
  for (const TokenEntry& e : *read) {
    for (const TokenEntry& old : entries_) {
      if (old.token == e.token) ++kept;
    }
  }
  spdlog::info("tokens file {} changed: {} token(s), {} new, {} revoked", path_, read->size(),
               read->size() - kept, entries_.size() - kept);
  entries_ = std::move(read).value();
}

std::optional<TokenHolder> TokenBook::Find(std::string_view token) const {
  if (!cluster_.empty() && SameSecret(cluster_, token)) {
    return TokenHolder{"admin", TokenRole::kAdmin, "admin"};
  }
  if (path_.empty() || token.empty()) return std::nullopt;
  std::lock_guard<std::mutex> lock(mu_);
  RefreshLocked();
  for (const TokenEntry& e : entries_) {
    if (SameSecret(e.token, token)) return e.holder;
  }
  return std::nullopt;
}

}  // namespace hmpmd
