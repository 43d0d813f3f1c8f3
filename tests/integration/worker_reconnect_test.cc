// A worker whose register goes unanswered reconnects on a new socket and
// registers again (worker/serve_loop.cc). The controller used to keep its
// old entry alive too, so a slow start-up under load counted each worker
// several times (a gang "fitted" a pool it did not) until sends to the old
// sockets failed. Now an entry of the same process (name, pid, data
// endpoint) is replaced, whatever socket it came from.
#include <gtest/gtest.h>

#include <chrono>
#include <zmq.hpp>

#include "cluster_fixture.h"
#include "hmpmd/protocol/codec.h"

namespace hmpmd::testing {
namespace {

RegisterMsg FakeWorker(const std::string& data_endpoint) {
  RegisterMsg r;
  r.name = "fake";
  r.pid = 4242;
  r.cores = {{CoreKind::kCube, 1}};
  r.kernels = {"noop"};
  r.data_endpoint = data_endpoint;
  return r;
}

// Registers `r` from a socket of its own and waits for the answer.
void RegisterFrom(zmq::socket_t& s, const std::string& endpoint, const RegisterMsg& r) {
  s.set(zmq::sockopt::linger, 0);
  s.connect(endpoint);
  EncodedFrames f = Encode(Message(r));
  s.send(zmq::buffer(f.header), zmq::send_flags::sndmore);
  s.send(zmq::buffer(f.body), zmq::send_flags::none);
  zmq::pollitem_t item{s.handle(), 0, ZMQ_POLLIN, 0};
  ASSERT_EQ(zmq::poll(&item, 1, std::chrono::milliseconds(10000)), 1) << "no RegisterAck";
}

class WorkerReconnectTest : public ClusterTest {};

TEST_F(WorkerReconnectTest, TheSameWorkerOnANewSocketReplacesItsOldEntry) {
  StartCluster(1, "cube=1");
  auto alive = [&] {
    return cluster_->Call([&] { return cluster_->controller().alive_workers(); });
  };
  const std::string endpoint = cluster_->Call([&] { return cluster_->controller().endpoint(); });
  ASSERT_EQ(alive(), 1u);
  zmq::context_t ctx(1);
  zmq::socket_t first(ctx, zmq::socket_type::dealer), again(ctx, zmq::socket_type::dealer),
      other(ctx, zmq::socket_type::dealer), bare1(ctx, zmq::socket_type::dealer),
      bare2(ctx, zmq::socket_type::dealer);
  RegisterFrom(first, endpoint, FakeWorker("tcp://127.0.0.1:1"));
  EXPECT_EQ(alive(), 2u);
  RegisterFrom(again, endpoint, FakeWorker("tcp://127.0.0.1:1"));
  EXPECT_EQ(alive(), 2u) << "the reconnected worker counted twice";
  // Another process of the same name and pid (another data endpoint), and
  // two without a data endpoint, are distinct workers.
  RegisterFrom(other, endpoint, FakeWorker("tcp://127.0.0.1:2"));
  EXPECT_EQ(alive(), 3u);
  RegisterFrom(bare1, endpoint, FakeWorker(""));
  RegisterFrom(bare2, endpoint, FakeWorker(""));
  EXPECT_EQ(alive(), 5u);
}

}  // namespace
}  // namespace hmpmd::testing
