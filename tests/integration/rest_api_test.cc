// The REST API over real HTTP against a controller with real workers: every
// route, its status codes and error bodies, paging and waiting reasons of
// the task table, the SSE event feed, /metrics, the trace, and the served
// dashboard and OpenAPI document.
#include "hmpmd/api/rest_api.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <future>
#include <nlohmann/json.hpp>
#include <set>
#include <thread>

#include "../raw_socket.h"
#include "hmpmd/worker/fetch.h"
#include "rest_api_fixture.h"

namespace hmpmd::testing {
namespace {

TEST_F(RestApiTest, PoolListsWorkersAndTheirCores) {
  json p = GetJson("/api/v1/pool");
  EXPECT_EQ(p["alive_devices"], 2);
  ASSERT_EQ(p["devices"].size(), 2u);
  std::set<uint64_t> ids;
  for (const auto& d : p["devices"]) {
    EXPECT_TRUE(d["alive"].get<bool>());
    ASSERT_EQ(d["cores"].size(), 2u);
    for (const auto& c : d["cores"]) ids.insert(c["id"].get<uint64_t>());
  }
  EXPECT_EQ(ids.size(), 4u);
  EXPECT_EQ(Call("PUT", "/api/v1/pool").status, 405);
}

// Every answer names the controller's job store (Hmpmd-Store): job ids
// restart at 1 on a fresh one, and a client following a job by its id
// (`submit --wait`) must be able to tell.
TEST_F(RestApiTest, EveryAnswerNamesTheJobStore) {
  const std::string store = std::to_string(cluster_->controller().epoch());
  ASSERT_NE(store, "0");
  for (const char* target : {"/api/v1/pool", "/api/v1/jobs", "/api/v1/jobs/999", "/nowhere"}) {
    HttpResponse r = Call("GET", target);
    auto it = r.headers.find("hmpmd-store");
    ASSERT_NE(it, r.headers.end()) << target;
    EXPECT_EQ(it->second, store) << target;
  }
  HttpResponse r = Call("POST", "/api/v1/jobs", Chain(1));
  EXPECT_EQ(r.status, 201) << r.body;
  EXPECT_EQ(r.headers["hmpmd-store"], store);
}

TEST_F(RestApiTest, SubmitRunsTheJobAndEveryJobRouteAnswers) {
  uint64_t id = SubmitOk(Chain(12));
  const std::string base = "/api/v1/jobs/" + std::to_string(id);
  json j = WaitJob(id, [](const json& s) { return s["state"] == "succeeded"; });
  EXPECT_EQ(j["done"], 12);
  EXPECT_TRUE(j["masking_ratio"].is_number());
  json list = GetJson("/api/v1/jobs");
  ASSERT_EQ(list["jobs"].size(), 1u);
  EXPECT_EQ(list["jobs"][0]["id"], id);
  // The list gives an ended job's step time too (it said null).
  EXPECT_TRUE(list["jobs"][0]["makespan_s"].is_number()) << list.dump();
  EXPECT_EQ(list["jobs"][0]["makespan_s"], j["makespan_s"]);
  json trace = GetJson(base + "/trace");
  int complete = 0;
  for (const auto& e : trace["traceEvents"]) {
    if (e["ph"] == "X") {
      ++complete;
      EXPECT_EQ(e["args"]["job"], id);
    }
  }
  EXPECT_EQ(complete, 12);
  json dag = GetJson(base + "/dag");
  ASSERT_EQ(dag["submodels"].size(), 1u);
  EXPECT_EQ(dag["submodels"][0]["tasks"], 12);
  // Cancelling an ended job conflicts and changes nothing.
  HttpResponse del = Call("DELETE", base);
  EXPECT_EQ(del.status, 409) << del.body;
  EXPECT_EQ(GetJson(base)["state"], "succeeded");
}

TEST_F(RestApiTest, TasksArePagedAndFiltered) {
  uint64_t id = SubmitOk(Chain(30));
  WaitJob(id, [](const json& s) { return s["state"] == "succeeded"; });
  const std::string base = "/api/v1/jobs/" + std::to_string(id) + "/tasks";
  json all = GetJson(base);
  EXPECT_EQ(all["total"], 30);
  EXPECT_EQ(all["count"], 30);
  json page = GetJson(base + "?offset=25&limit=10");
  EXPECT_EQ(page["count"], 5);
  EXPECT_EQ(page["tasks"][0]["id"], "t25");
  EXPECT_TRUE(page["tasks"][0]["start_us"].is_number());
  EXPECT_EQ(GetJson(base + "?state=done&limit=3")["total"], 30);
  EXPECT_EQ(GetJson(base + "?state=ready")["total"], 0);
  for (const char* bad : {"?limit=0", "?limit=x", "?offset=-1", "?state=zzz", "?color=red"}) {
    json e = GetJson(base + bad, 400);
    ASSERT_TRUE(e.contains("error")) << bad;
    EXPECT_EQ(e["error"].get<std::string>().find('\n'), std::string::npos);
  }
}

TEST_F(RestApiTest, WaitingTasksSayWhatTheyWaitFor) {
  // a0 sleeps long; b0 needs it; c0..c3 want the two cube cores a0 and
  // b-less work hold.
  json spec = {{"name", "waits"}, {"tasks", json::array()}};
  spec["tasks"].push_back({{"id", "a0"},
                           {"kernel", "sleep"},
                           {"args", {{"us", 3000000}}},
                           {"cost", {{"flops", 1e15}}}});
  // b0 on the vector core: on a0's cube core it would be dispatched early,
  // queued behind a0, and not wait at the controller.
  spec["tasks"].push_back(
      {{"id", "b0"}, {"kernel", "noop"}, {"core", "vector"}, {"inputs", {"a0"}}});
  for (int i = 0; i < 4; ++i) {
    spec["tasks"].push_back({{"id", "c" + std::to_string(i)},
                             {"kernel", "sleep"},
                             {"args", {{"us", 3000000}}},
                             {"cost", {{"flops", 1e15}}}});
  }
  uint64_t id = SubmitOk(spec.dump());
  const std::string base = "/api/v1/jobs/" + std::to_string(id);
  WaitJob(id, [](const json& s) { return s["running"].get<int>() >= 1; });
  json blocked = GetJson(base + "/tasks?state=blocked");
  ASSERT_EQ(blocked["total"], 1) << blocked.dump();
  const json& b = blocked["tasks"][0];
  EXPECT_EQ(b["id"], "b0");
  EXPECT_EQ(b["waiting"]["for"], "inputs");
  EXPECT_EQ(b["waiting"]["inputs"], json::array({"a0"}));
  json ready = GetJson(base + "/tasks?state=ready");
  for (const auto& t : ready["tasks"]) {
    EXPECT_EQ(t["waiting"]["for"], "core") << t.dump();
    EXPECT_EQ(t["waiting"]["core"], "cube");
  }
  // Two cube cores, five long cube tasks: some must wait for a core, unless
  // the controller queued them on the cores (estimate under the lookahead).
  json running = GetJson(base + "/tasks?state=running");
  json queued = GetJson(base + "/tasks?state=queued");
  EXPECT_EQ(ready["total"].get<int>() + running["total"].get<int>() + queued["total"].get<int>(),
            5);
  // The running step's ratios are exported while it runs.
  HttpResponse m = Call("GET", "/metrics");
  EXPECT_NE(m.body.find("hmpmd_step_bubble_ratio{job=\"" + std::to_string(id) + "\""),
            std::string::npos);
  HttpResponse del = Call("DELETE", base);
  EXPECT_EQ(del.status, 200) << del.body;
  EXPECT_EQ(json::parse(del.body)["state"], "cancelled");
  // Ended with no run done: no step time anywhere (the job's own summary
  // gave 0.0 with every metric while the list and the reply gave null).
  EXPECT_TRUE(json::parse(del.body)["makespan_s"].is_null()) << del.body;
  json ended = GetJson(base);
  EXPECT_TRUE(ended["makespan_s"].is_null()) << ended.dump();
  EXPECT_FALSE(ended.contains("masking_ratio")) << ended.dump();
}

TEST_F(RestApiTest, TasksDispatchedEarlyWaitForTheirInputsNotForACore) {
  // b0..b7 need a0, all on cube cores: early dispatch makes them ready at
  // once (queued behind a0 on its core, or parked until there is room).
  // They said "ready, waiting for a free cube core" while cores sat idle.
  json spec = {{"name", "early"}, {"tasks", json::array()}};
  spec["tasks"].push_back({{"id", "a0"}, {"kernel", "sleep"}, {"args", {{"us", 3000000}}}});
  for (int i = 0; i < 8; ++i) {
    spec["tasks"].push_back({{"id", "b" + std::to_string(i)},
                             {"kernel", "sleep"},
                             {"args", {{"us", 1000}}},
                             {"inputs", {"a0"}}});
  }
  uint64_t id = SubmitOk(spec.dump());
  const std::string base = "/api/v1/jobs/" + std::to_string(id);
  WaitJob(id, [](const json& s) { return s["running"].get<int>() >= 1; });
  json tasks = GetJson(base + "/tasks");
  ASSERT_EQ(tasks["tasks"][0]["state"], "running") << tasks.dump();
  int blocked = 0;
  for (const json& t : tasks["tasks"]) {
    if (t["id"] == "a0") continue;
    if (t["state"] == "queued") continue;  // behind a0 on its lane, a0 done
    EXPECT_EQ(t["state"], "blocked") << t.dump();
    EXPECT_EQ(t["waiting"]["for"], "inputs") << t.dump();
    EXPECT_EQ(t["waiting"]["inputs"], json::array({"a0"})) << t.dump();
    ++blocked;
  }
  EXPECT_EQ(GetJson(base + "/tasks?state=blocked")["total"], blocked);
  EXPECT_EQ(GetJson(base + "/tasks?state=ready")["total"], 0);
  const json dag = GetJson(base + "/dag");  // the loop reads into it: keep it alive
  for (const json& sub : dag["submodels"]) {
    EXPECT_EQ(sub["ready"], 0) << sub.dump();
  }
  EXPECT_EQ(Call("DELETE", base).status, 200);
}

// Tasks sent to a lane already busy wait there: `queued`, not `running`, in
// the task table, its filter, the job's counts and the DAG.
TEST_F(RestApiTest, ATaskBehindAnotherOnItsLaneIsQueuedNotRunning) {
  // Estimated at almost nothing, four long tasks all go out at once to the
  // two cube lanes (lookahead): two run, two wait behind them.
  json spec = {{"name", "lanes"}, {"tasks", json::array()}};
  for (int i = 0; i < 4; ++i) {
    spec["tasks"].push_back({{"id", "s" + std::to_string(i)},
                             {"kernel", "sleep"},
                             {"args", {{"us", 20000000}}},
                             {"cost", {{"flops", 1}}}});
  }
  uint64_t id = SubmitOk(spec.dump());
  const std::string base = "/api/v1/jobs/" + std::to_string(id);
  json job = WaitJob(
      id, [](const json& s) { return s["running"].get<int>() + s["queued"].get<int>() == 4; });
  EXPECT_EQ(job["running"], 2) << job.dump();
  EXPECT_EQ(job["queued"], 2) << job.dump();
  EXPECT_EQ(GetJson(base + "/tasks?state=running")["total"], 2);
  json queued = GetJson(base + "/tasks?state=queued");
  ASSERT_EQ(queued["total"], 2) << queued.dump();
  EXPECT_TRUE(queued["tasks"][0].contains("core")) << "placed, on a worker";
  const json dag = GetJson(base + "/dag");
  ASSERT_EQ(dag["submodels"].size(), 1u) << dag.dump();
  EXPECT_EQ(dag["submodels"][0]["running"], 2) << dag.dump();
  EXPECT_EQ(dag["submodels"][0]["queued"], 2) << dag.dump();
  EXPECT_EQ(Call("DELETE", base).status, 200);
}

TEST_F(RestApiTest, ErrorsAreJsonWithTheExpectedStatus) {
  const std::string spec = Chain(2);
  HttpResponse r = Call("POST", "/api/v1/jobs", spec, "");
  EXPECT_EQ(r.status, 401);
  r = Call("POST", "/api/v1/jobs", spec, "wrong");
  EXPECT_EQ(r.status, 403);
  EXPECT_EQ(Call("DELETE", "/api/v1/jobs/1", "", "").status, 401);
  // Refused requests changed nothing.
  EXPECT_EQ(GetJson("/api/v1/jobs")["jobs"].size(), 0u);

  auto bad = [&](const std::string& body, const std::string& needle) {
    HttpResponse b = Call("POST", "/api/v1/jobs", body);
    EXPECT_EQ(b.status, 400) << body << " -> " << b.body;
    std::string msg = json::parse(b.body)["error"];
    EXPECT_NE(msg.find(needle), std::string::npos) << msg;
    EXPECT_EQ(msg.find('\n'), std::string::npos);
  };
  bad("{", "line");
  bad(R"({"tasks":[{"id":"a","kernel":"nope"}]})", "nope");
  bad(R"({"tasks":[{"id":"a","kernel":"noop","inputs":["zz"]}]})", "zz");
  bad(R"({"tasks":[{"id":"a","kernel":"noop","colour":1}]})", "colour");
  EXPECT_EQ(GetJson("/api/v1/jobs")["jobs"].size(), 0u);

  for (const char* path : {"/api/v1/jobs/99", "/api/v1/jobs/99/tasks", "/api/v1/jobs/99/trace",
                           "/api/v1/jobs/99/dag", "/api/v1/nope", "/nope.html"}) {
    json e = GetJson(path, 404);
    EXPECT_TRUE(e.contains("error")) << path;
  }
  EXPECT_EQ(Call("DELETE", "/api/v1/jobs/99").status, 404);
  EXPECT_EQ(Call("PUT", "/api/v1/jobs").status, 405);
  EXPECT_EQ(Call("POST", "/metrics").status, 405);
}

TEST_F(RestApiTest, ASpecMustBeSentAsJson) {
  auto post = [&](const std::string& type) {
    auto r = HttpCall(url_, "POST", "/api/v1/jobs", Chain(2),
                      {{"Authorization", std::string("Bearer ") + kToken}, {"Content-Type", type}},
                      std::chrono::seconds(10));
    EXPECT_TRUE(r.ok()) << r.status().ToString();
    return r.ok() ? *r : HttpResponse{599, "", "", {}};
  };
  for (const char* type : {"text/plain", "application/x-www-form-urlencoded", "", "json",
                           "application/json; charset=latin1"}) {
    HttpResponse r = post(type);
    EXPECT_EQ(r.status, 415) << type << " -> " << r.body;
    std::string msg = json::parse(r.body)["error"];
    EXPECT_EQ(msg.rfind("Content-Type: ", 0), 0u) << msg;
    EXPECT_EQ(msg.find('\n'), std::string::npos) << msg;
  }
  EXPECT_EQ(GetJson("/api/v1/jobs")["jobs"].size(), 0u) << "a refused spec is not submitted";
  EXPECT_EQ(post("application/json; charset=utf-8").status, 201);
  EXPECT_EQ(post("Application/JSON").status, 201);
  EXPECT_EQ(GetJson("/api/v1/jobs")["jobs"].size(), 2u);
}

// The workers serve only fetches that carry the controller's data token;
// REST hands it out with a job's outputs to callers it would let submit
// (the Bearer token), never to anyone who can merely read.
TEST_F(RestApiTest, OutputsGiveTheDataTokenOnlyToAuthorisedCallers) {
  const uint64_t id = SubmitOk(
      R"({"name":"kept","tasks":[{"id":"a","kernel":"scale","args":{"n":16,"factor":2}}]})");
  WaitJob(id, [](const json& s) { return s["state"] == "succeeded"; });
  const std::string target = "/api/v1/jobs/" + std::to_string(id) + "/outputs";
  const json outs = GetJson(target);
  ASSERT_EQ(outs["outputs"].size(), 1u) << outs.dump();
  ASSERT_TRUE(outs["data_token"].is_string()) << outs.dump();
  // The job's own token, not the cluster's.
  EXPECT_EQ(outs["data_token"].get<std::string>(),
            DataTokenHex(JobDataToken(data_token(), static_cast<JobId>(id))));
  // The token works: the output is fetched straight from its worker.
  Result<DataToken> token = ParseDataToken(outs["data_token"].get<std::string>());
  ASSERT_TRUE(token.ok()) << token.status().ToString();
  auto got = worker::FetchOutputs(outs["outputs"][0]["endpoint"].get<std::string>(), *token,
                                  static_cast<JobId>(id), outs["outputs"][0]["run"].get<uint32_t>(),
                                  10000);
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  EXPECT_EQ((*got)[0].data.size(), 16 * sizeof(float));
  // It opens no other job's outputs.
  const uint64_t other = SubmitOk(
      R"({"name":"other","tasks":[{"id":"a","kernel":"scale","args":{"n":16,"factor":3}}]})");
  WaitJob(other, [](const json& s) { return s["state"] == "succeeded"; });
  const json theirs = GetJson("/api/v1/jobs/" + std::to_string(other) + "/outputs");
  ASSERT_EQ(theirs["outputs"].size(), 1u) << theirs.dump();
  auto refused = worker::FetchOutputs(theirs["outputs"][0]["endpoint"].get<std::string>(), *token,
                                      static_cast<JobId>(other),
                                      theirs["outputs"][0]["run"].get<uint32_t>(), 10000);
  EXPECT_EQ(refused.status().code(), StatusCode::kPermissionDenied) << refused.status().ToString();
  // Without the token, or with a wrong one: nothing (with --public-read,
  // where outputs are but not the token: AccessControlTest).
  EXPECT_EQ(Call("GET", target, "", "").status, 401);
  EXPECT_EQ(Call("GET", target, "", "wrong").status, 403);
}

TEST_F(RestApiTest, QueryParametersARouteDoesNotTakeAreRefusedNamingThem) {
  uint64_t id = SubmitOk(Chain(3));
  WaitJob(id, [](const json& s) { return s["state"] == "succeeded"; });
  const std::string job = "/api/v1/jobs/" + std::to_string(id);
  auto refused = [&](const std::string& method, const std::string& target,
                     const std::string& want) {
    HttpResponse r = Call(method, target);
    EXPECT_EQ(r.status, 400) << target << " -> " << r.body;
    json e = json::parse(r.body, nullptr, false);
    EXPECT_EQ(e.value("error", ""), want) << target;
  };
  refused("GET", "/api/v1/jobs?limit=-1",
          "query: unknown parameter 'limit': GET /api/v1/jobs takes none");
  refused("GET", "/api/v1/pool?verbose",
          "query: unknown parameter 'verbose': GET /api/v1/pool takes none");
  refused("GET", "/metrics?x=1", "query: unknown parameter 'x': GET /metrics takes none");
  refused("GET", job + "?x=1", "query: unknown parameter 'x': GET " + job + " takes none");
  for (const char* rest : {"/trace", "/dag", "/outputs"}) {
    refused("GET", job + rest + "?limit=1",
            "query: unknown parameter 'limit': GET " + job + rest + " takes none");
  }
  refused("DELETE", job + "?force=1",
          "query: unknown parameter 'force': DELETE /api/v1/jobs/{id} takes forget");
  refused("POST", "/api/v1/jobs?wait=1",
          "query: unknown parameter 'wait': POST /api/v1/jobs takes none");
  refused("GET", "/api/v1/events?since=3",
          "query: unknown parameter 'since': GET /api/v1/events takes none");
  // The task table takes offset, limit and state, each once and well formed.
  const std::string tasks = job + "/tasks";
  refused("GET", tasks + "?limit=-1", "query: limit: '-1' is not an integer from 1 to 10000");
  refused("GET", tasks + "?limit=abc", "query: limit: 'abc' is not an integer from 1 to 10000");
  refused("GET", tasks + "?offset=-1", "query: offset: '-1' is not a non-negative integer");
  refused(
      "GET", tasks + "?page=2",
      "query: unknown parameter 'page': GET /api/v1/jobs/{id}/tasks takes offset, limit, state");
  refused("GET", tasks + "?limit=1&limit=2", "query: parameter 'limit' given twice");
  refused("GET", tasks + "?state=%zz", "query: bad percent-encoding in 'state=%zz'");
  EXPECT_EQ(GetJson(tasks + "?state=d%6Fne&limit=2")["tasks"].size(), 2u);
  // Empty queries, and the dashboard's files, are as before.
  EXPECT_EQ(Call("GET", "/api/v1/jobs?").status, 200);
  EXPECT_EQ(Call("GET", "/?v=2").status, 200);
  EXPECT_EQ(Call("POST", "/api/v1/events").status, 405);
  // The event stream with an empty query still streams.
  bool hello = false;
  Status st = StreamSse(
      url_, "/api/v1/events?&", Bearer(),
      [&](std::string_view event, std::string_view) {
        hello = hello || event == "hello";
        return !hello;
      },
      std::chrono::seconds(30));
  EXPECT_TRUE(st.ok()) << st.ToString();
  EXPECT_TRUE(hello);
}

TEST_F(RestApiTest, AJobHasOnePathAndHeadAnswersLikeGet) {
  uint64_t id = SubmitOk(Chain(2));
  ASSERT_EQ(id, 1u);
  WaitJob(id, [](const json& s) { return s["state"] == "succeeded"; });
  // Other spellings of job 1 are not job 1.
  for (const char* path : {"/api/v1/jobs/01", "/api/v1/jobs/1/", "/api/v1/jobs/+1"}) {
    EXPECT_EQ(GetJson(path, 404)["error"], std::string("no route ") + path);
  }
  // An id past 64 bits is a job that does not exist, named as written (it
  // was "no route" past ten digits).
  EXPECT_EQ(GetJson("/api/v1/jobs/99999999999", 404)["error"], "job 99999999999: no such job");
  EXPECT_EQ(GetJson("/api/v1/jobs/123456789012345678901234567890/tasks", 404)["error"],
            "job 123456789012345678901234567890: no such job");
  EXPECT_EQ(Call("DELETE", "/api/v1/jobs/99999999999999999999").status, 404);
  // HEAD is GET without a body (it was 405 on every API route).
  for (const std::string path : {"/api/v1/pool", "/api/v1/jobs", "/api/v1/jobs/1", "/metrics",
                                 "/api/v1/jobs/1/tasks?limit=1", "/api/v1/jobs/1/dag"}) {
    HttpResponse r = Call("HEAD", path);
    EXPECT_EQ(r.status, 200) << path;
    EXPECT_EQ(r.body, "") << path;
  }
  EXPECT_EQ(Call("HEAD", "/api/v1/jobs/7").status, 404);
}

TEST_F(RestApiTest, MethodsARouteDoesNotTakeGet405WithAllowAndOptionsListsThem) {
  struct Case {
    const char* method;
    const char* path;
    const char* allow;
  };
  // Checked before the token: a PUT is refused as a PUT, token or not.
  for (const Case& c :
       {Case{"PUT", "/api/v1/jobs", "GET, HEAD, POST, OPTIONS"},
        Case{"PATCH", "/api/v1/jobs/1", "GET, HEAD, DELETE, OPTIONS"},
        Case{"DELETE", "/api/v1/pool", "GET, HEAD, OPTIONS"},
        Case{"POST", "/api/v1/jobs/1/tasks", "GET, HEAD, OPTIONS"},
        Case{"DELETE", "/api/v1/jobs/1/outputs", "GET, HEAD, OPTIONS"},
        Case{"POST", "/metrics", "GET, HEAD, OPTIONS"}, Case{"DELETE", "/", "GET, HEAD, OPTIONS"},
        Case{"POST", "/api/v1/openapi.json", "GET, HEAD, OPTIONS"},
        Case{"POST", "/api/v1/events", "GET, OPTIONS"},
        Case{"HEAD", "/api/v1/events", "GET, OPTIONS"}}) {
    for (const std::string& token : {std::string(kToken), std::string()}) {
      HttpResponse r = Call(c.method, c.path, "", token);
      EXPECT_EQ(r.status, 405) << c.method << " " << c.path << ": " << r.body;
      EXPECT_EQ(r.headers["allow"], c.allow) << c.method << " " << c.path;
      if (c.method == std::string("HEAD")) continue;
      EXPECT_EQ(json::parse(r.body)["error"], std::string("method ") + c.method +
                                                  " not allowed on " + c.path + " (it takes " +
                                                  c.allow + ")");
    }
  }
  // OPTIONS answers what each route takes; no token needed, nothing changes.
  for (const Case& c : {Case{"OPTIONS", "/api/v1/jobs", "GET, HEAD, POST, OPTIONS"},
                        Case{"OPTIONS", "/api/v1/jobs/7", "GET, HEAD, DELETE, OPTIONS"},
                        Case{"OPTIONS", "/api/v1/jobs/7/trace", "GET, HEAD, OPTIONS"},
                        Case{"OPTIONS", "/", "GET, HEAD, OPTIONS"},
                        Case{"OPTIONS", "/api/v1/events", "GET, OPTIONS"}}) {
    HttpResponse r = Call(c.method, c.path, "", "");
    EXPECT_EQ(r.status, 204) << c.path << ": " << r.body;
    EXPECT_EQ(r.headers["allow"], c.allow) << c.path;
    EXPECT_EQ(r.body, "") << c.path;
  }
  // Unknown paths stay 404 whatever the method; methods no route takes are 501.
  EXPECT_EQ(GetJson("/api/v1/nope", 404)["error"], "no route /api/v1/nope");
  EXPECT_EQ(Call("OPTIONS", "/api/v1/nope").status, 404);
  EXPECT_EQ(Call("PUT", "/api/v1/nope").status, 404);
  // The server as a whole (asterisk-form, which HttpCall cannot send).
  RawSocket raw(server_->port());
  ASSERT_TRUE(raw.connected());
  std::string got;
  ASSERT_TRUE(raw.Send("OPTIONS * HTTP/1.1\r\nHost: x\r\n\r\n"));
  ASSERT_TRUE(raw.ReadUntil(&got, "\r\n\r\n")) << got;
  EXPECT_EQ(got.rfind("HTTP/1.1 204", 0), 0u) << got;
  EXPECT_NE(got.find("\r\nAllow: GET, HEAD, POST, DELETE, OPTIONS\r\n"), std::string::npos) << got;
  got.clear();
  ASSERT_TRUE(raw.Send("GET * HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"));
  ASSERT_TRUE(raw.ReadToEof(&got)) << got;
  EXPECT_EQ(got.rfind("HTTP/1.1 400", 0), 0u) << got;
  EXPECT_NE(got.find("request target '*': only for OPTIONS"), std::string::npos) << got;
  for (const char* method : {"BREW", "TRACE", "CONNECT"}) {
    HttpResponse r = Call(method, "/api/v1/jobs");
    EXPECT_EQ(r.status, 501) << method;
    EXPECT_EQ(json::parse(r.body)["error"],
              std::string("method ") + method + " is not implemented");
  }
  EXPECT_EQ(GetJson("/api/v1/jobs")["jobs"].size(), 0u);
}

TEST_F(RestApiTest, TheOpenApiDocumentListsTheMethodsEachRouteTakes) {
  json doc = GetJson("/api/v1/openapi.json");
  ASSERT_TRUE(doc["paths"].is_object());
  for (const auto& [path, ops] : doc["paths"].items()) {
    std::string concrete = path;
    if (size_t at = concrete.find("{id}"); at != std::string::npos) concrete.replace(at, 4, "1");
    HttpResponse r = Call("OPTIONS", concrete, "", "");
    ASSERT_EQ(r.status, 204) << path;
    std::set<std::string> allowed, documented;
    std::string allow = r.headers["allow"];
    for (size_t i = 0; i <= allow.size();) {
      size_t comma = std::min(allow.find(", ", i), allow.size());
      allowed.insert(allow.substr(i, comma - i));
      i = comma + 2;
    }
    allowed.erase("HEAD");  // GET's, without the body
    for (const auto& [op, unused] : ops.items()) {
      if (op == "parameters") continue;
      std::string method = op;
      for (char& ch : method) ch = static_cast<char>(std::toupper(static_cast<unsigned char>(ch)));
      documented.insert(method);
    }
    EXPECT_EQ(documented, allowed) << path << ": Allow: " << allow;
    // An operation names the bearer token exactly when its route needs one.
    for (const auto& [op, spec] : ops.items()) {
      if (op == "parameters" || op == "options") continue;
      std::string method = op;
      for (char& ch : method) ch = static_cast<char>(std::toupper(static_cast<unsigned char>(ch)));
      const Route* route = RouteTable::Row(RestApi::Routes().Find(concrete), method);
      ASSERT_NE(route, nullptr) << method << " " << path;
      EXPECT_EQ(spec.contains("security"), route->access != RouteAccess::kOpen)
          << method << " " << path;
      if (route->access != RouteAccess::kOpen) {
        EXPECT_TRUE(spec["responses"].contains("401")) << method << " " << path;
      }
    }
  }
}

TEST_F(RestApiTest, AbsoluteFormAndPercentEncodedPathsRouteLikeThePlainPath) {
  uint64_t id = SubmitOk(Chain(2));
  ASSERT_EQ(id, 1u);
  WaitJob(id, [](const json& s) { return s["state"] == "succeeded"; });
  const std::string plain = Call("GET", "/api/v1/jobs/1").body;
  EXPECT_EQ(Call("GET", "/api/v1/jobs/%31").body, plain);
  EXPECT_EQ(GetJson("/api/v1/jobs/%31/t%61sks?st%61te=done")["total"], 2);
  // A proxy's absolute-form target, with its query kept.
  const std::string kAuth = std::string("Authorization: Bearer ") + kToken + "\r\n\r\n";
  RawSocket raw(server_->port());
  ASSERT_TRUE(raw.connected());
  const std::string host = "127.0.0.1:" + std::to_string(server_->port());
  std::string got;
  ASSERT_TRUE(
      raw.Send("GET http://" + host + "/api/v1/jobs HTTP/1.1\r\nHost: " + host + "\r\n" + kAuth));
  ASSERT_TRUE(raw.ReadUntil(&got, "\"jobs\"")) << got;
  EXPECT_EQ(got.rfind("HTTP/1.1 200", 0), 0u) << got;
  got.clear();
  ASSERT_TRUE(raw.Send("GET http://" + host + "/api/v1/jobs/%31/tasks?limit=1 HTTP/1.1\r\nHost: " +
                       host + "\r\nConnection: close\r\n" + kAuth));
  ASSERT_TRUE(raw.ReadToEof(&got)) << got;
  EXPECT_EQ(got.rfind("HTTP/1.1 200", 0), 0u) << got;
  json page = json::parse(got.substr(got.find("\r\n\r\n") + 4));
  EXPECT_EQ(page["count"], 1);
  EXPECT_EQ(page["total"], 2);
  // Malformed escapes and an encoded '/' are refused, naming the problem.
  for (const auto& [target, why] :
       {std::pair<std::string, std::string>{"/api/v1/jobs/%zz",
                                            "bad percent-encoding '%zz' in the path"},
        {"/api/v1/jobs/%4", "bad percent-encoding '%4' in the path"},
        {"/api/v1/jobs%2F1", "the path has an encoded '/' (%2F)"},
        {"/api/v1/jobs/1%00", "the path has an encoded control character (%00)"}}) {
    HttpResponse r = Call("DELETE", target);
    EXPECT_EQ(r.status, 400) << target << ": " << r.body;
    EXPECT_EQ(json::parse(r.body)["error"], "request target '" + target + "': " + why);
  }
  EXPECT_EQ(GetJson("/api/v1/jobs/1")["state"], "succeeded");
}

TEST_F(RestApiTest, ReadsAreAnsweredWhileTheLoopIsBusy) {
  // The first read has the loop render a snapshot; later ones are served
  // from it by the HTTP thread, without the loop.
  json pool = GetJson("/api/v1/pool");
  ASSERT_EQ(pool["alive_devices"], 2);
  LoopBlocker loop(cluster_->controller());
  // Were these posted to the loop, they would wait for the release and the
  // client's 10 s timeout would fail them.
  EXPECT_EQ(GetJson("/api/v1/pool"), pool);
  EXPECT_EQ(GetJson("/api/v1/jobs")["jobs"].size(), 0u);
  EXPECT_EQ(Call("GET", "/metrics").status, 200);
  EXPECT_EQ(GetJson("/api/v1/jobs/7", 404)["error"], "job 7: no such job");
  loop.Release();
  // A job submitted now is seen at once by the next read.
  uint64_t id = SubmitOk(Chain(3));
  EXPECT_EQ(GetJson("/api/v1/jobs/" + std::to_string(id))["id"], id);
  EXPECT_EQ(GetJson("/api/v1/jobs")["jobs"].size(), 1u);
}

TEST_F(RestApiTest, AnEndedJobsTasksTraceAndDagAreServedWithoutTheLoop) {
  uint64_t id = SubmitOk(Chain(6));
  WaitJob(id, [](const json& s) { return s["state"] == "succeeded"; });
  const std::string base = "/api/v1/jobs/" + std::to_string(id);
  // The first request has the loop copy the ended job; then it is not needed.
  json page = GetJson(base + "/tasks?limit=4");
  ASSERT_EQ(page["tasks"].size(), 4u);
  json trace = GetJson(base + "/trace");
  json dag = GetJson(base + "/dag");
  LoopBlocker loop(cluster_->controller());
  EXPECT_EQ(GetJson(base + "/tasks?limit=4"), page);       // kept as rendered
  json other = GetJson(base + "/tasks?offset=4&limit=4");  // rendered from the copy
  ASSERT_EQ(other["tasks"].size(), 2u);
  EXPECT_EQ(other["tasks"][0]["run"], 4);
  EXPECT_EQ(GetJson(base + "/trace"), trace);
  EXPECT_EQ(GetJson(base + "/dag"), dag);
  EXPECT_EQ(Call("GET", base + "/tasks?limit=x").status, 400);
  loop.Release();
}

TEST_F(RestApiTest, MetricsArePrometheusText) {
  uint64_t id = SubmitOk(Chain(9));
  WaitJob(id, [](const json& s) { return s["state"] == "succeeded"; });
  HttpResponse m = Call("GET", "/metrics");
  ASSERT_EQ(m.status, 200);
  EXPECT_EQ(m.content_type.rfind("text/plain", 0), 0u);
  for (const char* want :
       {"hmpmd_tasks_dispatched_total 9\n", "hmpmd_tasks_running{core=\"cube\"} 0\n",
        "hmpmd_tasks_queued{core=\"vector\"} 0\n", "hmpmd_dispatch_latency_seconds_count 9\n",
        "hmpmd_dispatch_latency_seconds_bucket{le=\"+Inf\"} 9\n",
        "hmpmd_device_busy_seconds_total{device=\"0\"", "hmpmd_device_utilisation{device=\"1\"",
        "hmpmd_dropped_frames_total 0\n", "hmpmd_jobs{state=\"succeeded\"} 1\n",
        "# TYPE hmpmd_step_masking_ratio gauge", "hmpmd_event_records_dropped_total"}) {
    EXPECT_NE(m.body.find(want), std::string::npos) << want << "\n" << m.body;
  }
}

TEST_F(RestApiTest, EventsStreamTaskAndJobUpdates) {
  const int kTasks = 20;
  std::set<uint32_t> started, finished;
  std::string final_state;
  bool hello = false;
  std::thread submitter;
  Status st = StreamSse(
      url_, "/api/v1/events", Bearer(),
      [&](std::string_view event, std::string_view data) {
        json d = json::parse(data);
        if (event == "hello") {
          hello = true;
          submitter = std::thread([this] { SubmitOk(Chain(kTasks)); });
        } else if (event == "tasks") {
          EXPECT_EQ(d["dropped"], 0);
          for (const auto& r : d["tasks"]) {
            (r[2] == 0 ? started : finished).insert(r[1].get<uint32_t>());
            EXPECT_FALSE(r[7].get<std::string>().empty());
          }
        } else if (event == "jobs") {
          for (const auto& j : d["jobs"]) final_state = j["state"];
        }
        return final_state != "succeeded" || finished.size() < kTasks;
      },
      std::chrono::seconds(30));
  if (submitter.joinable()) submitter.join();
  ASSERT_TRUE(st.ok()) << st.ToString();
  EXPECT_TRUE(hello);
  EXPECT_EQ(started.size(), size_t{kTasks});
  EXPECT_EQ(finished.size(), size_t{kTasks});
  EXPECT_EQ(final_state, "succeeded");
}

// A worker's store changing size is pushed as a "pool" event (its heartbeat
// says so), so the page need not poll /pool: the job's kept output shows
// up, and goes again once the job is forgotten.
TEST_F(RestApiTest, EventsSayWhenAWorkersStoreChanges) {
  const uint64_t kBytes = 4096 * sizeof(float);
  std::vector<uint64_t> seen;  // store_bytes of each pool event
  std::thread actor;
  uint64_t id = 0;
  Status st = StreamSse(
      url_, "/api/v1/events", Bearer(),
      [&](std::string_view event, std::string_view data) {
        json d = json::parse(data);
        if (event == "hello") {
          actor = std::thread([&] {
            id = SubmitOk(R"({"tasks":[{"id":"a","kernel":"scale","args":{"n":4096}}]})");
            WaitJob(id, [](const json& s) { return s["state"] == "succeeded"; });
          });
        } else if (event == "pool") {
          EXPECT_EQ(d["workers"], 2);
          EXPECT_EQ(d["alive"], 2);
          seen.push_back(d["store_bytes"].get<uint64_t>());
          if (seen.back() == kBytes) {
            if (actor.joinable()) actor.join();
            EXPECT_EQ(Call("DELETE", "/api/v1/jobs/" + std::to_string(id) + "?forget=true").status,
                      200);
          }
        }
        return seen.empty() || seen.back() != 0 ||
               std::find(seen.begin(), seen.end(), kBytes) == seen.end();
      },
      std::chrono::seconds(30));
  if (actor.joinable()) actor.join();
  ASSERT_TRUE(st.ok()) << st.ToString();
  ASSERT_FALSE(seen.empty());
  EXPECT_EQ(seen.back(), 0u);
  EXPECT_NE(std::find(seen.begin(), seen.end(), kBytes), seen.end());
}

TEST_F(RestApiTest, ServesTheDashboardAndTheOpenApiDocument) {
  HttpResponse page = Call("GET", "/");
  EXPECT_EQ(page.status, 200);
  EXPECT_EQ(page.content_type.rfind("text/html", 0), 0u);
  EXPECT_NE(page.body.find("/dashboard/app.js"), std::string::npos);
  for (const char* asset :
       {"/dashboard/app.js", "/dashboard/timeline.js", "/dashboard/style.css"}) {
    HttpResponse a = Call("GET", asset);
    EXPECT_EQ(a.status, 200) << asset;
    EXPECT_GT(a.body.size(), 100u) << asset;
  }
  EXPECT_EQ(Call("POST", "/").status, 405);
  json doc = GetJson("/api/v1/openapi.json");
  EXPECT_EQ(doc["openapi"].get<std::string>().rfind("3.", 0), 0u);
  for (const char* path :
       {"/api/v1/pool", "/api/v1/jobs", "/api/v1/jobs/{id}", "/api/v1/jobs/{id}/tasks",
        "/api/v1/jobs/{id}/trace", "/api/v1/jobs/{id}/dag", "/api/v1/jobs/{id}/outputs",
        "/api/v1/jobs/{id}/logs", "/api/v1/events", "/metrics", "/api/v1/openapi.json", "/"}) {
    EXPECT_TRUE(doc["paths"].contains(path)) << path;
  }
}

}  // namespace
}  // namespace hmpmd::testing
