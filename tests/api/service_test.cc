// Service: the controller alone, or wired to the REST API, the event feed
// and the HTTP server as `hmpmd controller` runs it; and what stops when
// its loop ends.
#include "hmpmd/api/service.h"

#include <gtest/gtest.h>

#include <chrono>
#include <map>
#include <string>
#include <thread>

#include "hmpmd/http/http_client.h"

namespace hmpmd {
namespace {

ServiceOptions Options(bool http) {
  ServiceOptions o;
  o.controller.listen = "tcp://127.0.0.1:0";
  o.serve_http = http;
  o.http.bind = "127.0.0.1:0";
  return o;
}

// Runs `service`'s loop on a thread of its own while the test lives.
class Running {
 public:
  explicit Running(Service& s) : s_(s), loop_([&s] { s.Run(); }) {}
  ~Running() { Stop(); }
  void Stop() {
    if (!loop_.joinable()) return;
    s_.Stop();
    loop_.join();
  }

 private:
  Service& s_;
  std::thread loop_;
};

Result<HttpResponse> Call(uint16_t port, const std::string& method, const std::string& target,
                          const std::string& body = "",
                          std::map<std::string, std::string> headers = {}) {
  HttpUrl url{"127.0.0.1", std::to_string(port), ""};
  return HttpCall(url, method, target, body, headers, std::chrono::seconds(10));
}

TEST(ServiceTest, WithoutHttpItIsTheControllerAlone) {
  Service s(Options(false));
  ASSERT_TRUE(s.Start().ok());
  EXPECT_EQ(s.api(), nullptr);
  EXPECT_EQ(s.feed(), nullptr);
  EXPECT_EQ(s.http_server(), nullptr);
  EXPECT_EQ(s.http_port(), 0u);
  EXPECT_EQ(s.http_budget(), nullptr);
  EXPECT_NE(s.controller().endpoint().find("tcp://127.0.0.1:"), std::string::npos);
  Running loop(s);
}

TEST(ServiceTest, WithHttpTheApiAnswersUnderTheControllersToken) {
  ServiceOptions o = Options(true);
  o.controller.token = "s3cret";
  Service s(o);
  ASSERT_TRUE(s.Start().ok());
  ASSERT_NE(s.http_port(), 0u);
  ASSERT_NE(s.http_budget(), nullptr) << "the default budget is on";
  Running loop(s);
  EXPECT_EQ(Call(s.http_port(), "GET", "/api/v1/pool")->status, 401) << "reads need it too";
  auto pool = Call(s.http_port(), "GET", "/api/v1/pool", "", {{"Authorization", "Bearer s3cret"}});
  ASSERT_TRUE(pool.ok()) << pool.status().ToString();
  EXPECT_EQ(pool->status, 200) << pool->body;
  EXPECT_EQ(pool->headers["hmpmd-store"], std::to_string(s.controller().epoch()));
  const std::string spec = R"({"tasks":[{"id":"a","kernel":"noop"}]})";
  const std::map<std::string, std::string> json = {{"Content-Type", "application/json"}};
  auto refused = Call(s.http_port(), "POST", "/api/v1/jobs", spec, json);
  ASSERT_TRUE(refused.ok());
  EXPECT_EQ(refused->status, 401);
  auto with_token = json;
  with_token["Authorization"] = "Bearer s3cret";
  auto submitted = Call(s.http_port(), "POST", "/api/v1/jobs", spec, with_token);
  ASSERT_TRUE(submitted.ok());
  EXPECT_EQ(submitted->status, 201) << submitted->body;
}

TEST(ServiceTest, TheServerTakesNoBodyLargerThanTheSpecLimit) {
  ServiceOptions o = Options(true);
  o.controller.spec_limits.max_bytes = 1024;
  o.http_cpu_percent = 0;
  Service s(o);
  ASSERT_TRUE(s.Start().ok());
  EXPECT_EQ(s.http_budget(), nullptr);
  Running loop(s);
  auto r = Call(s.http_port(), "POST", "/api/v1/jobs", std::string(2048, ' '),
                {{"Content-Type", "application/json"}});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->status, 413) << r->body;
  // Refused by the server before the body is read, not by the spec parser.
  EXPECT_NE(r->body.find("request body exceeds the limit of 1024 bytes"), std::string::npos)
      << r->body;
}

TEST(ServiceTest, TheHttpSideStopsWhenTheLoopEnds) {
  Service s(Options(true));
  ASSERT_TRUE(s.Start().ok());
  const uint16_t port = s.http_port();
  Running loop(s);
  ASSERT_TRUE(Call(port, "GET", "/metrics").ok());
  loop.Stop();
  EXPECT_FALSE(Call(port, "GET", "/metrics").ok()) << "nothing listens once Run() returned";
}

}  // namespace
}  // namespace hmpmd
