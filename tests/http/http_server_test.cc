// HttpServer over real loopback sockets, driven by HttpClient and by a raw
// POSIX socket for bytes a well-behaved client would never send. Every wait
// is bounded; sleeps appear only inside bounded polling and as a fake
// controller's reply delay.
#include "hmpmd/http/http_server.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "../raw_socket.h"
#include "hmpmd/http/http_client.h"

namespace hmpmd {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;
constexpr std::chrono::milliseconds kCallTimeout = 5s;

std::string Escape(std::string_view s) {
  std::string out;
  for (char c : s) {
    if (c == '"' || c == '\\') out += '\\';
    out += c;
  }
  return out;
}

std::string EchoJson(const HttpRequest& r) {
  return "{\"method\":\"" + Escape(r.method) + "\",\"path\":\"" + Escape(r.path) +
         "\",\"query\":\"" + Escape(r.query) + "\",\"body\":\"" + Escape(r.body) + "\"}";
}

// Answers at once with the request as JSON; copies header x-echo back.
HttpHandler EchoHandler() {
  return [](HttpRequest req, HttpReply reply) {
    HttpResponse r;
    r.body = EchoJson(req);
    if (auto it = req.headers.find("x-echo"); it != req.headers.end()) {
      r.headers["X-Echo"] = it->second;
    }
    reply(std::move(r));
  };
}

// Polls `pred` every 2 ms until it holds or `limit` passes.
template <typename Pred>
bool WaitFor(Pred pred, std::chrono::milliseconds limit = 5s) {
  auto deadline = Clock::now() + limit;
  while (!pred()) {
    if (Clock::now() > deadline) return pred();
    std::this_thread::sleep_for(2ms);
  }
  return true;
}

// Runs a closure at scope exit, so a failed ASSERT still joins threads.
class Finally {
 public:
  explicit Finally(std::function<void()> fn) : fn_(std::move(fn)) {}
  ~Finally() { fn_(); }

 private:
  std::function<void()> fn_;
};

// Stands in for the controller loop: one thread running posted closures.
class FakeLoop {
 public:
  FakeLoop() : thread_([this] { Run(); }) {}
  ~FakeLoop() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      done_ = true;
    }
    cv_.notify_all();
    thread_.join();
  }
  void Post(std::function<void()> fn) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      queue_.push_back(std::move(fn));
    }
    cv_.notify_one();
  }

 private:
  void Run() {
    std::unique_lock<std::mutex> lock(mu_);
    for (;;) {
      cv_.wait(lock, [this] { return done_ || !queue_.empty(); });
      if (queue_.empty()) return;
      auto fn = std::move(queue_.front());
      queue_.pop_front();
      lock.unlock();
      fn();
      lock.lock();
    }
  }

  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::function<void()>> queue_;
  bool done_ = false;
  std::thread thread_;
};

class HttpServerTest : public ::testing::Test {
 protected:
  static HttpServerOptions Options() {
    HttpServerOptions o;
    o.bind = "127.0.0.1:0";
    o.threads = 2;
    return o;
  }
  static std::unique_ptr<HttpServer> StartServer(HttpServerOptions o, HttpHandler h) {
    auto server = std::make_unique<HttpServer>(std::move(o), std::move(h));
    Status st = server->Start();
    EXPECT_TRUE(st.ok()) << st.ToString();
    EXPECT_NE(server->port(), 0);
    return server;
  }
  static HttpUrl Url(const HttpServer& s) {
    return HttpUrl{"127.0.0.1", std::to_string(s.port()), ""};
  }
};

