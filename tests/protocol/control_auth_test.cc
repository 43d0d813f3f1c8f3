// The controller port's handshake (control_auth.h), on a ROUTER of its own
// with a ZAP handler that checks one token as the controller's does: who
// gets a connection, and what a refused peer's monitor sees.
#include "hmpmd/protocol/control_auth.h"

#include <gtest/gtest.h>
#include <zmq.h>

#include <chrono>
#include <optional>
#include <string>
#include <zmq.hpp>

#include "hmpmd/protocol/data_auth.h"
#include "hmpmd/protocol/same_secret.h"

namespace hmpmd {
namespace {

ZapRequest Plain(const std::string& password) {
  return ZapRequest{"hmpmd", "127.0.0.1", "PLAIN", {kControlPlainUser, password}};
}

TEST(ControlPasswordTest, APlainPeersPasswordAndNothingForOtherMechanisms) {
  EXPECT_EQ(ControlPassword(Plain("s3cret")), "s3cret");
  EXPECT_EQ(ControlPassword(Plain("")), "");
  EXPECT_EQ(ControlPassword(ZapRequest{"hmpmd", "127.0.0.1", "NULL", {}}), std::nullopt);
  EXPECT_EQ(ControlPassword(ZapRequest{"hmpmd", "127.0.0.1", "CURVE", {std::string(32, 'k')}}),
            std::nullopt);
  // A user name without a password is no PLAIN request.
  EXPECT_EQ(ControlPassword(ZapRequest{"hmpmd", "127.0.0.1", "PLAIN", {"s3cret"}}), std::nullopt);
}

class ControlHandshakeTest : public ::testing::Test {
 protected:
  // A ROUTER as the controller's, with `token`; its endpoint.
  std::string Serve(const std::string& token) {
    token_ = token;
    // As the controller's TokenBook decides for one token.
    zap_.emplace(&ctx_, [this](const ZapRequest& r) {
      const std::optional<std::string> password = ControlPassword(r);
      return password && (token_.empty() || SameSecret(token_, *password));
    });
    EXPECT_TRUE(zap_->Start().ok());
    router_.set(zmq::sockopt::linger, 0);
    MakeControlServer(router_);
    router_.bind("tcp://127.0.0.1:*");
    return router_.get(zmq::sockopt::last_endpoint);
  }
  // Connects a peer (PLAIN with `password` when set, else no credentials)
  // that sends one message; its first handshake event and whether the
  // ROUTER got the message.
  std::pair<int, bool> Try(const std::string& endpoint, std::optional<std::string> password) {
    zmq::socket_t peer(ctx_, zmq::socket_type::dealer);
    peer.set(zmq::sockopt::linger, 0);
    peer.set(zmq::sockopt::reconnect_ivl, -1);
    if (password) SetControlCredentials(peer, *password);
    zmq::socket_t events = MonitorHandshakes(ctx_, peer);
    peer.connect(endpoint);  // first: a DEALER without a pipe blocks a send
    // Not waiting: a refused DEALER has no pipe, and a send would block.
    (void)peer.send(zmq::str_buffer("hello"), zmq::send_flags::dontwait);
    const int event = NextMonitorEvent(events, 10'000);
    zmq::pollitem_t item{router_.handle(), 0, ZMQ_POLLIN, 0};
    const bool got =
        zmq::poll(
            &item, 1,
            std::chrono::milliseconds(event == ZMQ_EVENT_HANDSHAKE_SUCCEEDED ? 10'000 : 200)) > 0;
    if (got) {
      zmq::message_t m;
      do {
        (void)router_.recv(m);
      } while (m.more());
    }
    return {event, got};
  }

  // A peer without credentials: the server closes on the mismatch, and
  // the peer may see that before it reads the error.
  static void ExpectMismatch(std::pair<int, bool> got) {
    EXPECT_TRUE(got.first == ZMQ_EVENT_HANDSHAKE_FAILED_PROTOCOL ||
                got.first == ZMQ_EVENT_HANDSHAKE_FAILED_NO_DETAIL)
        << "event " << got.first;
    EXPECT_FALSE(got.second);
  }

  zmq::context_t ctx_{1};
  std::string token_;
  std::optional<ZapHandler> zap_;  // before router_ closes, after ctx_
  zmq::socket_t router_{ctx_, zmq::socket_type::router};
};

TEST_F(ControlHandshakeTest, WithATokenOnlyItsHolderGetsASingleMessageThrough) {
  const std::string ep = Serve("s3cret");
  EXPECT_EQ(Try(ep, "s3cret"), std::make_pair(int{ZMQ_EVENT_HANDSHAKE_SUCCEEDED}, true));
  EXPECT_EQ(Try(ep, "wrong"), std::make_pair(int{ZMQ_EVENT_HANDSHAKE_FAILED_AUTH}, false));
  EXPECT_EQ(Try(ep, ""), std::make_pair(int{ZMQ_EVENT_HANDSHAKE_FAILED_AUTH}, false));
  ExpectMismatch(Try(ep, std::nullopt));
  EXPECT_EQ(zap_->refused(), 2u);  // the peer without credentials never asks
}

TEST_F(ControlHandshakeTest, WithoutATokenEveryPlainPeerGetsThrough) {
  const std::string ep = Serve("");
  EXPECT_EQ(Try(ep, ""), std::make_pair(int{ZMQ_EVENT_HANDSHAKE_SUCCEEDED}, true));
  EXPECT_EQ(Try(ep, "any"), std::make_pair(int{ZMQ_EVENT_HANDSHAKE_SUCCEEDED}, true));
  ExpectMismatch(Try(ep, std::nullopt));
}

}  // namespace
}  // namespace hmpmd
