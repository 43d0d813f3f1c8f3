// Labels with real processes: two workers started with different
// `--label accel=...`, a job whose encoder sub-model requires one of them
// (docs/scheduling.md, "Labels"). The encoder's tasks run only on that
// worker, a task that requires the other label runs on the other, the pool
// and the task table show the labels, a job that requires a label no
// worker has is refused at submission naming the task and the label, and a
// register with a bad label is refused naming it. A driver's actors and
// calls require labels the same way.
#include <gtest/gtest.h>

#include <chrono>
#include <string>
#include <variant>
#include <zmq.hpp>

#include "hmpmd/client/client.h"
#include "hmpmd/protocol/codec.h"
#include "hmpmd/protocol/control_auth.h"
#include "process_cluster_fixture.h"

namespace hmpmd::testing {
namespace {

class LabelsLiveTest : public ProcessClusterFixture,
                       public ::testing::WithParamInterface<std::string> {
 protected:
  LabelsLiveTest() : ProcessClusterFixture("hmpmd-labels") {}
  void Start() {
    ASSERT_TRUE(cluster_->StartController({"--policy", GetParam()}).ok());
    ASSERT_TRUE(cluster_->StartWorker({"--name", "w910b", "--label", "accel=910b"}).ok());
    ASSERT_TRUE(
        cluster_->StartWorker({"--name", "w910c", "--label", "accel=910c", "--label", "zone=a"})
            .ok());
    ASSERT_TRUE(cluster_->WaitWorkers(2, 20000));
  }
  // Checks job `id`'s task table: the "enc..." tasks ran on w910c and say
  // they require accel=910c, "head" ran on w910b, and (with
  // `others_require_nothing`) the rest say no requirement. Returns how many
  // enc and head tasks it found.
  int CheckPlaces(uint64_t id, bool others_require_nothing) {
    auto table = cluster_->Get("/api/v1/jobs/" + std::to_string(id) + "/tasks?limit=100");
    EXPECT_TRUE(table.is_object()) << table.dump();
    int checked = 0;
    for (const auto& t : table.value("tasks", nlohmann::json::array())) {
      const std::string task = t.value("id", "");
      if (task.starts_with("enc")) {
        EXPECT_EQ(t.value("worker", ""), "w910c") << GetParam() << ": " << t.dump();
        EXPECT_EQ(t["requires"], nlohmann::json({{"accel", "910c"}})) << t.dump();
        ++checked;
      } else if (task == "head") {
        EXPECT_EQ(t.value("worker", ""), "w910b") << GetParam() << ": " << t.dump();
        ++checked;
      } else if (others_require_nothing) {
        EXPECT_FALSE(t.contains("requires")) << t.dump();
      }
    }
    return checked;
  }
};

// Six encoder tasks (the sub-model requires accel=910c), each feeding a
// decoder task that requires nothing, and a head that requires 910b.
std::string EncoderJob() {
  std::string tasks;
  for (int i = 0; i < 6; ++i) {
    const std::string n = std::to_string(i);
    tasks +=
        R"({"id":"enc)" + n + R"(","kernel":"sleep","args":{"us":5000},"submodel":"encoder"},)";
    tasks += R"({"id":"dec)" + n + R"(","kernel":"sleep","args":{"us":5000},"inputs":["enc)" + n +
             R"("]},)";
  }
  tasks += R"({"id":"head","kernel":"noop","inputs":["dec0"],"requires":{"accel":"910b"}})";
  return R"({"name":"labelled","submodels":[{"name":"encoder","kind":"encoder",)"
         R"("requires":{"accel":"910c"}}],"tasks":[)" +
         tasks + "]}";
}

TEST_P(LabelsLiveTest, TasksRunOnlyOnWorkersWithTheLabelsTheyRequire) {
  Start();
  auto pool = cluster_->Get("/api/v1/pool");
  ASSERT_TRUE(pool.is_object()) << pool.dump();
  for (const auto& d : pool["devices"]) {
    const std::string name = d.value("name", "");
    if (name == "w910b") {
      EXPECT_EQ(d["labels"], nlohmann::json({{"accel", "910b"}}));
    } else if (name == "w910c") {
      EXPECT_EQ(d["labels"], nlohmann::json({{"accel", "910c"}, {"zone", "a"}}));
    }
  }
  auto id = cluster_->Submit(EncoderJob());
  ASSERT_TRUE(id.ok()) << id.status().ToString();
  ASSERT_EQ(cluster_->WaitJob(*id, 30000).value("state", ""), "succeeded");
  EXPECT_EQ(CheckPlaces(*id, true), 7);
}