TEST_F(HttpServerTest, EchoesGetPostAndDelete) {
  auto server = StartServer(Options(), EchoHandler());
  HttpUrl url = Url(*server);

  auto get = HttpCall(url, "GET", "/api/v1/jobs?limit=3", "", {{"X-Echo", "hi"}}, kCallTimeout);
  ASSERT_TRUE(get.ok()) << get.status().ToString();
  EXPECT_EQ(get->status, 200);
  EXPECT_EQ(get->body, R"({"method":"GET","path":"/api/v1/jobs","query":"limit=3","body":""})");
  EXPECT_EQ(get->content_type, "application/json");
  EXPECT_EQ(get->headers["server"], "hmpmd");
  EXPECT_EQ(get->headers["x-echo"], "hi");  // the handler found it under "x-echo"

  auto post = HttpCall(url, "POST", "/api/v1/jobs", R"({"name":"x"})", {}, kCallTimeout);
  ASSERT_TRUE(post.ok()) << post.status().ToString();
  EXPECT_EQ(post->body,
            R"({"method":"POST","path":"/api/v1/jobs","query":"","body":"{\"name\":\"x\"}"})");

  auto del = HttpCall(url, "DELETE", "/api/v1/jobs/7", "", {}, kCallTimeout);
  ASSERT_TRUE(del.ok()) << del.status().ToString();
  EXPECT_EQ(del->body, R"({"method":"DELETE","path":"/api/v1/jobs/7","query":"","body":""})");
}

TEST_F(HttpServerTest, RepliesFromTheControllerThreadAfterADelay) {
  FakeLoop loop;
  std::atomic<std::thread::id> replied_on;
  auto server = StartServer(Options(), [&](HttpRequest req, HttpReply reply) {
    loop.Post([&replied_on, req = std::move(req), reply] {
      std::this_thread::sleep_for(5ms);  // the controller takes its time
      replied_on = std::this_thread::get_id();
      HttpResponse r;
      r.status = 201;
      r.body = EchoJson(req);
      reply(std::move(r));
    });
  });
  for (int i = 0; i < 5; ++i) {
    auto res = HttpCall(Url(*server), "POST", "/api/v1/jobs", std::to_string(i), {}, kCallTimeout);
    ASSERT_TRUE(res.ok()) << res.status().ToString();
    EXPECT_EQ(res->status, 201);
    EXPECT_NE(res->body.find("\"body\":\"" + std::to_string(i) + "\""), std::string::npos);
  }
  EXPECT_NE(replied_on.load(), std::this_thread::get_id());
}

TEST_F(HttpServerTest, HandlerStatusTypeAndHeadersPassThrough) {
  auto server = StartServer(Options(), [](HttpRequest req, HttpReply reply) {
    HttpResponse r;
    if (req.path == "/metrics") {
      r.content_type = "text/plain; version=0.0.4";
      r.body = "hmpmd_up 1\n";
    } else {
      r.status = 404;
      r.body = R"({"error": "no job 9"})";
      r.headers["X-Request-Id"] = "abc";
      r.headers["X-Bad"] = "x\r\nInjected: yes";  // dropped, never sent
    }
    reply(std::move(r));
  });
  auto missing = HttpCall(Url(*server), "GET", "/api/v1/jobs/9", "", {}, kCallTimeout);
  ASSERT_TRUE(missing.ok()) << missing.status().ToString();
  EXPECT_EQ(missing->status, 404);
  EXPECT_EQ(missing->body, R"({"error": "no job 9"})");
  EXPECT_EQ(missing->headers["x-request-id"], "abc");
  EXPECT_EQ(missing->headers.count("x-bad"), 0u);
  EXPECT_EQ(missing->headers.count("injected"), 0u);

  auto metrics = HttpCall(Url(*server), "GET", "/metrics", "", {}, kCallTimeout);
  ASSERT_TRUE(metrics.ok()) << metrics.status().ToString();
  EXPECT_EQ(metrics->content_type, "text/plain; version=0.0.4");
  EXPECT_EQ(metrics->body, "hmpmd_up 1\n");
}

TEST_F(HttpServerTest, DroppedReplyOrThrowingHandlerAnswers500) {
  auto server = StartServer(Options(), [](HttpRequest req, HttpReply) {
    if (req.path == "/throw") throw std::runtime_error("boom");
    // Otherwise the reply is dropped without being called.
  });
  auto dropped = HttpCall(Url(*server), "GET", "/drop", "", {}, kCallTimeout);
  ASSERT_TRUE(dropped.ok()) << dropped.status().ToString();
  EXPECT_EQ(dropped->status, 500);
  EXPECT_NE(dropped->body.find("\"error\""), std::string::npos);

  auto thrown = HttpCall(Url(*server), "GET", "/throw", "", {}, kCallTimeout);
  ASSERT_TRUE(thrown.ok()) << thrown.status().ToString();
  EXPECT_EQ(thrown->status, 500);
  EXPECT_NE(thrown->body.find("boom"), std::string::npos);
}

