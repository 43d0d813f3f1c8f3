// RestApiTest: a cluster of two real workers whose service serves the REST
// API, the event feed and an HTTP server on a free loopback port, wired as
// `hmpmd controller --token-file` wires them, plus helpers to call it.
// Shared by the REST API tests. Thread-safety: the helpers may be called
// from several test threads at once (each call opens its own connection).
#pragma once

#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <fstream>
#include <functional>
#include <future>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>

#include "cluster_fixture.h"
#include "hmpmd/api/service.h"
#include "hmpmd/http/http_client.h"

namespace hmpmd::testing {

using json = nlohmann::json;
constexpr char kToken[] = "s3cret";

class RestApiTest : public ClusterTest {
 protected:
  void SetUp() override {
    // One token guards the workers' registration and the API's mutating
    // calls, as --token-file does.
    token_file_ = ::testing::TempDir() + "hmpmd_rest_token_" + std::to_string(getpid());
    std::ofstream(token_file_) << kToken;
    extra_worker_args_ = {"--token-file", token_file_};
    ControllerOptions controller;
    controller.token = kToken;
    controller.store = store_;
    service_options_.serve_http = true;
    service_options_.http.bind = "127.0.0.1:0";
    service_options_.http_cpu_percent = 0;  // no cap: these tests time answers, not the budget
    ASSERT_NO_FATAL_FAILURE(StartCluster(2, "cube=1,vector=1", controller));
    api_ = cluster_->service().api();
    feed_ = cluster_->service().feed();
    server_ = cluster_->service().http_server();
    url_ = *ParseHttpUrl("127.0.0.1:" + std::to_string(cluster_->service().http_port()));
  }
  void TearDown() override {
    ClusterTest::TearDown();
    std::remove(token_file_.c_str());
  }

  HttpResponse Call(const std::string& method, const std::string& target,
                    const std::string& body = "", const std::string& token = kToken) {
    std::map<std::string, std::string> h;
    if (!token.empty()) h["Authorization"] = "Bearer " + token;
    // Generous: under ASan on a loaded 2-core host a 20,000-task submit
    // took 10 s.
    auto r = HttpCall(url_, method, target, body, h, std::chrono::seconds(30));
    EXPECT_TRUE(r.ok()) << r.status().ToString();
    return r.ok() ? *r : HttpResponse{599, "", "", {}};
  }
  // The headers of a call with the token (reads need it too; the event
  // stream's StreamSse takes them).
  static std::map<std::string, std::string> Bearer() {
    return {{"Authorization", std::string("Bearer ") + kToken}};
  }
  json GetJson(const std::string& target, int want = 200) {
    HttpResponse r = Call("GET", target);
    EXPECT_EQ(r.status, want) << target << ": " << r.body;
    return json::parse(r.body, nullptr, false);
  }
  uint64_t SubmitOk(const std::string& spec) {
    HttpResponse r = Call("POST", "/api/v1/jobs", spec);
    EXPECT_EQ(r.status, 201) << r.body;
    EXPECT_EQ(r.headers["location"].rfind("/api/v1/jobs/", 0), 0u);
    return json::parse(r.body)["id"].get<uint64_t>();
  }
  // Polls the job (bounded) until `pred` holds on its summary.
  json WaitJob(uint64_t id, const std::function<bool(const json&)>& pred) {
    json j;
    for (int i = 0; i < 600; ++i) {
      j = GetJson("/api/v1/jobs/" + std::to_string(id));
      if (pred(j)) return j;
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    ADD_FAILURE() << "job " << id << " never reached the state wanted: " << j.dump();
    return j;
  }
  static std::string Chain(int n, const std::string& kernel = "noop") {
    json tasks = json::array();
    for (int i = 0; i < n; ++i) {
      json t = {{"id", "t" + std::to_string(i)}, {"kernel", kernel}};
      if (i % 3 != 0) t["inputs"] = {"t" + std::to_string(i - 1)};
      if (i % 2) t["core"] = "vector";
      tasks.push_back(t);
    }
    return json{{"name", "chain"}, {"tasks", tasks}}.dump();
  }

  // The cluster's service's HTTP side.
  RestApi* api_ = nullptr;
  EventFeed* feed_ = nullptr;
  HttpServer* server_ = nullptr;
  HttpUrl url_;
  std::string token_file_;
  // The controller's job store; null (the default): none. Set before SetUp.
  std::shared_ptr<JobStore> store_;

  // Holds the controller loop busy until Release() or the end of scope
  // (bounded to 30 s, should the test fail): reads served meanwhile come
  // from the HTTP side alone.
  class LoopBlocker {
   public:
    explicit LoopBlocker(Controller& controller) {
      std::promise<void> blocked;
      std::shared_future<void> released = release_.get_future().share();
      controller.Post([&blocked, released] {
        blocked.set_value();
        released.wait_for(std::chrono::seconds(30));
      });
      blocked.get_future().wait();
    }
    ~LoopBlocker() { Release(); }
    void Release() {
      if (!done_) release_.set_value();
      done_ = true;
    }

   private:
    std::promise<void> release_;
    bool done_ = false;
  };
};

}  // namespace hmpmd::testing