TEST_P(LabelsLiveTest, AJobNoWorkerCanRunIsRefusedNamingTheLabel) {
  Start();
  auto id = cluster_->Submit(R"({"tasks":[{"id":"a","kernel":"noop"},)"
                             R"({"id":"enc","kernel":"noop","requires":{"accel":"910x"}}]})");
  ASSERT_FALSE(id.ok());
  EXPECT_NE(id.status().message().find("HTTP 400"), std::string::npos) << id.status().message();
  EXPECT_NE(id.status().message().find("tasks[1] 'enc': requires accel=910x: no worker has it"),
            std::string::npos)
      << id.status().message();
}

// Labels come from the wire too: a register whose label breaks the rules
// --label checks is refused with a Reject naming it, and adds no device.
TEST_P(LabelsLiveTest, ARegisterWithABadLabelIsRejectedNamingIt) {
  Start();
  RegisterMsg r;
  r.name = "bad-labels";
  r.pid = 4242;
  r.cores = {{CoreKind::kCube, 1}};
  r.kernels = {"noop"};
  r.labels = {{"accel", "9\n10c"}};
  zmq::context_t ctx(1);
  zmq::socket_t s(ctx, zmq::socket_type::dealer);
  s.set(zmq::sockopt::linger, 0);
  SetControlCredentials(s, "");
  s.connect(cluster_->zmq_endpoint());
  EncodedFrames f = Encode(Message(r));
  s.send(zmq::buffer(f.header), zmq::send_flags::sndmore);
  s.send(zmq::buffer(f.body), zmq::send_flags::none);
  zmq::pollitem_t item{s.handle(), 0, ZMQ_POLLIN, 0};
  ASSERT_EQ(zmq::poll(&item, 1, std::chrono::milliseconds(10000)), 1) << "no answer";
  zmq::message_t header, body;
  ASSERT_TRUE(s.recv(header) && s.recv(body));
  auto m = Decode(header.to_string_view(), body.to_string_view());
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  ASSERT_TRUE(std::holds_alternative<Reject>(*m));
  EXPECT_EQ(std::get<Reject>(*m).reason, "labels: value: contains the control character U+000A");
  EXPECT_EQ(cluster_->Get("/api/v1/pool").value("alive_devices", 0), 2);
}

// A driver session: an actor that requires accel=910c runs its calls only
// on w910c, a call that requires 910b only on w910b, a call that requires
// a label no worker has is rejected naming it, and a malformed label is
// rejected naming the task; the session goes on.
TEST_P(LabelsLiveTest, ADriversActorsAndCallsRunWhereTheirLabelsAre) {
  Start();
  client::ClientOptions o;
  o.controller = cluster_->zmq_endpoint();
  o.session = "labelled-driver";
  auto c = client::Client::Connect(o);
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  client::ActorOptions enc;
  enc.name = "enc";
  enc.kind = SubmodelKind::kEncoder;
  enc.devices = 0;
  enc.required = {{"accel", "910c"}};
  auto actor = (*c)->CreateActor(enc);
  ASSERT_TRUE(actor.ok()) << actor.status().ToString();
  std::vector<client::Future> on_c;
  for (int i = 0; i < 4; ++i) {
    client::Call call;
    call.args = {{"us", int64_t{2000}}};
    call.label = "enc" + std::to_string(i);
    auto f = actor->Call("sleep", call);
    ASSERT_TRUE(f.ok()) << f.status().ToString();
    on_c.push_back(*f);
  }
  client::Call head;
  head.kernel = "noop";
  head.label = "head";
  head.required = {{"accel", "910b"}};
  auto on_b = (*c)->Submit(head);
  ASSERT_TRUE(on_b.ok()) << on_b.status().ToString();
  client::Call nowhere = head;
  nowhere.label = "nowhere";
  nowhere.required = {{"accel", "910x"}};
  auto missing = (*c)->Submit(nowhere);
  ASSERT_TRUE(missing.ok()) << missing.status().ToString();
  client::Call bad = head;
  bad.label = "bad";
  bad.required = {{"", "910b"}};
  auto malformed = (*c)->Submit(bad);
  ASSERT_TRUE(malformed.ok()) << malformed.status().ToString();

  for (auto& f : on_c) EXPECT_TRUE(f.Wait(20000).ok()) << f.label();
  EXPECT_TRUE(on_b->Wait(20000).ok());
  Status m = missing->Wait(20000);
  EXPECT_NE(m.message().find("requires accel=910x: no worker has it"), std::string::npos)
      << m.ToString();
  Status b = malformed->Wait(20000);
  EXPECT_NE(b.message().find("'bad': requires: key: empty"), std::string::npos) << b.ToString();

  // "nowhere" and "bad" were refused at submission.
  EXPECT_EQ(CheckPlaces((*c)->job(), false), 5);
  (void)(*c)->Abort();
}

INSTANTIATE_TEST_SUITE_P(Policies, LabelsLiveTest, ::testing::Values("hmpmd", "fifo"));

}  // namespace
}  // namespace hmpmd::testing
