#include "hmpmd/api/request_checks.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "hmpmd/api/task_table.h"

namespace hmpmd {
namespace {

using ::testing::HasSubstr;

std::string QueryError(std::string_view query, std::initializer_list<std::string_view> allowed) {
  auto r = ParseQueryParams(query, "GET /x", allowed);
  return r.ok() ? "ok" : r.status().message();
}

TEST(QueryParamsTest, SplitsAndDecodesNameValuePairs) {
  auto r = ParseQueryParams("a=1&&b=x%20y+z&c&", "GET /x", {"a", "b", "c"});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ASSERT_EQ(r->size(), 3u);
  EXPECT_EQ((*r)[0], (std::pair<std::string, std::string>{"a", "1"}));
  EXPECT_EQ((*r)[1], (std::pair<std::string, std::string>{"b", "x y z"}));
  EXPECT_EQ((*r)[2], (std::pair<std::string, std::string>{"c", ""}));
  EXPECT_EQ(QueryError("%6c%69mit=3", {"limit"}), "ok") << "an encoded name is its decoded self";
  EXPECT_EQ(QueryError("", {}), "ok");
  EXPECT_EQ(QueryError("&&", {}), "ok");
}

TEST(QueryParamsTest, RefusesUnknownRepeatedAndBadlyEncodedParametersNamingThem) {
  EXPECT_EQ(QueryError("limit=3", {}), "query: unknown parameter 'limit': GET /x takes none");
  EXPECT_EQ(QueryError("offset=1&limt=3", {"offset", "limit"}),
            "query: unknown parameter 'limt': GET /x takes offset, limit");
  EXPECT_EQ(QueryError("limit=3&limit=4", {"limit"}), "query: parameter 'limit' given twice");
  EXPECT_EQ(QueryError("limit=3&%6cimit=4", {"limit"}), "query: parameter 'limit' given twice");
  EXPECT_EQ(QueryError("limit=%zz", {"limit"}), "query: bad percent-encoding in 'limit=%zz'");
  EXPECT_EQ(QueryError("limit=%4", {"limit"}), "query: bad percent-encoding in 'limit=%4'");
  EXPECT_THAT(QueryError("limit=%ff", {"limit"}), HasSubstr("decodes to invalid UTF-8"));
  EXPECT_THAT(QueryError("limit=%00", {"limit"}), HasSubstr("or a control character"));
  // What is echoed stays one printable line, and short.
  std::string err = QueryError(std::string(5000, 'n') + "=1", {});
  EXPECT_LT(err.size(), 200u);
  EXPECT_EQ(QueryError("a%0Ab=1", {}).find('\n'), std::string::npos);
}

TEST(QueryParamsTest, TheTaskTableNamesTheParameterAndWhatItTakes) {
  auto err = [](const std::string& q) {
    auto r = ParseTaskQuery(q);
    return r.ok() ? "ok" : r.status().message();
  };
  EXPECT_EQ(err("offset=4&limit=10&state=ready"), "ok");
  EXPECT_EQ(err("state=re%61dy"), "ok");
  EXPECT_EQ(err("limit=-1"), "query: limit: '-1' is not an integer from 1 to 10000");
  EXPECT_EQ(err("limit=abc"), "query: limit: 'abc' is not an integer from 1 to 10000");
  EXPECT_EQ(err("limit=0"), "query: limit: '0' is not an integer from 1 to 10000");
  EXPECT_EQ(err("limit=10001"), "query: limit: '10001' is not an integer from 1 to 10000");
  EXPECT_EQ(err("limit="), "query: limit: '' is not an integer from 1 to 10000");
  EXPECT_EQ(err("offset=-1"), "query: offset: '-1' is not a non-negative integer");
  EXPECT_EQ(err("offset=99999999999999999999"),
            "query: offset: '99999999999999999999' is not a non-negative integer");
  EXPECT_THAT(err("state=sleeping"), HasSubstr("unknown task state 'sleeping' (blocked, ready"));
  EXPECT_EQ(err("page=2"),
            "query: unknown parameter 'page': GET /api/v1/jobs/{id}/tasks takes "
            "offset, limit, state");
  EXPECT_EQ(err("limit=5&limit=6"), "query: parameter 'limit' given twice");
  auto q = ParseTaskQuery("");
  ASSERT_TRUE(q.ok());
  EXPECT_EQ(q->limit, 1000u);
}

TEST(JobPathTest, OneSpellingPerJobAndEveryIdNamedAsWritten) {
  uint64_t id = 0;
  std::string rest;
  ASSERT_TRUE(ParseJobPath("/api/v1/jobs/12", &id, &rest));
  EXPECT_EQ(id, 12u);
  EXPECT_EQ(rest, "");
  ASSERT_TRUE(ParseJobPath("/api/v1/jobs/0/tasks", &id, &rest));
  EXPECT_EQ(id, 0u);
  EXPECT_EQ(rest, "tasks");
  ASSERT_TRUE(ParseJobPath("/api/v1/jobs/18446744073709551615", &id, &rest));
  EXPECT_EQ(id, UINT64_MAX);
  ASSERT_TRUE(ParseJobPath("/api/v1/jobs/99999999999999999999999/dag", &id, &rest));
  EXPECT_EQ(id, UINT64_MAX) << "past 64 bits: names no job";
  EXPECT_EQ(rest, "dag");
  EXPECT_EQ(JobIdText("/api/v1/jobs/99999999999999999999999/dag"), "99999999999999999999999");
  for (const char* p : {"/api/v1/jobs/007", "/api/v1/jobs/00", "/api/v1/jobs/3/", "/api/v1/jobs/-1",
                        "/api/v1/jobs/+1", "/api/v1/jobs/", "/api/v1/jobs/x", "/api/v1/jobs/1x",
                        "/api/v1/jobs", "/api/v1/jobsx/1"}) {
    EXPECT_FALSE(ParseJobPath(p, &id, &rest)) << p;
  }
}

TEST(JsonContentTypeTest, AcceptsApplicationJsonWithUtf8OrNoCharset) {
  for (const char* t : {"application/json", "Application/JSON", " application/json ",
                        "application/json; charset=utf-8", "application/json;charset=\"UTF-8\"",
                        "application/json; foo=bar"}) {
    EXPECT_TRUE(CheckJsonContentType(t).ok()) << t;
  }
  EXPECT_EQ(CheckJsonContentType("").message(),
            "Content-Type: missing; send the job spec as application/json");
  EXPECT_EQ(CheckJsonContentType("text/plain").message(),
            "Content-Type: 'text/plain' is not application/json");
  EXPECT_EQ(CheckJsonContentType("application/x-www-form-urlencoded").message(),
            "Content-Type: 'application/x-www-form-urlencoded' is not application/json");
  EXPECT_EQ(CheckJsonContentType("application/jsonx").message(),
            "Content-Type: 'application/jsonx' is not application/json");
  EXPECT_EQ(CheckJsonContentType("application/json, text/plain").message(),
            "Content-Type: 'application/json, text/plain' is not application/json");
  EXPECT_EQ(CheckJsonContentType("application/json; charset=latin1").message(),
            "Content-Type: charset 'latin1' is not utf-8 (a job spec is UTF-8 JSON)");
}

// Two or more parameters: each is read once (the HTTP thread spun forever
// on these, and the REST API never answered again).
TEST(JsonContentTypeTest, ReadsEveryParameterOfSeveral) {
  for (const char* t :
       {"application/json; a=b; charset=utf-8", "application/json;;;charset=\"utf-8\"",
        "application/json; a=b; c=d; e=f", "application/json;;"}) {
    EXPECT_TRUE(CheckJsonContentType(t).ok()) << t;
  }
  EXPECT_EQ(CheckJsonContentType("application/json; a=b; charset=latin1; c=d").message(),
            "Content-Type: charset 'latin1' is not utf-8 (a job spec is UTF-8 JSON)");
  EXPECT_EQ(CheckJsonContentType("application/json; charset=utf-8;; charset=ascii").message(),
            "Content-Type: charset 'ascii' is not utf-8 (a job spec is UTF-8 JSON)");
}

}  // namespace
}  // namespace hmpmd
