#include "rest_routes.h"

#include <cstdint>
#include <string>

#include "hmpmd/api/dashboard_assets.h"
#include "hmpmd/http/http_server.h"
#include "hmpmd/api/request_checks.h"

namespace hmpmd {
namespace {

constexpr std::string_view kRead = "GET, HEAD, OPTIONS";

}  // namespace

std::string_view RouteMethods(std::string_view path) {
  if (path == "/api/v1/jobs") return "GET, HEAD, POST, OPTIONS";
  if (path == "/api/v1/pool" || path == "/metrics") return kRead;
  // The server streams it on GET; a HEAD would wait for a body that never ends.
  if (path == kHttpEventsPath) return "GET, OPTIONS";
  if (FindDashboardAsset(path == "/" ? "/index.html" : path) != nullptr) return kRead;
  uint64_t id = 0;
  std::string rest;
  if (!ParseJobPath(path, &id, &rest)) return {};
  if (rest.empty()) return "GET, HEAD, DELETE, OPTIONS";
  if (rest == "tasks" || rest == "trace" || rest == "dag" || rest == "outputs") return kRead;
  return {};
}

bool MethodAllowed(std::string_view allow, std::string_view method) {
  while (!allow.empty()) {
    const size_t comma = allow.find(", ");
    if (allow.substr(0, comma) == method) return true;
    allow = comma == std::string_view::npos ? std::string_view() : allow.substr(comma + 2);
  }
  return false;
}

}  // namespace hmpmd
