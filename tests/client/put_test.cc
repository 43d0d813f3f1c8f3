// Client::Put against a real controller and two real worker processes: the
// driver's data reaches kernels and Get() with its dtype and shape, and a
// put whose worker dies is fetched from the driver again.
#include <gtest/gtest.h>

#include <chrono>
#include <cstring>
#include <filesystem>
#include <set>
#include <thread>

#include "../integration/process_cluster.h"
#include "hmpmd/client/client.h"
#include "hmpmd/protocol/dtype.h"

namespace hmpmd::testing {
namespace {

using client::Client;
using client::ClientOptions;
using client::Future;

Buffer F32(const std::vector<float>& v, std::vector<int64_t> shape) {
  std::vector<std::byte> bytes(v.size() * 4);
  if (!v.empty()) std::memcpy(bytes.data(), v.data(), bytes.size());
  return MakeTensor("f32", std::move(shape), bytes).value();
}

std::vector<float> Floats(const Buffer& b) {
  std::vector<float> v(b.data.size() / 4);
  if (!v.empty()) std::memcpy(v.data(), b.data.data(), v.size() * 4);
  return v;
}

class PutTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() /
           ("hmpmd_put_" + std::to_string(::getpid()) + "_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::remove_all(dir_);
    std::filesystem::create_directories(dir_);
    cluster_ = std::make_unique<ProcessCluster>(dir_.string());
    ASSERT_TRUE(cluster_->StartController().ok());
    for (int i = 0; i < 2; ++i) ASSERT_TRUE(cluster_->StartWorker().ok());
    ASSERT_TRUE(cluster_->WaitWorkers(2, 20000));
  }
  void TearDown() override {
    cluster_.reset();
    if (!HasFailure()) std::filesystem::remove_all(dir_);
  }
  std::unique_ptr<Client> Connect(const std::string& session) {
    ClientOptions o;
    o.controller = cluster_->zmq_endpoint();
    o.session = session;
    auto c = Client::Connect(o);
    EXPECT_TRUE(c.ok()) << c.status().ToString();
    return c.ok() ? std::move(c).value() : nullptr;
  }

  std::filesystem::path dir_;
  std::unique_ptr<ProcessCluster> cluster_;
};

TEST_F(PutTest, GetReturnsThePutBuffersWithTheirDtypeAndShape) {
  auto c = Connect("put");
  ASSERT_NE(c, nullptr);
  const std::vector<std::byte> raw = {std::byte{1}, std::byte{0}, std::byte{2},
                                      std::byte{0}, std::byte{3}, std::byte{0}};
  Buffer i16 = MakeTensor("i16", {1, 3}, raw).value();
  Result<Future> f = c->Put({i16, BytesBuffer(raw)});
  ASSERT_TRUE(f.ok()) << f.status().ToString();
  EXPECT_TRUE(f->is_put());
  auto got = f->Get(20000);
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  ASSERT_EQ(got->size(), 2u);
  EXPECT_EQ((*got)[0].dtype, "i16");
  EXPECT_EQ((*got)[0].shape, (std::vector<int64_t>{1, 3}));
  EXPECT_EQ((*got)[0].data, raw);
  EXPECT_EQ((*got)[1].dtype, "bytes");
  EXPECT_EQ((*got)[1].data, raw);
  EXPECT_TRUE(c->Close().ok());
}

TEST_F(PutTest, APutIsAnInputOfAKernel) {
  auto c = Connect("put_input");
  ASSERT_NE(c, nullptr);
  Future x = c->Put({F32({1, 2, 3, 4}, {2, 2})}).value();
  Future y = c->Submit({.kernel = "scale", .args = {{"factor", 2.0}}, .inputs = {x}}).value();
  auto got = y.Get(20000);
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  ASSERT_EQ(got->size(), 1u);
  EXPECT_EQ(Floats((*got)[0]), (std::vector<float>{2, 4, 6, 8}));
  EXPECT_EQ((*got)[0].shape, (std::vector<int64_t>{2, 2}));
  EXPECT_TRUE(c->Close().ok());
}

// A driver passes a put to its consumers and drops it at once, as a
// training loop does with each micro-batch: the data must stay until a
// worker has fetched it.
TEST_F(PutTest, APutDroppedBeforeItsTaskRanStillReachesItsConsumer) {
  auto c = Connect("put_dropped");
  ASSERT_NE(c, nullptr);
  std::vector<Future> ys;
  for (int i = 0; i < 20; ++i) {
    Future x = c->Put({F32({float(i), 1}, {2})}).value();
    ys.push_back(c->Submit({.kernel = "scale", .args = {{"factor", 2.0}}, .inputs = {x}}).value());
  }  // every x dropped here, most before their task ran
  for (int i = 0; i < 20; ++i) {
    auto got = ys[i].Get(20000);
    ASSERT_TRUE(got.ok()) << i << ": " << got.status().ToString();
    EXPECT_EQ(Floats((*got)[0]), (std::vector<float>{2.0f * float(i), 2}));
  }
  EXPECT_TRUE(c->Close().ok());
}

TEST_F(PutTest, APutWhoseWorkerDiedIsFetchedFromTheDriverAgain) {
  auto c = Connect("put_rebuild");
  ASSERT_NE(c, nullptr);
  Future x = c->Put({F32({1, 2, 3}, {3})}).value();
  ASSERT_TRUE(x.Wait(20000).ok());
  // The worker that ran the put holds its only copy on the workers.
  pid_t holder = 0;
  for (const auto& e : cluster_->ReadExecLog()) {
    if (e.job == c->job()) holder = e.pid;
  }
  ASSERT_NE(holder, 0);
  const size_t victim = cluster_->worker_pid(0) == holder ? 0 : 1;
  ASSERT_EQ(cluster_->worker_pid(victim), holder);
  cluster_->KillWorker(victim);
  Future y = c->Submit({.kernel = "scale", .args = {{"factor", 3.0}}, .inputs = {x}}).value();
  auto got = y.Get(60000);
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  EXPECT_EQ(Floats((*got)[0]), (std::vector<float>{3, 6, 9}));
  // The put's task ran again on the other worker, which fetched from the
  // driver anew.
  std::set<pid_t> put_ran_on;
  for (const auto& e : cluster_->ReadExecLog()) {
    if (e.job == c->job() && e.task == 0) put_ran_on.insert(e.pid);
  }
  EXPECT_EQ(put_ran_on.size(), 2u);
  (void)c->Abort();
}

TEST_F(PutTest, PutRefusesABufferTheDataPlaneCannotCarry) {
  auto c = Connect("put_bad");
  ASSERT_NE(c, nullptr);
  Buffer b;
  b.dtype = std::string(100, 'x');
  Result<Future> f = c->Put({b});
  ASSERT_FALSE(f.ok());
  EXPECT_EQ(f.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(f.status().message().find("put: "), std::string::npos) << f.status().message();
  EXPECT_TRUE(c->Close().ok());
}

}  // namespace
}  // namespace hmpmd::testing
