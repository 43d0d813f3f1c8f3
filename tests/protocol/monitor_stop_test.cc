// StopMonitor (data_auth.h): a monitor whose PAIR closed while its socket
// still raised events blocked the context's I/O thread for good (libzmq
// sends each event with a blocking send), and every socket of that context
// with it: a worker that never registered again.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <string>
#include <thread>
#include <zmq.hpp>

#include "hmpmd/protocol/data_auth.h"

namespace hmpmd {
namespace {

// A TCP port that accepts connections and closes each at once, so a ZeroMQ
// peer's every handshake there fails (and is retried) until Stop().
class HangUpPort {
 public:
  HangUpPort() {
    fd_ = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof(a);
    if (fd_ < 0 || ::bind(fd_, reinterpret_cast<sockaddr*>(&a), len) != 0 ||
        ::listen(fd_, 64) != 0 || ::getsockname(fd_, reinterpret_cast<sockaddr*>(&a), &len) != 0) {
      return;
    }
    port_ = ntohs(a.sin_port);
    thread_ = std::thread([this] {
      // Bounded: 10 s at most, whatever the test does.
      for (int i = 0; i < 1000 && !stop_; ++i) {
        pollfd p{fd_, POLLIN, 0};
        if (::poll(&p, 1, 10) > 0) {
          const int c = ::accept(fd_, nullptr, nullptr);
          if (c >= 0) ::close(c);
        }
      }
    });
  }
  ~HangUpPort() { Stop(); }
  void Stop() {
    stop_ = true;
    if (thread_.joinable()) thread_.join();
    if (fd_ >= 0) ::close(fd_);
    fd_ = -1;
  }
  std::string endpoint() const { return "tcp://127.0.0.1:" + std::to_string(port_); }
  bool ok() const { return port_ != 0; }

 private:
  int fd_ = -1;
  int port_ = 0;
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

// Whether a message still crosses TCP between two new sockets of `ctx`
// (which needs its I/O thread), within 3 s.
bool IoThreadWorks(zmq::context_t& ctx) {
  zmq::socket_t router(ctx, zmq::socket_type::router);
  router.set(zmq::sockopt::linger, 0);
  router.bind("tcp://127.0.0.1:*");
  zmq::socket_t dealer(ctx, zmq::socket_type::dealer);
  dealer.set(zmq::sockopt::linger, 0);
  dealer.connect(router.get(zmq::sockopt::last_endpoint));
  dealer.send(zmq::str_buffer("ping"), zmq::send_flags::dontwait);
  zmq::pollitem_t item{router.handle(), 0, ZMQ_POLLIN, 0};
  return zmq::poll(&item, 1, std::chrono::milliseconds(3000)) == 1;
}

TEST(StopMonitorTest, ASocketStillFailingHandshakesLeavesTheIoThreadFree) {
  HangUpPort port;
  ASSERT_TRUE(port.ok());
  zmq::context_t ctx(1);
  zmq::socket_t s(ctx, zmq::socket_type::dealer);
  s.set(zmq::sockopt::linger, 0);
  s.set(zmq::sockopt::reconnect_ivl, 5);
  zmq::socket_t monitor = MonitorHandshakes(ctx, s);
  s.connect(port.endpoint());
  // Handshakes fail and are retried every few ms; some events are queued.
  int events = 0;
  for (int i = 0; i < 100 && events < 3; ++i) events += NextMonitorEvent(monitor, 50) != 0;
  EXPECT_GE(events, 3);
  StopMonitor(s, monitor);
  // The socket keeps failing handshakes with nobody reading its events.
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  EXPECT_TRUE(IoThreadWorks(ctx));
  port.Stop();
  s.close();
}

TEST(StopMonitorTest, EmptySocketsAreLeftAlone) {
  zmq::context_t ctx(1);
  zmq::socket_t none, monitor;
  StopMonitor(none, monitor);  // neither exists
  zmq::socket_t s(ctx, zmq::socket_type::dealer);
  zmq::socket_t m = MonitorHandshakes(ctx, s);
  zmq::socket_t moved = std::move(s);  // as a resumed session's socket is
  StopMonitor(s, m);                   // s is empty: only the PAIR closes
  EXPECT_FALSE(m);
  StopMonitor(moved, none);
}

}  // namespace
}  // namespace hmpmd
