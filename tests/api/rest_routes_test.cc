// The REST route table: what each path matches, the Allow header each
// route answers with, which methods need the token, and which queries are
// refused before a handler runs.
#include "hmpmd/api/rest_routes.h"

#include <gtest/gtest.h>

#include <set>
#include <string>

#include "hmpmd/api/rest_api.h"

namespace hmpmd {
namespace {

const RouteTable& Table() { return RestApi::Routes(); }

TEST(RestRoutesTest, EachPathFindsItsRouteAndAJobPathItsId) {
  EXPECT_EQ(Table().Find("/api/v1/jobs").rows.front().pattern, "/api/v1/jobs");
  RouteTable::Match m = Table().Find("/api/v1/jobs/42/trace");
  ASSERT_FALSE(m.rows.empty());
  EXPECT_EQ(m.rows.front().pattern, "/api/v1/jobs/{id}/trace");
  EXPECT_EQ(m.id, 42u);
  EXPECT_EQ(Table().Find("/api/v1/jobs/7").rows.front().pattern, "/api/v1/jobs/{id}");
  // The compiled-in files; the OpenAPI document is one, but its own route.
  EXPECT_EQ(Table().Find("/").rows.front().pattern, "{asset}");
  EXPECT_EQ(Table().Find("/index.html").rows.front().pattern, "{asset}");
  EXPECT_EQ(Table().Find("/api/v1/openapi.json").rows.front().pattern, "/api/v1/openapi.json");
  for (const char* none : {"/api/v1/nope", "/api/v1/jobs/007", "/api/v1/jobs/3/", "/api/v1/jobs/-1",
                           "/api/v1/jobs/3/x/tasks", "/api/v1/jobs/3/tasks/", "/nowhere"}) {
    EXPECT_TRUE(Table().Find(none).rows.empty()) << none;
  }
}

TEST(RestRoutesTest, AllowListsTheRowsMethodsWithHeadForGetAndOptions) {
  EXPECT_EQ(Table().Find("/api/v1/jobs").allow, "GET, HEAD, POST, OPTIONS");
  EXPECT_EQ(Table().Find("/api/v1/jobs/1").allow, "GET, HEAD, DELETE, OPTIONS");
  EXPECT_EQ(Table().Find("/api/v1/jobs/1/tasks").allow, "GET, HEAD, OPTIONS");
  EXPECT_EQ(Table().Find("/metrics").allow, "GET, HEAD, OPTIONS");
  EXPECT_EQ(Table().Find("/").allow, "GET, HEAD, OPTIONS");
  // The server streams it: a HEAD would wait for a body that never ends.
  EXPECT_EQ(Table().Find("/api/v1/events").allow, "GET, OPTIONS");
  EXPECT_EQ(Table().all_methods(), "GET, HEAD, POST, DELETE, OPTIONS");
}

TEST(RestRoutesTest, HeadTakesGetsRowAndOnlyTheDashboardsFilesAreOpen) {
  RouteTable::Match jobs = Table().Find("/api/v1/jobs");
  EXPECT_EQ(RouteTable::Row(jobs, "HEAD")->method, "GET");
  EXPECT_EQ(RouteTable::Row(jobs, "PUT"), nullptr);
  EXPECT_EQ(RouteTable::Row(jobs, "OPTIONS"), nullptr) << "every route answers it alike";
  EXPECT_EQ(RouteTable::Row(Table().Find("/api/v1/events"), "HEAD"), nullptr);
  std::set<std::string> writes, open;
  for (const Route& r : Table().rows()) {
    const std::string row = std::string(r.method) + " " + std::string(r.pattern);
    if (r.access == RouteAccess::kWrite) writes.insert(row);
    if (r.access == RouteAccess::kOpen) open.insert(row);
    EXPECT_EQ(r.access == RouteAccess::kWrite, r.method != "GET") << row;
    EXPECT_EQ(r.handler == nullptr, r.runs == RouteRuns::kServer) << r.pattern;
  }
  EXPECT_EQ(writes, (std::set<std::string>{"POST /api/v1/jobs", "DELETE /api/v1/jobs/{id}"}));
  EXPECT_EQ(open, (std::set<std::string>{"GET /api/v1/openapi.json", "GET {asset}"}));
}

TEST(RestRoutesTest, EveryApiRouteRefusesAQueryButTheTaskTableTaskLogsAndAJobsDelete) {
  auto refuses = [](const char* method, const char* path) {
    return RouteTable::RefusesQuery(Table().Find(path), method);
  };
  for (const char* p : {"/api/v1/pool", "/api/v1/jobs", "/api/v1/jobs/3", "/api/v1/jobs/3/trace",
                        "/api/v1/jobs/3/dag", "/api/v1/jobs/3/outputs", "/api/v1/events",
                        "/api/v1/openapi.json", "/metrics"}) {
    EXPECT_TRUE(refuses("GET", p)) << p;
    EXPECT_TRUE(refuses("HEAD", p) || p == std::string("/api/v1/events")) << p;
    EXPECT_TRUE(refuses("OPTIONS", p)) << p;
  }
  for (const char* p : {"/api/v1/jobs/3/tasks", "/api/v1/jobs/3/logs", "/", "/index.html"}) {
    EXPECT_FALSE(refuses("GET", p)) << p;
    EXPECT_FALSE(refuses("OPTIONS", p)) << p;
  }
  // A job's DELETE takes ?forget=; the job list's POST takes none.
  EXPECT_FALSE(refuses("DELETE", "/api/v1/jobs/3"));
  EXPECT_TRUE(refuses("POST", "/api/v1/jobs"));
}

}  // namespace
}  // namespace hmpmd
