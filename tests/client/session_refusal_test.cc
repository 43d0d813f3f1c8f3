// Client::Connect() tells why a controller refused the session, by code:
// a wrong token is kPermissionDenied, and a job store that cannot be
// written kUnavailable (try again later), where it was kInvalidArgument.
#include <gtest/gtest.h>

#include <memory>
#include <thread>

#include "controller.h"
#include "hmpmd/client/client.h"
#include "in_memory_job_store.h"
#include "store_writer.h"

namespace hmpmd {
namespace {

class SessionRefusalTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ControllerOptions o;
    o.listen = "tcp://127.0.0.1:0";
    o.token = "secret";
    o.store = store_;
    o.store_writer.flush_ms = 1;
    controller_ = std::make_unique<Controller>(o);
    ASSERT_TRUE(controller_->Start().ok());
    loop_ = std::thread([this] { controller_->Run(); });
  }
  void TearDown() override {
    controller_->Stop();
    loop_.join();
  }

  Status Connect(const std::string& token, const std::string& session = "s") {
    client::ClientOptions o;
    o.controller = controller_->endpoint();
    o.token = token;
    o.session = session;
    o.connect_timeout_ms = 10000;
    auto c = client::Client::Connect(o);
    if (c.ok()) {
      EXPECT_TRUE((*c)->Close().ok());
    }
    return c.status();
  }

  std::shared_ptr<InMemoryJobStore> store_ = std::make_shared<InMemoryJobStore>();
  std::unique_ptr<Controller> controller_;
  std::thread loop_;
};

TEST_F(SessionRefusalTest, EachRefusalHasTheCodeOfItsCause) {
  ASSERT_TRUE(Connect("secret").ok());
  Status st = Connect("wrong");
  EXPECT_EQ(st.code(), StatusCode::kPermissionDenied) << st.ToString();

  store_->FailWrites(true);  // a full disk
  st = Connect("secret");
  EXPECT_EQ(st.code(), StatusCode::kUnavailable) << st.ToString();
  EXPECT_NE(st.message().find("job not submitted: the job store cannot be written"),
            std::string::npos)
      << st.message();
  store_->FailWrites(false);  // room again: the retried batch goes in
  for (int i = 0; i < 500 && !controller_->store_writer()->last_write().ok(); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  EXPECT_TRUE(Connect("secret").ok());
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

}  // namespace
}  // namespace hmpmd
