// A worker whose connection closes (its process exited, or was killed) is
// declared dead within Controller::DisconnectGraceUs() (one heartbeat
// period and a half), not after the heartbeat time-out; one that comes back
// on a new connection within that grace is not.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <thread>
#include <zmq.hpp>

#include "cluster_fixture.h"
#include "fake_worker_wire.h"
#include "hmpmd/protocol/codec.h"
#include "hmpmd/protocol/control_auth.h"

namespace hmpmd::testing {
namespace {

RegisterMsg FakeWorker(uint64_t instance) {
  RegisterMsg r;
  r.name = "fake-" + std::to_string(instance);
  r.pid = 4242;
  r.instance = instance;
  r.cores = {{CoreKind::kCube, 1}};
  r.kernels = {"noop"};
  return r;
}

class WorkerDisconnectTest : public ClusterTest {
 protected:
  // Heartbeats are not what finds these deaths: their time-out is a minute.
  void Start(uint32_t heartbeat_ms) {
    ControllerOptions c;
    c.heartbeat_ms = heartbeat_ms;
    c.worker_timeout_ms = 60'000;
    StartCluster(1, "cube=1", c);
    endpoint_ = cluster_->Call([&] { return cluster_->controller().endpoint(); });
  }

  // Registers `r` on `s` and waits for its ack.
  void Register(zmq::socket_t& s, const RegisterMsg& r) {
    s.set(zmq::sockopt::linger, 0);
    SetControlCredentials(s, "");
    s.connect(endpoint_);
    Send(s, r);
    ASSERT_TRUE(Next(s, MsgType::kRegisterAck)) << "no RegisterAck for " << r.name;
  }

  // The entry of `instance` registered last: whether it is alive, whether
  // its connection is seen closed, and why it left.
  struct Seen {
    bool alive = false;
    bool suspected = false;
    std::string left_reason;
  };
  Seen Look(uint64_t instance) {
    return cluster_->Call([&] {
      Seen seen;
      for (const WorkerInfo& w : cluster_->controller().workers()) {
        if (w.instance != instance) continue;
        seen = {w.alive, w.disconnected_at != 0, w.left_reason};
      }
      return seen;
    });
  }

  std::string endpoint_;
  zmq::context_t ctx_{1};
};

TEST_F(WorkerDisconnectTest, AWorkerWhoseConnectionClosesIsSuspectedThenDeclaredDead) {
  Start(/*heartbeat_ms=*/2000);  // a grace of 3 s, long enough to see the suspicion
  {
    zmq::socket_t s(ctx_, zmq::socket_type::dealer);
    ASSERT_NO_FATAL_FAILURE(Register(s, FakeWorker(7)));
    ASSERT_TRUE(Look(7).alive);
  }  // closed, as by the death of its process
  Seen seen;
  for (int i = 0; i < 2000 && !(seen = Look(7)).suspected && seen.alive; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  EXPECT_TRUE(seen.suspected) << "a closed connection was not noticed";
  EXPECT_TRUE(seen.alive) << "declared dead before its grace ran out";
  for (int i = 0; i < 2000 && (seen = Look(7)).alive; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  ASSERT_FALSE(seen.alive) << "not declared dead within 20 s (the heartbeat time-out is 60 s)";
  EXPECT_NE(seen.left_reason.find("connection closed"), std::string::npos) << seen.left_reason;
}

TEST_F(WorkerDisconnectTest, AWorkerBackOnANewConnectionWithinItsGraceStaysAlive) {
  Start(/*heartbeat_ms=*/200);  // a grace of 300 ms
  zmq::socket_t again(ctx_, zmq::socket_type::dealer);
  {
    zmq::socket_t first(ctx_, zmq::socket_type::dealer);
    ASSERT_NO_FATAL_FAILURE(Register(first, FakeWorker(9)));
  }
  ASSERT_NO_FATAL_FAILURE(Register(again, FakeWorker(9)));  // the same process, reconnected
  // Several graces later it is alive, with no suspicion left.
  std::this_thread::sleep_for(std::chrono::milliseconds(1500));
  const Seen seen = Look(9);
  EXPECT_TRUE(seen.alive) << seen.left_reason;
  EXPECT_FALSE(seen.suspected);
  EXPECT_EQ(cluster_->Call([&] { return cluster_->controller().workers().alive_count(); }), 2u);
}

}  // namespace
}  // namespace hmpmd::testing
