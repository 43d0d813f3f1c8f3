// Bad input on the wire while a job runs: random, truncated and
// wrong-version frames sent to the controller's ROUTER socket from a rogue
// peer. The job still completes and the controller's dropped-frame counter
// (/metrics, hmpmd_dropped_frames_total) rises. (A worker's own handling of
// malformed frames from its controller is tested in tests/worker.)
#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <random>
#include <regex>
#include <thread>
#include <zmq.hpp>

#include "hmpmd/protocol/codec.h"
#include "hmpmd/protocol/control_auth.h"
#include "process_cluster.h"

namespace hmpmd::testing {
namespace {

double DroppedFrames(ProcessCluster& c) {
  auto r = c.Call("GET", "/metrics", "");
  if (!r.ok()) return -1;
  std::smatch m;
  static const std::regex re("hmpmd_dropped_frames_total ([0-9.e+]+)");
  return std::regex_search(r->body, m, re) ? std::stod(m[1]) : -1;
}

TEST(BadFramesTest, GarbageToTheControllerIsDroppedAndTheJobCompletes) {
  constexpr uint32_t kSeed = 1234;
  SCOPED_TRACE("seed " + std::to_string(kSeed));
  std::mt19937 rng(kSeed);
  auto dir =
      std::filesystem::temp_directory_path() / ("hmpmd-badframes-" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  {
    ProcessCluster cluster(dir.string());
    ASSERT_TRUE(cluster.StartController().ok());
    for (int i = 0; i < 2; ++i) ASSERT_TRUE(cluster.StartWorker().ok());
    nlohmann::json tasks = nlohmann::json::array();
    for (int i = 0; i < 60; ++i) {
      tasks.push_back(
          {{"id", "t" + std::to_string(i)}, {"kernel", "sleep"}, {"args", {{"us", 5000}}}});
    }
    auto id = cluster.Submit(nlohmann::json{{"tasks", tasks}}.dump());
    ASSERT_TRUE(id.ok()) << id.status().ToString();
    double before = DroppedFrames(cluster);
    ASSERT_GE(before, 0);

    zmq::context_t ctx(1);
    zmq::socket_t rogue(ctx, zmq::socket_type::dealer);
    rogue.set(zmq::sockopt::linger, 0);
    SetControlCredentials(rogue, "");
    rogue.connect(cluster.zmq_endpoint());
    const std::string good_header = EncodeHeader(MsgType::kHeartbeat);
    std::string body;
    EncodeBody(Message(Heartbeat{0, 0, 0, 1}), &body);
    int sent = 0;
    for (int i = 0; i < 300; ++i) {
      std::string header, payload;
      switch (i % 4) {
        case 0:  // random bytes in both frames
          header.resize(rng() % 8);
          payload.resize(rng() % 64);
          for (char& ch : header) ch = static_cast<char>(rng());
          for (char& ch : payload) ch = static_cast<char>(rng());
          break;
        case 1:  // a good header and a truncated body
          header = good_header;
          payload = body.substr(0, rng() % body.size());
          break;
        case 2:  // a wrong version
          header = good_header;
          header[2] = static_cast<char>(kProtocolVersion + 1);
          payload = body;
          break;
        case 3:  // a header alone
          header = good_header.substr(0, rng() % 4);
          break;
      }
      if (i % 4 == 3) {
        rogue.send(zmq::buffer(header), zmq::send_flags::none);
      } else {
        rogue.send(zmq::buffer(header), zmq::send_flags::sndmore);
        rogue.send(zmq::buffer(payload), zmq::send_flags::none);
      }
      ++sent;
    }
    auto j = cluster.WaitJob(*id, 60000);
    EXPECT_EQ(j.value("state", ""), "succeeded") << j.dump();
    double after = DroppedFrames(cluster);
    // Every frame but the well-formed-yet-truncated ones is malformed; all
    // of them are dropped, none crashes the controller.
    EXPECT_GE(after - before, sent / 2) << "before " << before << " after " << after;
  }
  std::filesystem::remove_all(dir);
}

// A frame larger than any body Decode() takes is refused by the socket
// itself (ZMQ_MAXMSGSIZE): libzmq drops the connection instead of first
// buffering whatever size a peer announces, so the controller never holds
// such a frame in memory.
TEST(BadFramesTest, AFrameOverTheDecodeLimitNeverReachesTheController) {
  auto dir =
      std::filesystem::temp_directory_path() / ("hmpmd-bigframe-" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  {
    ProcessCluster cluster(dir.string());
    ASSERT_TRUE(cluster.StartController().ok());
    const double before = DroppedFrames(cluster);
    ASSERT_GE(before, 0);
    zmq::context_t ctx(1);
    zmq::socket_t big(ctx, zmq::socket_type::dealer);
    big.set(zmq::sockopt::linger, 0);
    SetControlCredentials(big, "");
    big.connect(cluster.zmq_endpoint());
    const std::string header = EncodeHeader(MsgType::kHeartbeat);
    std::string body(DecodeLimits{}.max_body_bytes + (1u << 20), '\x90');
    big.send(zmq::buffer(header), zmq::send_flags::sndmore);
    big.send(zmq::buffer(body), zmq::send_flags::none);
    // Given time to arrive (65 MiB over loopback takes well under this).
    double now = before;
    for (int i = 0; i < 30 && now == before; ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
      now = DroppedFrames(cluster);
    }
    EXPECT_EQ(now, before) << "the oversized frame was received and decoded";
    // A small bad frame from another peer is still received and counted.
    zmq::socket_t small(ctx, zmq::socket_type::dealer);
    small.set(zmq::sockopt::linger, 0);
    SetControlCredentials(small, "");
    small.connect(cluster.zmq_endpoint());
    small.send(zmq::buffer(header), zmq::send_flags::sndmore);
    small.send(zmq::buffer(std::string("\xc1")), zmq::send_flags::none);
    for (int i = 0; i < 100 && now < before + 1; ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
      now = DroppedFrames(cluster);
    }
    EXPECT_EQ(now, before + 1);
  }
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace hmpmd::testing