TEST_F(HttpServerTest, BodyOverLimitGets413AndServerKeepsServing) {
  HttpServerOptions o = Options();
  o.max_body_bytes = 1024;
  std::atomic<int> handled{0};
  auto server = StartServer(o, [&](HttpRequest req, HttpReply reply) {
    ++handled;
    EchoHandler()(std::move(req), std::move(reply));
  });
  auto big =
      HttpCall(Url(*server), "POST", "/api/v1/jobs", std::string(8 << 20, 'x'), {}, kCallTimeout);
  ASSERT_TRUE(big.ok()) << big.status().ToString();
  EXPECT_EQ(big->status, 413);
  EXPECT_NE(big->body.find("\"error\""), std::string::npos);
  EXPECT_EQ(handled.load(), 0);

  auto small =
      HttpCall(Url(*server), "POST", "/api/v1/jobs", std::string(1024, 'x'), {}, kCallTimeout);
  ASSERT_TRUE(small.ok()) << small.status().ToString();
  EXPECT_EQ(small->status, 200);
  EXPECT_EQ(handled.load(), 1);
}

TEST_F(HttpServerTest, MalformedRequestGets400AndServerKeepsServing) {
  auto server = StartServer(Options(), EchoHandler());
  RawSocket raw(server->port());
  ASSERT_TRUE(raw.connected());
  ASSERT_TRUE(raw.Send("\x01\x02 garbage\r\n\r\n"));
  std::string got;
  EXPECT_TRUE(raw.ReadToEof(&got));  // the server closes after answering
  EXPECT_EQ(got.rfind("HTTP/1.1 400", 0), 0u) << got;
  EXPECT_NE(got.find("{\"error\": \"bad request"), std::string::npos) << got;

  auto ok = HttpCall(Url(*server), "GET", "/still-here", "", {}, kCallTimeout);
  ASSERT_TRUE(ok.ok()) << ok.status().ToString();
  EXPECT_EQ(ok->status, 200);
}

