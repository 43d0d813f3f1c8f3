// A gtest fixture: a controller (a Service without its HTTP side) on its
// own thread in the test process, with an in-memory job store and no
// workers (so a task never ends on its own), for tests of what the driver
// sends and how it ends.
#pragma once

#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <thread>

#include "hmpmd/api/service.h"
#include "hmpmd/client/client.h"
#include "hmpmd/store/in_memory_job_store.h"

namespace hmpmd {

class InProcessControllerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ServiceOptions o;
    o.controller.listen = "tcp://127.0.0.1:0";
    o.controller.token = token_;
    o.controller.store = store_;
    o.controller.store_writer.flush_ms = 1;
    service_ = std::make_unique<Service>(o);
    ASSERT_TRUE(service_->Start().ok());
    controller_ = &service_->controller();
    loop_ = std::thread([this] { service_->Run(); });
  }
  void TearDown() override {
    service_->Stop();
    loop_.join();
  }

  client::ClientOptions Options() {
    client::ClientOptions o;
    o.controller = controller_->endpoint();
    o.token = token_;
    o.connect_timeout_ms = 10000;
    return o;
  }
  std::unique_ptr<client::Client> Connect(client::ClientOptions o) {
    auto c = client::Client::Connect(std::move(o));
    EXPECT_TRUE(c.ok()) << c.status().ToString();
    return c.ok() ? std::move(c).value() : nullptr;
  }

  std::string token_;  // the controller's and Options()' (set before SetUp)
  std::shared_ptr<InMemoryJobStore> store_ = std::make_shared<InMemoryJobStore>();
  std::unique_ptr<Service> service_;
  Controller* controller_ = nullptr;  // the service's
  std::thread loop_;
};

}  // namespace hmpmd
