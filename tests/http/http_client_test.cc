// HttpClient: URL parsing, and calls against a real HttpServer on an
// ephemeral loopback port. Every wait is bounded by the call's timeout.
#include "hmpmd/http/http_client.h"

#include <gtest/gtest.h>

#include <chrono>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "hmpmd/http/http_server.h"

namespace hmpmd {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;
constexpr std::chrono::milliseconds kCallTimeout = 5s;

std::unique_ptr<HttpServer> StartServer(HttpHandler handler) {
  HttpServerOptions o;
  o.bind = "127.0.0.1:0";
  auto server = std::make_unique<HttpServer>(o, std::move(handler));
  Status st = server->Start();
  EXPECT_TRUE(st.ok()) << st.ToString();
  return server;
}

HttpUrl Url(const HttpServer& s) { return HttpUrl{"127.0.0.1", std::to_string(s.port()), ""}; }

// Answers with "<METHOD> <target> <content-type> <x-token>|<body>".
HttpHandler EchoHandler() {
  return [](HttpRequest req, HttpReply reply) {
    HttpResponse r;
    r.content_type = "text/plain";
    r.body = req.method + " " + req.target + " " + req.headers["content-type"] + " " +
             req.headers["x-token"] + "|" + req.body;
    reply(std::move(r));
  };
}

TEST(ParseHttpUrlTest, AcceptsHostPortForms) {
  auto a = ParseHttpUrl("http://127.0.0.1:8080");
  ASSERT_TRUE(a.ok()) << a.status().ToString();
  EXPECT_EQ(a->host, "127.0.0.1");
  EXPECT_EQ(a->port, "8080");
  EXPECT_EQ(a->base_path, "");
  EXPECT_EQ(a->ToString(), "http://127.0.0.1:8080");

  auto b = ParseHttpUrl("localhost:9000");
  ASSERT_TRUE(b.ok()) << b.status().ToString();
  EXPECT_EQ(b->host, "localhost");
  EXPECT_EQ(b->port, "9000");

  auto c = ParseHttpUrl("HTTP://ctl.example:80/hmpmd/");
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->host, "ctl.example");
  EXPECT_EQ(c->base_path, "/hmpmd");
  EXPECT_EQ(c->ToString(), "http://ctl.example:80/hmpmd");

  auto d = ParseHttpUrl("http://[::1]:8080/");
  ASSERT_TRUE(d.ok()) << d.status().ToString();
  EXPECT_EQ(d->host, "::1");
  EXPECT_EQ(d->base_path, "");
  EXPECT_EQ(d->ToString(), "http://[::1]:8080");
}

TEST(ParseHttpUrlTest, RejectsOtherFormsWithOneLine) {
  for (std::string bad : {"", "http://", "http://host", "host:", "host:http", ":8080", "host:0",
                          "host:70000", "https://host:443", "ftp://h:1", "::1:80", "[::1]",
                          "http://h:1/a?b", "http://user:pw@127.0.0.1:8080"}) {
    auto r = ParseHttpUrl(bad);
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
    EXPECT_EQ(r.status().message().rfind("url '" + bad + "': ", 0), 0u) << r.status().ToString();
    EXPECT_NE(r.status().message().find("expected http://HOST:PORT"), std::string::npos);
    EXPECT_EQ(r.status().message().find('\n'), std::string::npos);
  }
}

TEST(HttpCallTest, SendsBodyHeadersAndBasePath) {
  auto server = StartServer(EchoHandler());
  HttpUrl url = Url(*server);
  url.base_path = "/prefix";
  auto res = HttpCall(url, "PUT", "/api/v1/x?y=1", "{}", {{"X-Token", "t"}}, kCallTimeout);
  ASSERT_TRUE(res.ok()) << res.status().ToString();
  EXPECT_EQ(res->status, 200);
  EXPECT_EQ(res->content_type, "text/plain");
  EXPECT_EQ(res->body, "PUT /prefix/api/v1/x?y=1 application/json t|{}");

  auto typed = HttpCall(Url(*server), "POST", "raw", "a=b",
                        {{"Content-Type", "application/x-www-form-urlencoded"}}, kCallTimeout);
  ASSERT_TRUE(typed.ok()) << typed.status().ToString();
  EXPECT_EQ(typed->body, "POST /raw application/x-www-form-urlencoded |a=b");
}