TEST_F(HttpServerTest, BodyOverLimitGets413NamingTheLimitThenTheConnectionCloses) {
  HttpServerOptions o = Options();
  o.max_body_bytes = size_t{1} << 20;
  o.max_body_flag = "--max-spec-mb";
  std::atomic<int> handled{0};
  auto server = StartServer(o, [&](HttpRequest req, HttpReply reply) {
    ++handled;
    EchoHandler()(std::move(req), std::move(reply));
  });
  const std::string want =
      R"x({"error": "request body exceeds the limit of 1 MiB (1048576 bytes; set by --max-spec-mb)"})x";
  {
    // A keep-alive connection: a good request, then one whose declared
    // length is over the limit, answered before its body is sent.
    RawSocket raw(server->port());
    ASSERT_TRUE(raw.connected());
    std::string got;
    ASSERT_TRUE(raw.Send("GET /one HTTP/1.1\r\nHost: x\r\n\r\n"));
    ASSERT_TRUE(raw.ReadUntil(&got, "\"path\":\"/one\""));
    got.clear();
    ASSERT_TRUE(
        raw.Send("POST /two HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                 "Content-Length: 2097152\r\n\r\n"));
    EXPECT_TRUE(raw.ReadToEof(&got)) << "the connection is closed, not left mid-body: " << got;
    EXPECT_EQ(got.rfind("HTTP/1.1 413", 0), 0u) << got;
    EXPECT_NE(got.find("Connection: close\r\n"), std::string::npos) << got;
    EXPECT_EQ(got.substr(got.find("\r\n\r\n") + 4), want);
  }
  {
    // Chunked: found out while reading the body.
    RawSocket raw(server->port());
    ASSERT_TRUE(raw.connected());
    std::string got;
    ASSERT_TRUE(raw.Send("POST /three HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n"));
    const std::string chunk = "10000\r\n" + std::string(0x10000, 'x') + "\r\n";
    for (int i = 0; i < 17 && raw.Send(chunk); ++i) {
    }
    EXPECT_TRUE(raw.ReadToEof(&got)) << got;
    EXPECT_EQ(got.rfind("HTTP/1.1 413", 0), 0u) << got.substr(0, 200);
    EXPECT_EQ(got.substr(got.find("\r\n\r\n") + 4), want);
  }
  EXPECT_EQ(handled.load(), 1);
  auto ok = HttpCall(Url(*server), "POST", "/four", std::string(1 << 20, 'x'), {}, kCallTimeout);
  ASSERT_TRUE(ok.ok()) << ok.status().ToString();
  EXPECT_EQ(ok->status, 200) << "a body of exactly the limit is taken";
}

TEST_F(HttpServerTest, TransferCodingsOtherThanChunkedAre501AndNeverReachTheHandler) {
  std::atomic<int> handled{0};
  auto server = StartServer(Options(), [&](HttpRequest req, HttpReply reply) {
    ++handled;
    EchoHandler()(std::move(req), std::move(reply));
  });
  // "gzip, chunked" was read as a chunked body of plain bytes.
  for (const char* coding : {"gzip, chunked", "GZIP,chunked", "chunked, chunked;x=1, br"}) {
    RawSocket raw(server->port());
    ASSERT_TRUE(raw.connected());
    std::string got;
    ASSERT_TRUE(raw.Send(std::string("POST /x HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: ") +
                         coding + "\r\n\r\n2\r\n{}\r\n0\r\n\r\n"));
    EXPECT_TRUE(raw.ReadToEof(&got)) << coding << ": " << got;
    EXPECT_EQ(got.rfind("HTTP/1.1 501", 0), 0u) << coding << ": " << got;
    EXPECT_NE(got.find("is not supported (only chunked)"), std::string::npos) << got;
  }
  EXPECT_EQ(handled.load(), 0);
  // Plain chunked still works.
  RawSocket raw(server->port());
  ASSERT_TRUE(raw.connected());
  std::string got;
  ASSERT_TRUE(
      raw.Send("POST /y HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n"
               "2\r\n{}\r\n0\r\n\r\n"));
  ASSERT_TRUE(raw.ReadUntil(&got, "\"path\":\"/y\"")) << got;
  EXPECT_EQ(handled.load(), 1);
}

TEST_F(HttpServerTest, AbsoluteFormTargetsAreRoutedByTheirPathAndQuery) {
  auto server = StartServer(Options(), EchoHandler());
  RawSocket raw(server->port());
  ASSERT_TRUE(raw.connected());
  const std::string host = "127.0.0.1:" + std::to_string(server->port());
  std::string got;
  ASSERT_TRUE(raw.Send("GET http://" + host + "/api/v1/jobs?limit=3 HTTP/1.1\r\nHost: " + host +
                       "\r\n\r\n"));
  ASSERT_TRUE(raw.ReadUntil(&got, "\"path\":\"/api/v1/jobs\",\"query\":\"limit=3\"")) << got;
  got.clear();
  ASSERT_TRUE(raw.Send("DELETE HTTPS://other.example/api/v1/jobs/%37 HTTP/1.1\r\nHost: x\r\n\r\n"));
  ASSERT_TRUE(raw.ReadUntil(&got, R"({"method":"DELETE","path":"/api/v1/jobs/7","query":"")"))
      << got;
}

TEST_F(HttpServerTest, PathsArePercentDecodedAndBadEscapesGet400OnTheSameConnection) {
  std::atomic<int> handled{0};
  auto server = StartServer(Options(), [&](HttpRequest req, HttpReply reply) {
    ++handled;
    EchoHandler()(std::move(req), std::move(reply));
  });
  auto one = HttpCall(Url(*server), "GET", "/api/v1/jobs/%31?state=d%6Fne", "", {}, kCallTimeout);
  ASSERT_TRUE(one.ok()) << one.status().ToString();
  EXPECT_EQ(one->body,
            R"({"method":"GET","path":"/api/v1/jobs/1","query":"state=d%6Fne","body":""})");

  RawSocket raw(server->port());
  ASSERT_TRUE(raw.connected());
  const std::pair<const char*, const char*> cases[] = {
      {"/api/v1/jobs/%zz", "bad percent-encoding '%zz' in the path"},
      {"/api/v1/jobs/%4", "bad percent-encoding '%4' in the path"},
      {"/api/v1/jobs%2F1", "the path has an encoded '/' (%2F)"},
      {"/api/v1/jobs/1%00", "the path has an encoded control character (%00)"},
      {"api/v1/jobs", "expected a path starting with '/' or an http:// URL"},
  };
  for (const auto& [target, why] : cases) {
    std::string got;
    ASSERT_TRUE(raw.Send(std::string("GET ") + target + " HTTP/1.1\r\nHost: x\r\n\r\n"));
    const std::string body =
        std::string(R"({"error": "request target ')") + target + "': " + why + "\"}";
    ASSERT_TRUE(raw.ReadUntil(&got, body)) << target << ": " << got;
    EXPECT_EQ(got.rfind("HTTP/1.1 400", 0), 0u) << got;
  }
  std::string got;
  ASSERT_TRUE(raw.Send("GET /after HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"));
  EXPECT_TRUE(raw.ReadToEof(&got));
  EXPECT_NE(got.find("\"path\":\"/after\""), std::string::npos) << "still usable: " << got;
  EXPECT_EQ(handled.load(), 2);
}

TEST_F(HttpServerTest, MethodsTheServerDoesNotImplementGet501) {
  std::atomic<int> handled{0};
  auto server = StartServer(Options(), [&](HttpRequest req, HttpReply reply) {
    ++handled;
    EchoHandler()(std::move(req), std::move(reply));
  });
  RawSocket raw(server->port());
  ASSERT_TRUE(raw.connected());
  for (const char* line : {"BREW /pot", "CONNECT example.com:443", "TRACE /api/v1/jobs",
                           "get /api/v1/jobs", "PROPFIND /%zz"}) {
    const std::string method(line, std::string_view(line).find(' '));
    std::string got;
    ASSERT_TRUE(raw.Send(std::string(line) + " HTTP/1.1\r\nHost: x\r\n\r\n"));
    ASSERT_TRUE(raw.ReadUntil(&got, "{\"error\": \"method " + method + " is not implemented\"}"))
        << line << ": " << got;
    EXPECT_EQ(got.rfind("HTTP/1.1 501", 0), 0u) << got;
  }
  EXPECT_EQ(handled.load(), 0);
  // The methods the server implements reach the handler, which judges them.
  for (const char* method : {"PUT", "PATCH", "OPTIONS"}) {
    auto r = HttpCall(Url(*server), method, "/api/v1/jobs", "", {}, kCallTimeout);
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    EXPECT_EQ(r->status, 200) << method;
  }
  EXPECT_EQ(handled.load(), 3);
}

TEST_F(HttpServerTest, KeepAliveServesSeveralRequestsAndHonoursClose) {
  auto server = StartServer(Options(), EchoHandler());
  RawSocket raw(server->port());
  ASSERT_TRUE(raw.connected());
  std::string got;
  ASSERT_TRUE(raw.Send("GET /one HTTP/1.1\r\nHost: x\r\n\r\n"));
  ASSERT_TRUE(raw.ReadUntil(&got, "\"path\":\"/one\""));
  EXPECT_EQ(got.find("Connection: close"), std::string::npos) << got;
  ASSERT_TRUE(raw.Send("GET /two HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"));
  EXPECT_TRUE(raw.ReadToEof(&got));
  EXPECT_NE(got.find("\"path\":\"/two\""), std::string::npos) << got;
  EXPECT_NE(got.find("Connection: close"), std::string::npos) << got;
}

TEST_F(HttpServerTest, ExpectContinueAndHeadAreHonoured) {
  auto server = StartServer(Options(), EchoHandler());
  RawSocket raw(server->port());
  ASSERT_TRUE(raw.connected());
  std::string got;
  ASSERT_TRUE(raw.Send(
      "POST /jobs HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\nExpect: 100-continue\r\n\r\n"));
  ASSERT_TRUE(raw.ReadUntil(&got, "HTTP/1.1 100 Continue\r\n\r\n")) << got;
  ASSERT_TRUE(raw.Send("{}"));
  ASSERT_TRUE(raw.ReadUntil(&got, "\"body\":\"{}\"")) << got;

  // HEAD: the length the GET would have, then nothing.
  got.clear();
  ASSERT_TRUE(raw.Send("HEAD /x HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"));
  EXPECT_TRUE(raw.ReadToEof(&got));
  std::string get_body = R"({"method":"HEAD","path":"/x","query":"","body":""})";
  EXPECT_NE(got.find("Content-Length: " + std::to_string(get_body.size()) + "\r\n"),
            std::string::npos)
      << got;
  EXPECT_EQ(got.size(), got.find("\r\n\r\n") + 4) << got;
}

TEST_F(HttpServerTest, ConnectionsOverTheLimitGet503) {
  HttpServerOptions o = Options();
  o.max_connections = 1;
  auto server = StartServer(o, EchoHandler());
  {
    RawSocket idle(server->port());
    ASSERT_TRUE(idle.connected());
    ASSERT_TRUE(WaitFor([&] { return server->connection_count() == 1; }));
    auto refused = HttpCall(Url(*server), "GET", "/", "", {}, kCallTimeout);
    ASSERT_TRUE(refused.ok()) << refused.status().ToString();
    EXPECT_EQ(refused->status, 503);
  }
  ASSERT_TRUE(WaitFor([&] { return server->connection_count() == 0; }));
  auto ok = HttpCall(Url(*server), "GET", "/", "", {}, kCallTimeout);
  ASSERT_TRUE(ok.ok()) << ok.status().ToString();
  EXPECT_EQ(ok->status, 200);
}

TEST_F(HttpServerTest, StartReportsBadOrBusyAddresses) {
  auto first = StartServer(Options(), EchoHandler());
  HttpServerOptions o = Options();
  o.bind = "127.0.0.1:" + std::to_string(first->port());
  HttpServer busy(o, EchoHandler());
  Status st = busy.Start();
  EXPECT_EQ(st.code(), StatusCode::kUnavailable);
  EXPECT_NE(st.message().find(o.bind), std::string::npos) << st.ToString();

  for (std::string bind : {"nonsense", "127.0.0.1:99999", "127.0.0.1:", "256.1.1.1.1:80"}) {
    o.bind = bind;
    HttpServer bad(o, EchoHandler());
    Status bad_st = bad.Start();
    EXPECT_EQ(bad_st.code(), StatusCode::kInvalidArgument) << bind << ": " << bad_st.ToString();
    EXPECT_NE(bad_st.message().find(bind), std::string::npos) << bad_st.ToString();
  }
}

TEST_F(HttpServerTest, StopIsIdempotentAndStartIsOnceOnly) {
  auto server = StartServer(Options(), EchoHandler());
  EXPECT_FALSE(server->Start().ok());
  server->Stop();
  server->Stop();
  EXPECT_FALSE(server->Start().ok());
  HttpServer never_started(Options(), EchoHandler());
  never_started.Stop();
}

TEST_F(HttpServerTest, ReplyAfterStopAndAfterDestructionIsHarmless) {
  std::mutex mu;
  std::vector<HttpReply> held;
  auto server = StartServer(Options(), [&](HttpRequest, HttpReply reply) {
    std::lock_guard<std::mutex> lock(mu);
    held.push_back(std::move(reply));
  });
  Result<HttpResponse> result = Status::Internal("not run");
  std::thread client(
      [&] { result = HttpCall(Url(*server), "GET", "/slow", "", {}, kCallTimeout); });
  Finally join([&] {
    if (server) server->Stop();
    if (client.joinable()) client.join();
  });
  ASSERT_TRUE(WaitFor([&] {
    std::lock_guard<std::mutex> lock(mu);
    return held.size() == 1;
  }));
  auto t0 = Clock::now();
  server->Stop();
  client.join();
  EXPECT_LT(Clock::now() - t0, 3s);
  EXPECT_FALSE(result.ok());
  held[0](HttpResponse{});  // after Stop: dropped
  server.reset();
  std::lock_guard<std::mutex> lock(mu);
  held[0](HttpResponse{});  // after destruction: dropped
  held.clear();             // the last owner of the connection lets go here
}

TEST_F(HttpServerTest, SseSendsHelloThenBroadcastsAndEndsOnStop) {
  auto server = StartServer(Options(), EchoHandler());
  server->SetSseHello([] { return std::string("event: hello\ndata: {\"jobs\":[]}\n\n"); });
  std::mutex mu;
  std::vector<std::pair<std::string, std::string>> events;
  Status stream_status;
  std::thread client([&] {
    stream_status = StreamSse(
        Url(*server), kHttpEventsPath, {},
        [&](std::string_view event, std::string_view data) {
          std::lock_guard<std::mutex> lock(mu);
          events.emplace_back(event, data);
          return true;
        },
        10s);
  });
  Finally join([&] {
    server->Stop();
    if (client.joinable()) client.join();
  });
  auto count = [&] {
    std::lock_guard<std::mutex> lock(mu);
    return events.size();
  };
  ASSERT_TRUE(WaitFor([&] { return count() == 1; }));
  EXPECT_EQ(server->sse_client_count(), 1u);
  server->Broadcast("event: task\ndata: {\"id\":1}\n\n");
  ASSERT_TRUE(WaitFor([&] { return count() == 2; }));

  auto t0 = Clock::now();
  server->Stop();
  client.join();
  EXPECT_LT(Clock::now() - t0, 3s);
  EXPECT_EQ(stream_status.code(), StatusCode::kUnavailable) << stream_status.ToString();
  EXPECT_EQ(server->sse_client_count(), 0u);
  ASSERT_EQ(events.size(), 2u);
  EXPECT_EQ(events[0], std::make_pair(std::string("hello"), std::string("{\"jobs\":[]}")));
  EXPECT_EQ(events[1], std::make_pair(std::string("task"), std::string("{\"id\":1}")));
}

TEST_F(HttpServerTest, SseHeadAndKeepaliveComments) {
  HttpServerOptions o = Options();
  o.sse_keepalive = 20ms;
  auto server = StartServer(o, EchoHandler());
  RawSocket raw(server->port());
  ASSERT_TRUE(raw.connected());
  ASSERT_TRUE(raw.Send("GET /api/v1/events HTTP/1.1\r\nHost: x\r\n\r\n"));
  std::string got;
  ASSERT_TRUE(raw.ReadUntil(&got, "\r\n\r\n: keepalive\n\n")) << got;
  EXPECT_EQ(got.rfind("HTTP/1.1 200 OK\r\n", 0), 0u);
  EXPECT_NE(got.find("Content-Type: text/event-stream\r\n"), std::string::npos);
  EXPECT_NE(got.find("Cache-Control: no-cache\r\n"), std::string::npos);
  EXPECT_EQ(got.find("Content-Length"), std::string::npos);
}

TEST_F(HttpServerTest, SseClientThatStopsReadingIsDisconnected) {
  HttpServerOptions o = Options();
  o.sse_max_queued_chunks = 8;
  auto server = StartServer(o, EchoHandler());
  RawSocket slow(server->port(), /*rcvbuf=*/4096);
  ASSERT_TRUE(slow.connected());
  ASSERT_TRUE(slow.Send("GET /api/v1/events HTTP/1.1\r\nHost: x\r\n\r\n"));
  std::string head;
  ASSERT_TRUE(slow.ReadUntil(&head, "\r\n\r\n"));
  ASSERT_TRUE(WaitFor([&] { return server->sse_client_count() == 1; }));
  // The client reads nothing more; the server must give up on it instead of
  // queueing without bound.
  const std::string chunk = "data: " + std::string(64 * 1024, 'x') + "\n\n";
  EXPECT_TRUE(WaitFor([&] {
    server->Broadcast(chunk);
    return server->sse_client_count() == 0;
  }));
  auto ok = HttpCall(Url(*server), "GET", "/", "", {}, kCallTimeout);
  ASSERT_TRUE(ok.ok()) << ok.status().ToString();
  EXPECT_EQ(ok->status, 200);
}

TEST_F(HttpServerTest, FiftyConcurrentClientsOfTwentyRequestsAllSucceed) {
  auto server = StartServer(Options(), EchoHandler());
  HttpUrl url = Url(*server);
  std::atomic<int> good{0};
  std::vector<std::thread> clients;
  for (int c = 0; c < 50; ++c) {
    clients.emplace_back([&, c] {
      for (int i = 0; i < 20; ++i) {
        std::string body = std::to_string(c) + "-" + std::to_string(i);
        auto res = HttpCall(url, "POST", "/echo", body, {}, kCallTimeout);
        if (res.ok() && res->status == 200 &&
            res->body.find("\"body\":\"" + body + "\"") != std::string::npos) {
          ++good;
        }
      }
    });
  }
  for (auto& t : clients) t.join();
  EXPECT_EQ(good.load(), 50 * 20);
}

}  // namespace
}  // namespace hmpmd
