#include "hmpmd/api/request_checks.h"

#include "hmpmd/http/http_target.h"
#include "hmpmd/protocol/job_spec.h"

namespace hmpmd {
namespace {

constexpr std::string_view kJobsPrefix = "/api/v1/jobs/";

// application/x-www-form-urlencoded: %XX is a byte, '+' a space. A '%'
// not followed by two hex digits, an encoded NUL or control character, or
// bytes that are not UTF-8 are refused rather than guessed at.
Result<std::string> Decode(std::string_view raw, std::string_view piece) {
  auto out = PercentDecode(raw, /*plus_is_space=*/true);
  if (!out.ok()) {
    return Status::InvalidArgument("query: bad percent-encoding in '" + ShownInError(piece) + "'");
  }
  if (!IsUtf8(*out) || !FirstControlChar(*out).empty()) {
    return Status::InvalidArgument("query: '" + ShownInError(piece) +
                                   "' decodes to invalid UTF-8 or a control character");
  }
  return out;
}

std::string_view Trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

std::string Lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = c >= 'A' && c <= 'Z' ? static_cast<char>(c - 'A' + 'a') : c;
  return out;
}

}  // namespace

bool ParseJobPath(std::string_view path, uint64_t* id, std::string* rest) {
  if (!path.starts_with(kJobsPrefix)) return false;
  size_t i = kJobsPrefix.size();
  const size_t start = i;
  uint64_t v = 0;
  bool over = false;
  for (; i < path.size() && path[i] >= '0' && path[i] <= '9'; ++i) {
    const uint64_t digit = static_cast<uint64_t>(path[i] - '0');
    over = over || v > (UINT64_MAX - digit) / 10;
    v = over ? UINT64_MAX : v * 10 + digit;
  }
  if (i == start || (path[start] == '0' && i - start > 1)) return false;
  if (i < path.size() && (path[i] != '/' || i + 1 == path.size())) return false;
  *id = v;
  *rest = i < path.size() ? std::string(path.substr(i + 1)) : std::string();
  return true;
}

std::string JobIdText(std::string_view path) {
  if (!path.starts_with(kJobsPrefix)) return std::string();
  const std::string_view tail = path.substr(kJobsPrefix.size());
  return std::string(tail.substr(0, tail.find('/')));
}

Status CheckJsonContentType(std::string_view content_type) {
  if (Trim(content_type).empty()) {
    return Status::InvalidArgument("Content-Type: missing; send the job spec as application/json");
  }
  size_t semi = content_type.find(';');
  if (Lower(Trim(content_type.substr(0, semi))) != "application/json") {
    return Status::InvalidArgument("Content-Type: '" + ShownInError(content_type) +
                                   "' is not application/json");
  }
  // `params` shrinks past each ';' it reads, so that every find() below is
  // a position in what is left, never in the whole header.
  std::string_view params =
      semi == std::string_view::npos ? std::string_view() : content_type.substr(semi + 1);
  while (semi != std::string_view::npos) {
    semi = params.find(';');
    const std::string_view param = Trim(params.substr(0, semi));
    if (semi != std::string_view::npos) params = params.substr(semi + 1);
    const size_t eq = param.find('=');
    if (eq == std::string_view::npos || Lower(Trim(param.substr(0, eq))) != "charset") continue;
    std::string_view value = Trim(param.substr(eq + 1));
    if (value.size() >= 2 && value.front() == '"' && value.back() == '"') {
      value = value.substr(1, value.size() - 2);
    }
    if (Lower(value) != "utf-8") {
      return Status::InvalidArgument("Content-Type: charset '" + ShownInError(value) +
                                     "' is not utf-8 (a job spec is UTF-8 JSON)");
    }
  }
  return Status::Ok();
}

Result<QueryParams> ParseQueryParams(std::string_view query, std::string_view route,
                                     std::initializer_list<std::string_view> allowed) {
  QueryParams out;
  size_t i = 0;
  while (i < query.size()) {
    size_t amp = query.find('&', i);
    if (amp == std::string_view::npos) amp = query.size();
    const std::string_view piece = query.substr(i, amp - i);
    i = amp + 1;
    if (piece.empty()) continue;
    const size_t eq = piece.find('=');
    ASSIGN_OR_RETURN(std::string name, Decode(piece.substr(0, eq), piece));
    ASSIGN_OR_RETURN(std::string value,
                     Decode(eq == piece.npos ? std::string_view() : piece.substr(eq + 1), piece));
    bool known = false;
    for (std::string_view a : allowed) known = known || a == name;
    if (!known) {
      std::string takes;
      for (std::string_view a : allowed) takes += (takes.empty() ? "" : ", ") + std::string(a);
      return Status::InvalidArgument("query: unknown parameter '" + ShownInError(name) +
                                     "': " + std::string(route) + " takes " +
                                     (takes.empty() ? std::string("none") : takes));
    }
    for (const auto& seen : out) {
      if (seen.first == name) {
        return Status::InvalidArgument("query: parameter '" + ShownInError(name) + "' given twice");
      }
    }
    out.emplace_back(std::move(name), std::move(value));
  }
  return out;
}

}  // namespace hmpmd
