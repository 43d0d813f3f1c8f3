// Client::Connect() tells why a controller refused the session, by code:
// a wrong token is kPermissionDenied, and a job store that cannot be
// written kUnavailable, where it was kInvalidArgument. kUnavailable is
// asked again until connect_timeout_ms: a full disk is a pause.
#include <gtest/gtest.h>
#include <pthread.h>
#include <signal.h>

#include <chrono>
#include <future>
#include <memory>
#include <thread>

#include "hmpmd/client/client.h"
#include "hmpmd/store/store_writer.h"
#include "in_process_controller.h"

namespace hmpmd {
namespace {

class SessionRefusalTest : public InProcessControllerTest {
 protected:
  SessionRefusalTest() { token_ = "secret"; }

  Status Connect(const std::string& token, const std::string& session = "s",
                 int64_t timeout_ms = 10000) {
    client::ClientOptions o = Options();
    o.token = token;
    o.session = session;
    o.connect_timeout_ms = timeout_ms;
    auto c = client::Client::Connect(o);
    if (c.ok()) {
      EXPECT_TRUE((*c)->Close().ok());
    }
    return c.status();
  }
};

TEST_F(SessionRefusalTest, EachRefusalHasTheCodeOfItsCause) {
  ASSERT_TRUE(Connect("secret").ok());
  Status st = Connect("wrong");
  EXPECT_EQ(st.code(), StatusCode::kPermissionDenied) << st.ToString();

  store_->FailWrites(true);  // a full disk
  st = Connect("secret", "s", 300);
  EXPECT_EQ(st.code(), StatusCode::kUnavailable) << st.ToString();
  EXPECT_NE(st.message().find("job not submitted: the job store cannot be written"),
            std::string::npos)
      << st.message();
  EXPECT_NE(st.message().find("asked again for 300 ms"), std::string::npos) << st.message();
  store_->FailWrites(false);  // room again: the retried batch goes in
  EXPECT_TRUE(Connect("secret").ok());
}

// A session asked for while the store cannot be written opens once it can,
// within connect_timeout_ms, as one session. Each refusal's job ends
// cancelled, saying why, once the store can be written (Controller::Submit).
TEST_F(SessionRefusalTest, AConnectDuringAFullDiskOpensOnceTheStoreCanBeWritten) {
  store_->FailWrites(true);
  auto connected = std::async(std::launch::async, [&] { return Connect("secret", "patient"); });
  ASSERT_EQ(connected.wait_for(std::chrono::milliseconds(500)), std::future_status::timeout)
      << "Connect() returned while the store could not be written: " << connected.get().ToString();
  store_->FailWrites(false);
  const Status st = connected.get();
  EXPECT_TRUE(st.ok()) << st.ToString();
  auto stored = store_->Load();
  ASSERT_TRUE(stored.ok()) << stored.status().ToString();
  int opened = 0;
  for (const StoredJob& job : *stored) {
    if (job.name != "patient") continue;
    const bool refused = job.error.find("job not submitted") != std::string::npos;
    EXPECT_TRUE(!refused || job.state == JobState::kCancelled) << job.error;
    opened += !refused;
  }
  EXPECT_EQ(opened, 1);
}

// A session name is bounded as a job spec's name is (4096 bytes).
TEST_F(SessionRefusalTest, ASessionNameOverTheSpecLimitIsRefused) {
  EXPECT_TRUE(Connect("secret", std::string(4096, 'n')).ok());
  Status st = Connect("secret", std::string(100000, 'n'));
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument) << st.ToString();
  EXPECT_NE(st.message().find("session name: 100000 bytes, longer than the limit of 4096"),
            std::string::npos)
      << st.message();
}

void IgnoreSignal(int) {}

// A signal (Ctrl-C in a Python driver) while Connect() waited escaped as a
// zmq::error_t (EINTR) and ended the program.
TEST(SessionConnectTest, ASignalWhileConnectWaitsEndsItAsUnavailable) {
  struct sigaction act = {}, old = {};
  act.sa_handler = IgnoreSignal;  // no SA_RESTART: the poll sees EINTR
  sigemptyset(&act.sa_mask);
  ASSERT_EQ(sigaction(SIGUSR1, &act, &old), 0);
  client::ClientOptions o;
  o.controller = "tcp://127.0.0.1:1";  // nothing answers there
  o.connect_timeout_ms = client::kForever;
  std::promise<Status> connected;
  std::future<Status> done = connected.get_future();
  std::thread t([&] { connected.set_value(client::Client::Connect(o).status()); });
  // Until it gives up (a signal before the poll starts is not seen).
  for (int i = 0;
       i < 6000 && done.wait_for(std::chrono::milliseconds(10)) == std::future_status::timeout;
       ++i) {
    pthread_kill(t.native_handle(), SIGUSR1);
  }
  ASSERT_EQ(done.wait_for(std::chrono::seconds(0)), std::future_status::ready);
  t.join();
  sigaction(SIGUSR1, &old, nullptr);
  Status st = done.get();
  EXPECT_EQ(st.code(), StatusCode::kUnavailable) << st.ToString();
  EXPECT_NE(st.message().find("interrupted by a signal"), std::string::npos) << st.message();
}

}  // namespace
}  // namespace hmpmd
