#include "fake_controller.h"

#include <gtest/gtest.h>

#include <zmq_addon.hpp>

#include "hmpmd/protocol/control_auth.h"

namespace hmpmd::worker::testing {

FakeController::FakeController() : context_(1), router_(context_, zmq::socket_type::router) {
  zap_.emplace(&context_, [](const ZapRequest& r) { return ControlPassword(r).has_value(); });
  EXPECT_TRUE(zap_->Start().ok());
  router_.set(zmq::sockopt::linger, 0);
  MakeControlServer(router_);
  router_.bind("tcp://127.0.0.1:*");
  endpoint_ = router_.get(zmq::sockopt::last_endpoint);
}

FakeController::~FakeController() {
  router_.close();
  zap_.reset();
  context_.close();
}

std::optional<Message> FakeController::Recv(std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  for (;;) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    if (left.count() < 0) return std::nullopt;
    zmq::pollitem_t item{router_.handle(), 0, ZMQ_POLLIN, 0};
    if (zmq::poll(&item, 1, left) == 0) return std::nullopt;
    std::vector<zmq::message_t> frames;
    if (!zmq::recv_multipart(router_, std::back_inserter(frames))) continue;
    if (frames.size() != 3) {
      ADD_FAILURE() << "worker sent " << frames.size() << " frames, expected 3 with identity";
      ++bad_messages_;
      continue;
    }
    peer_ = frames[0].to_string();
    Result<Message> decoded = Decode(frames[1].to_string_view(), frames[2].to_string_view());
    if (!decoded.ok()) {
      ADD_FAILURE() << "worker sent an undecodable message: " << decoded.status().ToString();
      ++bad_messages_;
      continue;
    }
    return std::move(decoded).value();
  }
}

void FakeController::Send(const Message& message) {
  EncodedFrames f = Encode(message);
  SendRaw({f.header, f.body});
}

void FakeController::SendRaw(const std::vector<std::string>& frames) {
  ASSERT_FALSE(peer_.empty()) << "no worker has spoken yet";
  router_.send(zmq::buffer(peer_), zmq::send_flags::sndmore);
  for (size_t i = 0; i < frames.size(); ++i) {
    router_.send(zmq::buffer(frames[i]),
                 i + 1 < frames.size() ? zmq::send_flags::sndmore : zmq::send_flags::none);
  }
}

}  // namespace hmpmd::worker::testing