TEST(HttpCallTest, ClosedPortIsUnavailableInOneLine) {
  std::string port;
  {
    auto server = StartServer(EchoHandler());
    port = std::to_string(server->port());
  }  // stopped and closed: nothing listens there now
  auto res = HttpCall(HttpUrl{"127.0.0.1", port, ""}, "GET", "/api/v1/pool", "", {}, kCallTimeout);
  ASSERT_FALSE(res.ok());
  EXPECT_EQ(res.status().code(), StatusCode::kUnavailable);
  EXPECT_EQ(res.status().message(),
            "cannot reach http://127.0.0.1:" + port + ": Connection refused");
}

TEST(HttpCallTest, SilentServerTimesOut) {
  std::mutex mu;
  std::vector<HttpReply> held;  // never answered until the test ends
  auto server = StartServer([&](HttpRequest, HttpReply reply) {
    std::lock_guard<std::mutex> lock(mu);
    held.push_back(std::move(reply));
  });
  auto t0 = Clock::now();
  auto res = HttpCall(Url(*server), "GET", "/slow", "", {}, 200ms);
  auto elapsed = Clock::now() - t0;
  ASSERT_FALSE(res.ok());
  EXPECT_EQ(res.status().code(), StatusCode::kUnavailable);
  EXPECT_NE(res.status().message().find("GET /slow timed out after 200 ms"), std::string::npos)
      << res.status().ToString();
  EXPECT_GE(elapsed, 190ms);
  EXPECT_LT(elapsed, 3s);
  server->Stop();
  std::lock_guard<std::mutex> lock(mu);
  held.clear();
}

TEST(StreamSseTest, ParsesEventsAndStopsWhenTheCallbackSaysSo) {
  auto server = StartServer(EchoHandler());
  // The hello carries every line form: CRLF, a comment, multi-line data and
  // an unnamed event.
  server->SetSseHello([] {
    return std::string(
        "event: x\r\ndata: a\r\ndata: b\r\n\r\n"
        ": comment\n\n"
        "data:plain\n\n"
        "event: last\ndata: {}\n\n");
  });
  std::vector<std::pair<std::string, std::string>> events;
  Status st = StreamSse(
      Url(*server), kHttpEventsPath, {},
      [&](std::string_view event, std::string_view data) {
        events.emplace_back(event, data);
        return event != "last";
      },
      kCallTimeout);
  EXPECT_TRUE(st.ok()) << st.ToString();
  std::vector<std::pair<std::string, std::string>> want = {
      {"x", "a\nb"}, {"message", "plain"}, {"last", "{}"}};
  EXPECT_EQ(events, want);
}

TEST(StreamSseTest, QuietStreamTimesOut) {
  auto server = StartServer(EchoHandler());
  auto t0 = Clock::now();
  Status st = StreamSse(
      Url(*server), kHttpEventsPath, {}, [](std::string_view, std::string_view) { return true; },
      200ms);
  EXPECT_EQ(st.code(), StatusCode::kUnavailable) << st.ToString();
  EXPECT_NE(st.message().find("timed out after 200 ms"), std::string::npos) << st.ToString();
  EXPECT_LT(Clock::now() - t0, 3s);
}

TEST(StreamSseTest, NonStreamAnswerIsAnError) {
  auto server = StartServer([](HttpRequest, HttpReply reply) {
    HttpResponse r;
    r.status = 404;
    r.body = R"({"error": "no such path"})";
    reply(std::move(r));
  });
  Status st = StreamSse(
      Url(*server), "/api/v1/nope", {}, [](std::string_view, std::string_view) { return true; },
      kCallTimeout);
  EXPECT_EQ(st.code(), StatusCode::kNotFound) << st.ToString();
  EXPECT_NE(st.message().find("HTTP 404"), std::string::npos) << st.ToString();
}

}  // namespace
}  // namespace hmpmd
