// Several tokens with roles (--tokens, docs/operations.md "Several
// tokens"), on a real controller and real workers: what each role may do
// at each door (REST, driver sessions, the worker port), every mutating
// call in the audit log, and a token revoked and another added by editing
// the file, with no restart.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "hmpmd/client/client.h"
#include "process_cluster_fixture.h"

namespace hmpmd::testing {
namespace {

constexpr char kCluster[] = "cluster-7d1e0c55a9b24f38";
constexpr char kOps[] = "ops-0c8f2b6e41d9a735";
constexpr char kVision[] = "vision-5a3d9e17c2b04f86";
constexpr char kDash[] = "dash-e94b1f02d7c6a358";
constexpr char kAudio[] = "audio-61f0a8c3b5e2d974";
constexpr char kSpec[] = R"({"tasks":[{"id":"a","kernel":"noop"}]})";

class TokenRolesTest : public ProcessClusterFixture {
 protected:
  TokenRolesTest() : ProcessClusterFixture("hmpmd-roles") {}
  // Writes the --tokens file whole, as an editor saves it (a new inode).
  // Each entry: name, role, token, and optionally its tenant.
  void WriteTokens(const std::vector<std::vector<std::string>>& entries) {
    nlohmann::json doc = {{"tokens", nlohmann::json::array()}};
    for (const auto& e : entries) {
      doc["tokens"].push_back({{"name", e[0]}, {"role", e[1]}, {"token", e[2]}});
      if (e.size() > 3) doc["tokens"].back()["tenant"] = e[3];
    }
    std::ofstream(Path("tokens.json.new")) << doc.dump();
    ::chmod(Path("tokens.json.new").c_str(), 0600);
    std::filesystem::rename(Path("tokens.json.new"), Path("tokens.json"));
  }
  void Start(std::vector<std::vector<std::string>> tokens = {
                 {"ops", "admin", kOps}, {"vision", "submit", kVision}, {"dash", "read", kDash}}) {
    std::ofstream(Path("cluster-token")) << kCluster << "\n";
    WriteTokens(tokens);
    cluster_->set_rest_token(kCluster);
    cluster_->set_log_level("info");  // the reloads are logged at info
    ASSERT_TRUE(cluster_
                    ->StartController({"--token-file", Path("cluster-token"), "--tokens",
                                       Path("tokens.json"), "--audit-log", Path("audit.log")})
                    .ok());
  }
  int Status(const std::string& method, const std::string& path, const std::string& token,
             const std::string& body = "", std::string* text = nullptr) {
    auto r = cluster_->Call(method, path, body, {{"Authorization", "Bearer " + token}});
    if (!r.ok()) return -1;
    if (text) *text = r->body;
    return r->status;
  }
  // A worker given `token` in a file: true once it has joined, false once
  // it has exited (its log holds why).
  bool WorkerJoins(const std::string& token, size_t index) {
    const std::string file = Path("worker-token-" + std::to_string(index));
    std::ofstream(file) << token << "\n";
    EXPECT_TRUE(cluster_->StartWorker({"--token-file", file}).ok());
    for (int i = 0; i < 500; ++i) {
      if (!cluster_->WorkerRunning(index)) return false;
      auto pool = cluster_->Get("/api/v1/pool");
      if (pool.value("alive_devices", 0) > static_cast<int>(joined_)) {
        ++joined_;
        return true;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    ADD_FAILURE() << "worker " << index << " neither joined nor exited";
    return false;
  }
  Result<std::unique_ptr<client::Client>> Driver(const std::string& token) {
    client::ClientOptions o;
    o.controller = cluster_->zmq_endpoint();
    o.session = "driver";
    o.token = token;
    o.connect_timeout_ms = 20'000;
    return client::Client::Connect(o);
  }
  // The audit log's lines, parsed.
  std::vector<nlohmann::json> Audit() {
    std::vector<nlohmann::json> lines;
    std::istringstream in(Slurp("audit.log"));
    for (std::string line; std::getline(in, line);) {
      lines.push_back(nlohmann::json::parse(line, nullptr, false));
    }
    return lines;
  }
  size_t joined_ = 0;
};

TEST_F(TokenRolesTest, EachRoleMayDoWhatItsRoleAllowsAndEveryWriteIsAudited) {
  Start();
  // Read: reads, and nothing else.
  EXPECT_EQ(Status("GET", "/api/v1/jobs", kDash), 200);
  std::string why;
  EXPECT_EQ(Status("POST", "/api/v1/jobs", kDash, kSpec, &why), 403);
  EXPECT_NE(why.find("the token of 'dash' (role read) may not POST /api/v1/jobs"),
            std::string::npos)
      << why;
  // Submit: submits and cancels, opens sessions; serves as no worker.
  EXPECT_EQ(Status("POST", "/api/v1/jobs", kVision, kSpec, &why), 201) << why;
  EXPECT_EQ(Status("POST", "/api/v1/jobs", "guess-0123456789abcdef", kSpec), 403);
  EXPECT_EQ(Status("DELETE", "/api/v1/jobs/1", kVision), 200);
  EXPECT_FALSE(WorkerJoins(kVision, 0));
  EXPECT_NE(Slurp("worker.log")
                .find("the token of 'vision' (role submit) may not serve as a "
                      "worker; that takes an admin token"),
            std::string::npos)
      << Slurp("worker.log");
  // Admin (from the file, or the cluster token): serves as a worker.
  EXPECT_TRUE(WorkerJoins(kOps, 1));
  EXPECT_TRUE(WorkerJoins(kCluster, 2));

  // Driver sessions: submit yes, read no.
  auto vision = Driver(kVision);
  ASSERT_TRUE(vision.ok()) << vision.status().ToString();
  auto f = (*vision)->Submit({.kernel = "noop"});
  ASSERT_TRUE(f.ok()) << f.status().ToString();
  EXPECT_TRUE(f->Wait(20'000).ok());
  EXPECT_TRUE((*vision)->Close().ok());
  auto dash = Driver(kDash);
  ASSERT_FALSE(dash.ok());
  EXPECT_EQ(dash.status().code(), StatusCode::kPermissionDenied) << dash.status().ToString();
  EXPECT_NE(dash.status().message().find("the token of 'dash' (role read) may not open a session"),
            std::string::npos)
      << dash.status().ToString();

  // Every mutating call, in order, with who made it and from where; reads
  // are not recorded, and no token is.
  const std::string raw = Slurp("audit.log");
  for (const char* t : {kCluster, kOps, kVision, kDash}) {
    EXPECT_EQ(raw.find(t), std::string::npos) << "a token is in the audit log";
  }
  std::vector<std::vector<std::string>> want = {
      {"dash", "read", "POST /api/v1/jobs", "403"},
      {"vision", "submit", "POST /api/v1/jobs", "201"},
      {"", "", "POST /api/v1/jobs", "403"},
      {"vision", "submit", "DELETE /api/v1/jobs/1", "200"},
      {"vision", "submit", "session open 'driver'", "job 2"},
      {"vision", "submit", "session end, job 2", "succeeded"},
      {"dash", "read", "session open 'driver'",
       "refused: the token of 'dash' (role read) may not open a session"}};
  std::vector<nlohmann::json> lines = Audit();
  ASSERT_EQ(lines.size(), want.size()) << raw;
  for (size_t i = 0; i < want.size(); ++i) {
    EXPECT_EQ(lines[i].value("who", "?"), want[i][0]) << lines[i].dump();
    EXPECT_EQ(lines[i].value("role", "?"), want[i][1]) << lines[i].dump();
    EXPECT_EQ(lines[i].value("call", "?"), want[i][2]) << lines[i].dump();
    EXPECT_EQ(lines[i].value("outcome", "?"), want[i][3]) << lines[i].dump();
    EXPECT_EQ(lines[i].value("from", "").rfind("127.0.0.1:", 0), 0u) << lines[i].dump();
    EXPECT_EQ(lines[i].value("time", "").size(), 24u) << lines[i].dump();
  }
}

TEST_F(TokenRolesTest, ATokenIsRevokedAndAnotherAddedWithoutARestart) {
  Start();
  EXPECT_EQ(Status("POST", "/api/v1/jobs", kVision, kSpec), 201);
  EXPECT_EQ(Status("GET", "/api/v1/jobs", kAudio), 403);
  // vision revoked, audio added; ops keeps its token.
  WriteTokens({{"ops", "admin", kOps}, {"audio", "submit", kAudio}});
  int vision = 0, audio = 0;
  for (int i = 0; i < 250 && !(vision == 403 && audio == 201); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    vision = Status("GET", "/api/v1/jobs", kVision);
    audio = Status("POST", "/api/v1/jobs", kAudio, kSpec);
  }
  EXPECT_EQ(vision, 403);
  EXPECT_EQ(audio, 201);
  // The worker port reads the same book: a revoked token cannot open a
  // session; the new one can.
  auto revoked = Driver(kVision);
  EXPECT_EQ(revoked.status().code(), StatusCode::kPermissionDenied) << revoked.status().ToString();
  auto added = Driver(kAudio);
  ASSERT_TRUE(added.ok()) << added.status().ToString();
  EXPECT_TRUE((*added)->Close().ok());  // before the controller goes
  // A change that does not parse keeps the tokens read before, and says so.
  std::ofstream(Path("tokens.json")) << "{\"tokens\": [";
  std::this_thread::sleep_for(std::chrono::milliseconds(600));
  EXPECT_EQ(Status("GET", "/api/v1/jobs", kAudio), 200);
  cluster_->KillController();
  EXPECT_NE(Slurp("controller.log").find("; keeping the 2 token(s) read before"), std::string::npos)
      << Slurp("controller.log");
  EXPECT_NE(Slurp("controller.log").find("changed: 2 token(s), 1 new, 2 revoked"),
            std::string::npos)
      << Slurp("controller.log");
}

// Tenants (docs/operations.md, "Tenants"): vision and audio each see and
// cancel their own jobs and sessions only; dash reads vision's; an admin
// sees them all. Whose each job is survives a restart.
TEST_F(TokenRolesTest, EachTenantSeesAndCancelsItsOwnJobsOnlyAcrossARestart) {
  const std::vector<std::vector<std::string>> tokens = {{"ops", "admin", kOps},
                                                        {"vision", "submit", kVision},
                                                        {"dash", "read", kDash, "vision"},
                                                        {"audio", "submit", kAudio}};
  Start(tokens);
  std::string body;
  ASSERT_EQ(Status("POST", "/api/v1/jobs", kVision, kSpec, &body), 201) << body;
  ASSERT_EQ(Status("POST", "/api/v1/jobs", kAudio, kSpec, &body), 201) << body;
  auto audio_session = Driver(kAudio);
  ASSERT_TRUE(audio_session.ok()) << audio_session.status().ToString();
  // Jobs 1 (vision), 2 (audio), 3 (audio's session).
  auto listed = [&](const std::string& token) {
    std::vector<std::pair<int, std::string>> out;
    std::string text;
    EXPECT_EQ(Status("GET", "/api/v1/jobs", token, "", &text), 200) << text;
    const nlohmann::json doc = nlohmann::json::parse(text);
    for (const auto& j : doc["jobs"]) {
      out.emplace_back(j["id"].get<int>(), j.value("tenant", ""));
    }
    return out;
  };
  using Listed = std::vector<std::pair<int, std::string>>;
  EXPECT_EQ(listed(kVision), (Listed{{1, "vision"}}));
  EXPECT_EQ(listed(kDash), (Listed{{1, "vision"}}));
  EXPECT_EQ(listed(kAudio), (Listed{{2, "audio"}, {3, "audio"}}));
  EXPECT_EQ(listed(kOps), (Listed{{1, "vision"}, {2, "audio"}, {3, "audio"}}));
  EXPECT_EQ(listed(kCluster), listed(kOps));
  // Another tenant's job is no job at all, on every route.
  for (const char* route : {"", "/tasks", "/trace", "/dag", "/outputs", "/logs?task=a"}) {
    const std::string path = std::string("/api/v1/jobs/1") + route;
    EXPECT_EQ(Status("GET", path, kAudio, "", &body), 404) << path << ": " << body;
    EXPECT_EQ(body, "{\"error\":\"job 1: no such job\"}");
    EXPECT_EQ(Status("GET", path, kDash, "", &body), 200) << path << ": " << body;
    EXPECT_EQ(Status("GET", std::string("/api/v1/jobs/3") + route, kVision), 404) << route;
  }
  EXPECT_EQ(Status("DELETE", "/api/v1/jobs/1", kAudio, "", &body), 404) << body;
  EXPECT_EQ(Status("DELETE", "/api/v1/jobs/1?forget=true", kAudio), 404);
  EXPECT_EQ(Status("DELETE", "/api/v1/jobs/2", kVision), 404);
  ASSERT_EQ(Status("GET", "/api/v1/jobs/1", kOps, "", &body), 200);
  EXPECT_EQ(nlohmann::json::parse(body)["state"], "queued") << body;  // no worker yet
  // The event stream shows every tenant's jobs: admins only.
  EXPECT_EQ(Status("GET", "/api/v1/events", kAudio, "", &body), 403);
  EXPECT_NE(body.find("it takes an admin's token"), std::string::npos) << body;
  // Its own, a tenant cancels; an admin cancels any.
  EXPECT_EQ(Status("DELETE", "/api/v1/jobs/2", kAudio), 200);
  EXPECT_EQ(Status("DELETE", "/api/v1/jobs/1", kOps), 200);
  EXPECT_TRUE((*audio_session)->Close().ok());
  // After a restart from the store, each job is still its tenant's.
  cluster_->StopController();
  ASSERT_TRUE(cluster_
                  ->StartController({"--token-file", Path("cluster-token"), "--tokens",
                                     Path("tokens.json"), "--audit-log", Path("audit.log")})
                  .ok());
  EXPECT_EQ(listed(kVision), (Listed{{1, "vision"}}));
  EXPECT_EQ(listed(kAudio), (Listed{{2, "audio"}, {3, "audio"}}));
  EXPECT_EQ(Status("GET", "/api/v1/jobs/2", kVision), 404);
}

TEST_F(TokenRolesTest, ABadTokensFileOrAuditLogStopsTheControllerBeforeItOpensItsStore) {
  std::ofstream(Path("tokens.json")) << R"({"tokens": [{"name": "a", "role": "root",
                                           "token": "0123456789abcdef0"}]})";
  ::chmod(Path("tokens.json").c_str(), 0600);
  const std::string cmd = std::string(HMPMD_CLI_BIN) + " controller --listen tcp://127.0.0.1:0" +
                          " --http '' --db " + Path("s.db") + " --tokens " + Path("tokens.json") +
                          " > " + Path("out.txt") + " 2>&1";
  EXPECT_NE(std::system(cmd.c_str()), 0);
  EXPECT_NE(Slurp("out.txt").find("--tokens: tokens file " + Path("tokens.json") +
                                  ": tokens[0].role: 'root' is not admin, submit or read"),
            std::string::npos)
      << Slurp("out.txt");
  EXPECT_FALSE(std::filesystem::exists(Path("s.db")));
  // So does an audit log it cannot write.
  const std::string log_cmd =
      std::string(HMPMD_CLI_BIN) + " controller --listen tcp://127.0.0.1:0 --http '' --db " +
      Path("s.db") + " --audit-log " + Path("none/audit.log") + " > " + Path("out.txt") + " 2>&1";
  EXPECT_NE(std::system(log_cmd.c_str()), 0);
  EXPECT_NE(Slurp("out.txt").find("--audit-log: audit log " + Path("none/audit.log") +
                                  ": No such file or directory"),
            std::string::npos)
      << Slurp("out.txt");
  EXPECT_FALSE(std::filesystem::exists(Path("s.db")));
}

}  // namespace
}  // namespace hmpmd::testing
