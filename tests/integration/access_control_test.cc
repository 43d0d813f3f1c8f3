// Access control end to end, with real processes: the shared token for
// workers and mutating REST calls (and that it never reaches a log), and
// CurveZMQ keys made by `hmpmd keygen`.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cctype>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>
#include <string>
#include <thread>
#include <utility>
#include <vector>
#include <zmq.hpp>

#include "hmpmd/client/fetch.h"
#include "hmpmd/protocol/codec.h"
#include "hmpmd/protocol/control_auth.h"
#include "hmpmd/protocol/data_auth.h"
#include "hmpmd/worker/fetch.h"
#include "process_cluster_fixture.h"

namespace hmpmd::testing {
namespace {

constexpr const char* kToken = "tok-3f9a1c77e2b84d5e";
constexpr const char* kSpec = R"({"tasks":[{"id":"a","kernel":"noop"}]})";

class AccessControlTest : public ProcessClusterFixture {
 protected:
  AccessControlTest() : ProcessClusterFixture("hmpmd-access") {}
  size_t AliveWorkers() {
    auto pool = cluster_->Get("/api/v1/pool");
    size_t n = 0;
    if (pool.is_object() && pool.contains("devices")) {
      for (const auto& d : pool["devices"]) n += d.value("alive", false) ? 1 : 0;
    }
    return n;
  }
  bool WaitAlive(size_t n) {
    for (int i = 0; i < 250; ++i) {
      if (AliveWorkers() >= n) return true;
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    return false;
  }
  // Keys made by the real `hmpmd keygen`.
  void Keygen(const std::string& dir) {
    std::string cmd = std::string(HMPMD_CLI_BIN) + " keygen " + dir + " > /dev/null";
    ASSERT_EQ(std::system(cmd.c_str()), 0);
  }
};

TEST_F(AccessControlTest, TokenGuardsWorkersAndMutatingCallsAndIsNeverLogged) {
  std::ofstream(Path("token")) << kToken << "\n";
  cluster_->set_log_level("trace");
  cluster_->set_rest_token(kToken);  // its reads need the token too
  ASSERT_TRUE(cluster_->StartController({"--token-file", Path("token")}).ok());
  // A worker without the token is refused and exits.
  ASSERT_TRUE(cluster_->StartWorker().ok());
  bool exited = false;
  for (int i = 0; i < 250 && !exited; ++i) {
    exited = !cluster_->WorkerRunning(0);
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  EXPECT_TRUE(exited) << "a token-less worker was not refused";
  EXPECT_EQ(AliveWorkers(), 0u);
  // One with the token joins.
  std::ofstream(Path("worker-token")) << kToken << "\n";
  ASSERT_TRUE(cluster_->StartWorker({"--token-file", Path("worker-token")}).ok());
  EXPECT_TRUE(WaitAlive(1));

  // Mutating REST calls: refused without or with a wrong bearer, and
  // nothing changes.
  auto none = cluster_->Call("POST", "/api/v1/jobs", kSpec);
  ASSERT_TRUE(none.ok());
  EXPECT_EQ(none->status, 401);
  auto wrong = cluster_->Call("POST", "/api/v1/jobs", kSpec, {{"Authorization", "Bearer nope"}});
  ASSERT_TRUE(wrong.ok());
  EXPECT_EQ(wrong->status, 403);
  EXPECT_EQ(cluster_->Get("/api/v1/jobs")["jobs"].size(), 0u);
  auto ok = cluster_->Call("POST", "/api/v1/jobs", kSpec,
                           {{"Authorization", std::string("Bearer ") + kToken}});
  ASSERT_TRUE(ok.ok());
  EXPECT_EQ(ok->status, 201) << ok->body;
  EXPECT_EQ(cluster_->WaitJob(1, 30000).value("state", ""), "succeeded");
  auto cancel = cluster_->Call("DELETE", "/api/v1/jobs/1", "");
  ASSERT_TRUE(cancel.ok());
  EXPECT_EQ(cancel->status, 401);
  // The scheme is case-insensitive (RFC 7235); the token is not.
  auto lower = cluster_->Call("POST", "/api/v1/jobs", kSpec,
                              {{"Authorization", std::string("bearer ") + kToken}});
  ASSERT_TRUE(lower.ok());
  EXPECT_EQ(lower->status, 201) << lower->body;
  std::string upper = kToken;
  for (char& c : upper) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  if (upper != kToken) {
    auto shouted =
        cluster_->Call("POST", "/api/v1/jobs", kSpec, {{"Authorization", "BEARER " + upper}});
    ASSERT_TRUE(shouted.ok());
    EXPECT_EQ(shouted->status, 403);
  }

  cluster_->KillController();
  const std::string logs = Slurp("controller.log") + Slurp("worker.log");
  EXPECT_FALSE(logs.empty());
  EXPECT_EQ(logs.find(kToken), std::string::npos) << "the token appears in a log";
}

// With a token, reads need it too, but for the dashboard's own files; the
// event stream is refused before it starts; a cookie is no token.
// --public-read and --public-metrics open reads on purpose, and a public
// reader learns where outputs are, never the data token to fetch them.
TEST_F(AccessControlTest, ReadsNeedTheTokenUnlessOpenedOnPurpose) {
  std::ofstream(Path("token")) << kToken << "\n";
  cluster_->set_rest_token(kToken);
  ASSERT_TRUE(cluster_->StartController({"--token-file", Path("token")}).ok());
  using Headers = std::map<std::string, std::string>;
  const Headers none, bearer{{"Authorization", std::string("Bearer ") + kToken}},
      wrong{{"Authorization", "Bearer nope"}},
      cookie{{"Cookie", std::string("hmpmd_token=") + kToken}};
  auto status = [&](const std::string& method, const std::string& path, const Headers& h,
                    const std::string& body = "") {
    auto r = cluster_->Call(method, path, body, h);
    EXPECT_TRUE(r.ok()) << r.status().ToString();
    return r.ok() ? r->status : 0;
  };
  for (const char* path : {"/api/v1/pool", "/api/v1/jobs", "/api/v1/jobs/1", "/api/v1/jobs/1/tasks",
                           "/api/v1/jobs/1/trace", "/api/v1/jobs/1/outputs", "/metrics"}) {
    EXPECT_EQ(status("GET", path, none), 401) << path;
    EXPECT_EQ(status("HEAD", path, none), 401) << path;
    EXPECT_EQ(status("GET", path, wrong), 403) << path;
    EXPECT_EQ(status("GET", path, cookie), 401) << path;
    const int with_token = status("GET", path, bearer);  // 200, or 404: no job 1 yet
    EXPECT_TRUE(with_token == 200 || with_token == 404) << path << ": " << with_token;
  }
  EXPECT_EQ(status("GET", "/", none), 200);
  EXPECT_EQ(status("GET", "/dashboard/app.js", none), 200);
  EXPECT_EQ(status("GET", "/api/v1/openapi.json", none), 200);
  // The event stream: refused, not started, without the token.
  EXPECT_EQ(status("GET", "/api/v1/events", none), 401);
  EXPECT_EQ(status("GET", "/api/v1/events", wrong), 403);
  ASSERT_TRUE(cluster_->StartWorker({"--token-file", Path("token")}).ok());
  EXPECT_EQ(status("POST", "/api/v1/jobs", cookie, kSpec), 401);
  EXPECT_EQ(status("POST", "/api/v1/jobs", bearer, kSpec), 201);
  EXPECT_EQ(cluster_->WaitJob(1, 30000).value("state", ""), "succeeded");

  cluster_->StopController();
  ASSERT_TRUE(cluster_->StartController({"--token-file", Path("token"), "--public-metrics"}).ok());
  EXPECT_EQ(status("GET", "/metrics", none), 200);
  EXPECT_EQ(status("GET", "/api/v1/pool", none), 401);

  cluster_->StopController();
  ASSERT_TRUE(cluster_->StartController({"--token-file", Path("token"), "--public-read"}).ok());
  for (const char* path : {"/api/v1/pool", "/api/v1/jobs", "/metrics"}) {
    EXPECT_EQ(status("GET", path, none), 200) << path;
  }
  EXPECT_EQ(status("POST", "/api/v1/jobs", none, kSpec), 401);
  EXPECT_EQ(status("DELETE", "/api/v1/jobs/1", none), 401);
  ASSERT_TRUE(cluster_->StartWorker({"--token-file", Path("token")}).ok());
  ASSERT_EQ(status("POST", "/api/v1/jobs", bearer,
                   R"({"tasks":[{"id":"a","kernel":"scale","args":{"n":4,"factor":2}}]})"),
            201);
  EXPECT_EQ(cluster_->WaitJob(2, 30000).value("state", ""), "succeeded");
  auto read = cluster_->Call("GET", "/api/v1/jobs/2/outputs", "", none);
  ASSERT_TRUE(read.ok()) << read.status().ToString();
  ASSERT_EQ(read->status, 200) << read->body;
  auto outs = nlohmann::json::parse(read->body, nullptr, false);
  EXPECT_EQ(outs["outputs"].size(), 1u) << read->body;
  EXPECT_FALSE(outs.contains("data_token")) << "a public reader got the data token";
}

// With a token, the workers' data sockets serve only the controller's data
// token: `hmpmd submit --wait --fetch` gets it from REST (given
// --token-file) and fetches; a fetch with another token is refused, saying
// so, and leaves the output where it is.
TEST_F(AccessControlTest, FetchesNeedTheDataTokenWhichTheCliGetsWithItsToken) {
  std::ofstream(Path("token")) << kToken << "\n";
  cluster_->set_rest_token(kToken);  // its reads need the token too
  ASSERT_TRUE(cluster_->StartController({"--token-file", Path("token")}).ok());
  ASSERT_TRUE(cluster_->StartWorker({"--token-file", Path("token")}).ok());
  ASSERT_TRUE(WaitAlive(1));
  std::ofstream(Path("spec.json"))
      << R"({"tasks":[{"id":"a","kernel":"scale","args":{"n":16,"factor":2}}]})";
  const std::string out = Path("out");
  const std::string cmd = std::string(HMPMD_CLI_BIN) + " submit " + Path("spec.json") +
                          " --wait --fetch " + out + " --url " + cluster_->http_url() +
                          " --token-file " + Path("token") + " > " + Path("cli.out") + " 2>&1";
  EXPECT_EQ(std::system(cmd.c_str()), 0) << Slurp("cli.out");
  EXPECT_TRUE(std::filesystem::exists(out + "/manifest.json")) << Slurp("cli.out");
  EXPECT_EQ(std::filesystem::file_size(out + "/a.0.bin"), 16 * sizeof(float));
  // Where the output is, and a fetch without the controller's data token.
  auto outs = cluster_->Get("/api/v1/jobs/1/outputs");
  ASSERT_TRUE(outs.is_object() && outs["outputs"].size() == 1) << outs.dump();
  const std::string endpoint = outs["outputs"][0]["endpoint"].get<std::string>();
  const uint32_t run = outs["outputs"][0]["run"].get<uint32_t>();
  auto refused = worker::FetchOutputs(endpoint, NewDataToken(), 1, run, 10000);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), StatusCode::kPermissionDenied) << refused.status().ToString();
  EXPECT_NE(refused.status().message().find("refused: wrong data token"), std::string::npos);
  // The driver library's fetch (hmpmd submit --fetch, the Python binding)
  // is refused the same way, not left to its time-out.
  auto refused_driver = client::FetchOutputs(endpoint, NewDataToken(), 1, run, 60'000);
  EXPECT_EQ(refused_driver.status().code(), StatusCode::kPermissionDenied)
      << refused_driver.status().ToString();
  EXPECT_NE(refused_driver.status().message().find("refused: wrong data token"), std::string::npos);
  // A raw peer without credentials cannot even connect to the worker's
  // data socket, so the never-ending message it sends (200 frames of 1 MiB,
  // zero-copy from one buffer) stays in its own socket: its monitor's first
  // handshake event is a failure.
  {
    static const std::string kMiB(1 << 20, 'x');
    zmq::context_t ctx(1);
    zmq::socket_t rogue(ctx, zmq::socket_type::dealer);
    rogue.set(zmq::sockopt::linger, 0);
    zmq::socket_t events = MonitorHandshakes(ctx, rogue);
    rogue.connect(endpoint);
    for (int i = 0; i < 200; ++i) {
      zmq::message_t frame(const_cast<char*>(kMiB.data()), kMiB.size(), nullptr, nullptr);
      if (!rogue.send(frame, zmq::send_flags::sndmore | zmq::send_flags::dontwait)) break;
    }
    const int event = NextMonitorEvent(events, 30'000);  // within moments
    EXPECT_NE(event, 0) << "no handshake event";
    EXPECT_NE(event, ZMQ_EVENT_HANDSHAKE_SUCCEEDED) << "the worker let a peer without a token in";
  }
  auto authorised = cluster_->Call("GET", "/api/v1/jobs/1/outputs", "",
                                   {{"Authorization", std::string("Bearer ") + kToken}});
  ASSERT_TRUE(authorised.ok());
  auto token = ParseDataToken(
      nlohmann::json::parse(authorised->body, nullptr, false).value("data_token", ""));
  ASSERT_TRUE(token.ok()) << authorised->body;
  auto got = worker::FetchOutputs(endpoint, *token, 1, run, 10000);
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  EXPECT_EQ((*got)[0].data.size(), 16 * sizeof(float));
}

TEST_F(AccessControlTest, CurveWorkerWithItsKeyJoinsAndOneWithAWrongKeyCannot) {
  Keygen(Path("keys"));
  Keygen(Path("other"));
  // The intruder knows the controller's public key but has its own pair.
  std::filesystem::create_directories(Path("intruder"));
  std::filesystem::copy_file(Path("keys/controller.pub"), Path("intruder/controller.pub"));
  std::filesystem::copy_file(Path("other/worker.pub"), Path("intruder/worker.pub"));
  std::filesystem::copy_file(Path("other/worker.key"), Path("intruder/worker.key"));

  ASSERT_TRUE(cluster_->StartController({"--curve-keys", Path("keys")}).ok());
  ASSERT_TRUE(cluster_->StartWorker({"--curve-keys", Path("intruder")}).ok());
  ASSERT_TRUE(cluster_->StartWorker({"--curve-keys", Path("keys")}).ok());
  ASSERT_TRUE(WaitAlive(1));
  auto id = cluster_->Submit(kSpec);
  ASSERT_TRUE(id.ok()) << id.status().ToString();
  EXPECT_EQ(cluster_->WaitJob(*id, 30000).value("state", ""), "succeeded");
  // The intruder keeps trying and never gets in.
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  EXPECT_EQ(AliveWorkers(), 1u);
  EXPECT_NE(Slurp("controller.log").find("CURVE key is not authorized"), std::string::npos);
}

// The resident memory of process `pid`, in bytes; 0 when unknown.
int64_t ResidentBytes(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/status");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("VmRSS:", 0) == 0) return std::stoll(line.substr(6)) * 1024;
  }
  return 0;
}

// The token is checked in the handshake (ZAP), before a peer can send
// anything: three peers without it (no credentials at all, PLAIN without a
// password, PLAIN with a wrong one) each send a finished message of 96 MiB
// in 24,576 parts, and none of it reaches the controller (before, it read
// such a message whole before it could look for a token: 300 MiB of parts
// raised its memory from 10 MB to 543 MB). Each is refused once, counted
// and logged (see below for the one without credentials).
TEST_F(AccessControlTest, PeersWithoutTheTokenAreRefusedInTheHandshakeAndSendNothing) {
  std::ofstream(Path("token")) << kToken << "\n";
  cluster_->set_rest_token(kToken);
  ASSERT_TRUE(cluster_->StartController({"--token-file", Path("token")}).ok());
  ASSERT_FALSE(cluster_->Get("/api/v1/pool").is_null());  // up and answering
  const int64_t before = ResidentBytes(cluster_->controller_pid());
  ASSERT_GT(before, 0);

  static const std::string kPart(4096, 'x');
  constexpr int kParts = 24576;
  zmq::context_t ctx(1);
  const std::vector<std::pair<bool, std::string>> peers = {
      {false, ""}, {true, ""}, {true, "wrong"}};  // (PLAIN?, password)
  for (const auto& [plain, password] : peers) {
    zmq::socket_t rogue(ctx, zmq::socket_type::dealer);
    rogue.set(zmq::sockopt::linger, 0);
    rogue.set(zmq::sockopt::sndhwm, 0);
    rogue.set(zmq::sockopt::reconnect_ivl, -1);  // one try: one refusal
    if (plain) SetControlCredentials(rogue, password);
    zmq::socket_t events = MonitorHandshakes(ctx, rogue);
    // Queued while the handshake runs (a DEALER without a pipe blocks).
    rogue.connect(cluster_->zmq_endpoint());
    for (int i = 0; i < kParts; ++i) {
      zmq::message_t part(const_cast<char*>(kPart.data()), kPart.size(), nullptr, nullptr);
      // Not waiting: a refused DEALER has no pipe, and a send would block.
      const auto more = i + 1 < kParts ? zmq::send_flags::sndmore : zmq::send_flags::none;
      if (!rogue.send(part, more | zmq::send_flags::dontwait)) break;
    }
    const int event = NextMonitorEvent(events, 30'000);
    const std::string who = plain ? "PLAIN '" + password + "'" : "without credentials";
    if (plain) {
      EXPECT_EQ(event, ZMQ_EVENT_HANDSHAKE_FAILED_AUTH) << who;
    } else {
      // The controller closes on the mismatch; the peer may see that
      // first, before it reads the error.
      EXPECT_TRUE(event == ZMQ_EVENT_HANDSHAKE_FAILED_PROTOCOL ||
                  event == ZMQ_EVENT_HANDSHAKE_FAILED_NO_DETAIL)
          << who << ": event " << event;
    }
  }
  static const std::regex re("hmpmd_refused_tokens_total ([0-9.e+]+)");
  std::smatch match;
  // The peer without credentials is counted when the controller reads its
  // greeting; it may drop the connection first (it sees the mismatch too).
  double refused = 0;
  for (int i = 0; i < 250 && refused < 3; ++i) {
    auto metrics =
        cluster_->Call("GET", "/metrics", "", {{"Authorization", std::string("Bearer ") + kToken}});
    if (metrics.ok() && std::regex_search(metrics->body, match, re)) refused = std::stod(match[1]);
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  EXPECT_GE(refused, 2);
  EXPECT_LE(refused, 3);
  // 288 MiB were sent; a controller that took them would hold them.
  const int64_t after = ResidentBytes(cluster_->controller_pid());
  std::printf("controller resident memory: %.1f MiB before, %.1f MiB after 288 MiB were sent\n",
              static_cast<double>(before) / (1 << 20), static_cast<double>(after) / (1 << 20));
  EXPECT_LT(after - before, int64_t{64} << 20) << before << " -> " << after << " bytes";

  // The count is taken where the connection is refused; the line is
  // logged when the controller's loop next polls the transport's monitor,
  // so it may come a moment later (once it had not, at the kill).
  const std::string no_token = "refused a connection: no token: it did not speak PLAIN";
  for (int i = 0;
       i < 100 && refused == 3 && Slurp("controller.log").find(no_token) == std::string::npos;
       ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  cluster_->KillController();
  const std::string log = Slurp("controller.log");
  EXPECT_NE(log.find("refused a connection from '127.0.0.1': wrong or missing token"),
            std::string::npos)
      << log;
  if (refused == 3) {
    EXPECT_NE(log.find(no_token), std::string::npos) << log;
  }
}

// A peer with the token in its handshake can still send registrations
// with a wrong token inside as fast as it likes, with names of any length
// (that check stays, for CURVE peers, whose handshake carries no token):
// they are counted, and the log names them only at the 1st, 2nd, 4th, ...
// refusal, cut short and on one line (before: every refusal, raw: 48.8 MB
// of log in 0.4 s, and a newline in a name forged log lines). A worker
// with the token but a name holding a control character is refused and
// exits.
TEST_F(AccessControlTest, RefusedRegistrationsAreCountedAndTheirNamesNeverFloodOrForgeTheLog) {
  std::ofstream(Path("token")) << kToken << "\n";
  cluster_->set_rest_token(kToken);  // its reads need the token too
  ASSERT_TRUE(cluster_->StartController({"--token-file", Path("token")}).ok());
  zmq::context_t ctx(1);
  zmq::socket_t rogue(ctx, zmq::socket_type::dealer);
  rogue.set(zmq::sockopt::linger, 0);
  SetControlCredentials(rogue, kToken);
  rogue.connect(cluster_->zmq_endpoint());
  RegisterMsg m;
  m.name = "evil\nFORGED LINE " + std::string(100000, 'x');
  m.token = "wrong";
  m.cores = {CoreGroup{CoreKind::kCube, 1}};
  m.kernels = {"noop"};
  const EncodedFrames frames = Encode(Message(m));
  constexpr int kSent = 200;
  for (int i = 0; i < kSent; ++i) {
    rogue.send(zmq::buffer(frames.header), zmq::send_flags::sndmore);
    rogue.send(zmq::buffer(frames.body), zmq::send_flags::none);
  }
  std::smatch match;
  static const std::regex re("hmpmd_refused_tokens_total ([0-9.e+]+)");
  double refused = 0;
  for (int i = 0; i < 250 && refused < kSent; ++i) {
    auto metrics =
        cluster_->Call("GET", "/metrics", "", {{"Authorization", std::string("Bearer ") + kToken}});
    if (metrics.ok() && std::regex_search(metrics->body, match, re)) refused = std::stod(match[1]);
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  EXPECT_EQ(refused, kSent);

  std::ofstream(Path("worker-token")) << kToken << "\n";
  ASSERT_TRUE(
      cluster_->StartWorker({"--token-file", Path("worker-token"), "--name", "a\nFORGED"}).ok());
  bool exited = false;
  for (int i = 0; i < 250 && !exited; ++i) {
    exited = !cluster_->WorkerRunning(0);
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  EXPECT_TRUE(exited) << "a worker named with a newline was not refused";
  EXPECT_EQ(AliveWorkers(), 0u);

  cluster_->KillController();
  const std::string log = Slurp("controller.log");
  size_t lines = 0;
  for (size_t at = log.find("refused worker"); at != std::string::npos;
       at = log.find("refused worker", at + 1)) {
    ++lines;
  }
  EXPECT_GE(lines, 1u);
  EXPECT_LE(lines, 9u) << "1st, 2nd, 4th, ..., 128th of 200";
  EXPECT_EQ(log.find("\nFORGED"), std::string::npos) << "a name forged a log line";
  EXPECT_LT(log.size(), 100000u);
}

}  // namespace
}  // namespace hmpmd::testing
