#include "hmpmd/http/http_target.h"

#include <gtest/gtest.h>

#include <string>

namespace hmpmd {
namespace {

// "path|query|origin" of a target that parses, else its error.
std::string Parsed(std::string_view target) {
  auto t = ParseHttpTarget(target);
  if (!t.ok()) return t.status().message();
  return t->path + "|" + t->query + "|" + t->origin;
}

TEST(HttpTargetTest, OriginFormIsKeptAndItsPathDecoded) {
  EXPECT_EQ(Parsed("/api/v1/jobs"), "/api/v1/jobs||/api/v1/jobs");
  EXPECT_EQ(Parsed("/api/v1/jobs/3/tasks?limit=1&state=d%6Fne"),
            "/api/v1/jobs/3/tasks|limit=1&state=d%6Fne|/api/v1/jobs/3/tasks?limit=1&state=d%6Fne");
  EXPECT_EQ(Parsed("/api/v1/jobs/%31"), "/api/v1/jobs/1||/api/v1/jobs/%31");
  EXPECT_EQ(Parsed("/%61pi/%76%31/jobs"), "/api/v1/jobs||/%61pi/%76%31/jobs");
  EXPECT_EQ(Parsed("/a+b%20c"), "/a+b c||/a+b%20c") << "'+' is a '+' in a path";
  EXPECT_EQ(Parsed("/x?"), "/x||/x?");
  EXPECT_EQ(Parsed("/x#frag"), "/x||/x");
  EXPECT_EQ(Parsed("*"), "*||*");
}

TEST(HttpTargetTest, DotSegmentsAreRemovedAsRfc3986Says) {
  EXPECT_EQ(Parsed("/api/v1/jobs/../pool"), "/api/v1/pool||/api/v1/jobs/../pool");
  EXPECT_EQ(Parsed("/api/./v1/./jobs"), "/api/v1/jobs||/api/./v1/./jobs");
  EXPECT_EQ(Parsed("/../../metrics"), "/metrics||/../../metrics") << "never above the root";
  EXPECT_EQ(Parsed("/api/v1/%2e%2E/v1/jobs"), "/api/v1/jobs||/api/v1/%2e%2E/v1/jobs");
  EXPECT_EQ(Parsed("/api/v1/jobs/.."), "/api/v1/||/api/v1/jobs/..");
  EXPECT_EQ(Parsed("/api/v1/jobs/."), "/api/v1/jobs/||/api/v1/jobs/.");
  EXPECT_EQ(Parsed("/.."), "/||/..");
  EXPECT_EQ(Parsed("/"), "/||/");
  EXPECT_EQ(Parsed("/a//b/"), "/a//b/||/a//b/") << "empty segments are kept";
  EXPECT_EQ(Parsed("/a/..b/.c"), "/a/..b/.c||/a/..b/.c") << "only whole segments are dots";
}

TEST(HttpTargetTest, AbsoluteFormRoutesLikeItsPathAndQuery) {
  EXPECT_EQ(Parsed("http://127.0.0.1:8080/api/v1/jobs"), "/api/v1/jobs||/api/v1/jobs");
  EXPECT_EQ(Parsed("HTTP://Example.COM/api/v1/jobs?limit=2"),
            "/api/v1/jobs|limit=2|/api/v1/jobs?limit=2");
  EXPECT_EQ(Parsed("https://[::1]:8080/api/v1/jobs/%31"), "/api/v1/jobs/1||/api/v1/jobs/%31");
  EXPECT_EQ(Parsed("http://user@host:1/metrics"), "/metrics||/metrics");
  EXPECT_EQ(Parsed("http://host:8080"), "/||/") << "an empty path is '/'";
  EXPECT_EQ(Parsed("http://host?x=1"), "/|x=1|/?x=1");
}

TEST(HttpTargetTest, RefusesWhatIsNotATargetNamingTheProblem) {
  EXPECT_EQ(Parsed("api/v1/jobs"),
            "request target 'api/v1/jobs': expected a path starting with '/' or an http:// URL");
  EXPECT_EQ(Parsed("example.com:443"),
            "request target 'example.com:443': expected a path starting with '/' or an http:// "
            "URL");
  EXPECT_EQ(Parsed("ftp://host/x"),
            "request target 'ftp://host/x': scheme 'ftp' is not http or https");
  EXPECT_EQ(Parsed("http:///api/v1/jobs"), "request target 'http:///api/v1/jobs': no host");
  EXPECT_EQ(Parsed(""), "request target '': expected a path starting with '/' or an http:// URL");
}

TEST(HttpTargetTest, RefusesBadEscapesAndEncodedSlashesOrControlCharacters) {
  EXPECT_EQ(Parsed("/api/v1/jobs/%zz"),
            "request target '/api/v1/jobs/%zz': bad percent-encoding '%zz' in the path");
  EXPECT_EQ(Parsed("/api/v1/jobs/%4"),
            "request target '/api/v1/jobs/%4': bad percent-encoding '%4' in the path");
  EXPECT_EQ(Parsed("/a/%4g/b"),
            "request target '/a/%4g/b': bad percent-encoding '%4g' in the path");
  EXPECT_EQ(Parsed("/api/v1/jobs%2F1"),
            "request target '/api/v1/jobs%2F1': the path has an encoded '/' (%2F)");
  EXPECT_EQ(Parsed("/api/v1/jobs%2f1"),
            "request target '/api/v1/jobs%2f1': the path has an encoded '/' (%2f)");
  EXPECT_EQ(Parsed("/api/v1/jobs/1%00"),
            "request target '/api/v1/jobs/1%00': the path has an encoded control character (%00)");
  EXPECT_EQ(Parsed("/x%0A"),
            "request target '/x%0A': the path has an encoded control character (%0A)");
  EXPECT_EQ(Parsed("http://h/x%2F"),
            "request target 'http://h/x%2F': the path has an encoded '/' (%2F)");
  // The query is the route's to decode: its escapes are not judged here.
  EXPECT_EQ(Parsed("/x?a=%zz&b=%2F"), "/x|a=%zz&b=%2F|/x?a=%zz&b=%2F");
  // What is quoted stays short and printable.
  std::string long_target = "/" + std::string(5000, 'a') + "%zz";
  EXPECT_LT(Parsed(long_target).size(), 200u);
}

TEST(PercentDecodeTest, DecodesEscapesAndPlusOnlyWhenAsked) {
  EXPECT_EQ(*PercentDecode("a%20b+c", false), "a b+c");
  EXPECT_EQ(*PercentDecode("a%20b+c", true), "a b c");
  EXPECT_EQ(*PercentDecode("%2B%2b", true), "++");
  EXPECT_EQ(*PercentDecode("", true), "");
  EXPECT_EQ(PercentDecode("50%", false).status().message(), "bad percent-encoding '%'");
  EXPECT_EQ(PercentDecode("%g1", false).status().message(), "bad percent-encoding '%g1'");
}

}  // namespace
}  // namespace hmpmd
