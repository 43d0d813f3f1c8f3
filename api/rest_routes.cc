#include "hmpmd/api/rest_routes.h"

#include "hmpmd/api/dashboard_assets.h"
#include "hmpmd/api/request_checks.h"
#include "hmpmd/api/rest_api.h"
#include "hmpmd/http/http_server.h"

namespace hmpmd {

using enum RouteAccess;
// clang-format off
const Route RestApi::kRoutes[] = {
  // pattern                    method    runs on                     access          query                handler
  {"/api/v1/pool",              "GET",    RouteRuns::kSnapshot,       kRead,    RouteQuery::kNone,    &RestApi::GetPool},
  {"/api/v1/jobs",              "GET",    RouteRuns::kSnapshot,       kRead,    RouteQuery::kNone,    &RestApi::GetJobs},
  {"/api/v1/jobs",              "POST",   RouteRuns::kParser,         kWrite,   RouteQuery::kNone,    &RestApi::PostJob},
  {"/api/v1/jobs/{id}",         "GET",    RouteRuns::kSnapshot,       kRead,    RouteQuery::kNone,    &RestApi::GetJob},
  {"/api/v1/jobs/{id}",         "DELETE", RouteRuns::kLoop,           kWrite,   RouteQuery::kOwn,     &RestApi::DeleteJob},
  {"/api/v1/jobs/{id}/tasks",   "GET",    RouteRuns::kSnapshotOrLoop, kRead,    RouteQuery::kOwn,     &RestApi::GetTasks},
  {"/api/v1/jobs/{id}/trace",   "GET",    RouteRuns::kSnapshotOrLoop, kRead,    RouteQuery::kNone,    &RestApi::GetTrace},
  {"/api/v1/jobs/{id}/dag",     "GET",    RouteRuns::kSnapshotOrLoop, kRead,    RouteQuery::kNone,    &RestApi::GetDag},
  {"/api/v1/jobs/{id}/outputs", "GET",    RouteRuns::kSnapshotOrLoop, kRead,    RouteQuery::kNone,    &RestApi::GetOutputs},
  {"/api/v1/jobs/{id}/logs",    "GET",    RouteRuns::kLoop,           kRead,    RouteQuery::kOwn,     &RestApi::GetLogs},
  {kHttpEventsPath,             "GET",    RouteRuns::kServer,         kRead,    RouteQuery::kNone,    nullptr},
  {"/metrics",                  "GET",    RouteRuns::kSnapshot,       kMetrics, RouteQuery::kNone,    &RestApi::GetMetrics},
  {"/api/v1/openapi.json",      "GET",    RouteRuns::kHttpThread,     kOpen,    RouteQuery::kNone,    &RestApi::GetAsset},
  {"{asset}",                   "GET",    RouteRuns::kHttpThread,     kOpen,    RouteQuery::kIgnored, &RestApi::GetAsset},
};
// clang-format on

const RouteTable& RestApi::Routes() {
  static const RouteTable table(kRoutes);
  return table;
}

namespace {

// GET takes HEAD (the same answer without its body), but where the server
// streams the answer: a HEAD would wait for a body that never ends.
bool TakesHead(const Route& r) { return r.method == "GET" && r.runs != RouteRuns::kServer; }

void AddMethod(std::string* allow, std::string_view method) {
  for (std::string_view rest = *allow; !rest.empty();) {
    const size_t comma = rest.find(", ");
    if (rest.substr(0, comma) == method) return;
    rest = comma == std::string_view::npos ? std::string_view() : rest.substr(comma + 2);
  }
  if (!allow->empty()) *allow += ", ";
  *allow += method;
}

}  // namespace

RouteTable::RouteTable(std::span<const Route> routes) : routes_(routes) {
  std::vector<std::string_view> all;
  for (size_t i = 0; i < routes.size();) {
    size_t end = i;
    while (end < routes.size() && routes[end].pattern == routes[i].pattern) ++end;
    Group g{routes.subspan(i, end - i), {}};
    for (const Route& r : g.rows) {
      AddMethod(&g.allow, r.method);
      if (TakesHead(r)) AddMethod(&g.allow, "HEAD");
      AddMethod(&all_, r.method);
      if (TakesHead(r)) AddMethod(&all_, "HEAD");
    }
    AddMethod(&g.allow, "OPTIONS");
    groups_.push_back(std::move(g));
    i = end;
  }
  AddMethod(&all_, "OPTIONS");
}

bool RouteTable::Matches(std::string_view pattern, std::string_view path, uint64_t* id) {
  if (pattern == "{asset}")
    return FindDashboardAsset(path == "/" ? "/index.html" : path) != nullptr;
  const size_t brace = pattern.find("{id}");
  if (brace == std::string_view::npos) return pattern == path;
  // Job routes: "/api/v1/jobs/{id}" and what follows it.
  std::string rest;
  if (!ParseJobPath(path, id, &rest) || !path.starts_with(pattern.substr(0, brace))) return false;
  std::string_view tail = pattern.substr(brace + 4);
  if (tail.starts_with('/')) tail.remove_prefix(1);
  return rest == tail;
}

RouteTable::Match RouteTable::Find(std::string_view path) const {
  for (const Group& g : groups_) {
    uint64_t id = 0;
    if (Matches(g.rows.front().pattern, path, &id)) return Match{g.rows, g.allow, id};
  }
  return {};
}

const Route* RouteTable::Row(const Match& m, std::string_view method) {
  for (const Route& r : m.rows) {
    if (r.method == method || (method == "HEAD" && TakesHead(r))) return &r;
  }
  return nullptr;
}

bool RouteTable::RefusesQuery(const Match& m, std::string_view method) {
  if (method == "OPTIONS") {
    for (const Route& r : m.rows) {
      if (r.query == RouteQuery::kNone) return true;
    }
    return false;
  }
  const Route* r = Row(m, method);
  return r != nullptr && r->query == RouteQuery::kNone;
}

}  // namespace hmpmd
