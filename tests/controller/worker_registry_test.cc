// WorkerRegistry: finding workers, the live count and pool changes,
// restart detection by instance, which dead devices reports list, and
// waiting for enough workers.
#include "hmpmd/controller/worker_registry.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace hmpmd {
namespace {

// Builds the registrations a test adds, one device each in order.
class WorkerRegistryTest : public ::testing::Test {
 protected:
  WorkerInfo& Add(const std::string& name, uint64_t instance = 0,
                  const std::string& data_endpoint = "") {
    WorkerInfo w;
    w.id = registry_.next_id();
    w.identity = "id-" + std::to_string(w.id);
    w.name = name;
    w.pid = 100 + w.id;
    w.instance = instance;
    w.data_endpoint = data_endpoint;
    w.key = name + "|" + std::to_string(w.pid) + "|" + data_endpoint;
    w.device = next_device_++;
    return registry_.Add(std::move(w));
  }
  static RegisterMsg Register(const std::string& name, uint64_t instance) {
    RegisterMsg m;
    m.name = name;
    m.instance = instance;
    return m;
  }

  WorkerRegistry registry_;
  DeviceId next_device_ = 0;
};

TEST_F(WorkerRegistryTest, LiveWorkersAreFoundByIdentityKeyAndDeviceUntilGone) {
  Add("a", 0, "tcp://a:1");
  WorkerInfo& b = Add("b");
  EXPECT_EQ(registry_.size(), 2u);
  EXPECT_EQ(registry_.alive_count(), 2u);
  ASSERT_NE(registry_.FindByIdentity("id-1"), nullptr);
  EXPECT_EQ(registry_.FindByIdentity("id-1")->name, "b");
  EXPECT_EQ(registry_.FindByKey("a|100|tcp://a:1")->name, "a");
  EXPECT_EQ(registry_.FindByKey(b.key), nullptr) << "no data endpoint: not found by key";
  EXPECT_EQ(registry_.OfDevice(1)->name, "b");
  EXPECT_EQ(registry_.IdOfDevice(1), 1u);
  EXPECT_EQ(registry_.OfDevice(2), nullptr);

  const uint64_t changes = registry_.pool_changes();
  registry_.MarkGone(registry_[0], "missed heartbeats");
  EXPECT_FALSE(registry_[0].alive);
  EXPECT_EQ(registry_[0].left_reason, "missed heartbeats");
  EXPECT_EQ(registry_.alive_count(), 1u);
  EXPECT_EQ(registry_.pool_changes(), changes + 1);
  EXPECT_EQ(registry_.FindByIdentity("id-0"), nullptr);
  EXPECT_EQ(registry_.FindByKey("a|100|tcp://a:1"), nullptr);
  EXPECT_EQ(registry_.OfDevice(0)->name, "a") << "a dead worker keeps its device";
  registry_.MarkGone(registry_[0], "again");
  EXPECT_EQ(registry_.alive_count(), 1u) << "gone once";
  EXPECT_EQ(registry_[0].left_reason, "missed heartbeats");
}

TEST_F(WorkerRegistryTest, AStoreSizeThatChangesMovesPoolChanges) {
  WorkerInfo& w = Add("a");
  const uint64_t changes = registry_.pool_changes();
  registry_.SetStoreBytes(w, 0, 0);
  EXPECT_EQ(registry_.pool_changes(), changes);
  registry_.SetStoreBytes(w, 4096, 0);
  EXPECT_EQ(registry_.pool_changes(), changes + 1);
  EXPECT_EQ(w.store_bytes, 4096u);
  registry_.SetStoreBytes(w, 4096, 512);  // the states' bytes count too
  EXPECT_EQ(registry_.pool_changes(), changes + 2);
  EXPECT_EQ(w.state_bytes, 512u);
}

TEST_F(WorkerRegistryTest, ANewInstanceReplacesTheOldOneWhichIsRefusedFromThenOn) {
  Add("w", 7);
  EXPECT_EQ(registry_.CheckInstance(Register("w", 7)).replaced, nullptr) << "reconnecting";
  EXPECT_EQ(registry_.CheckInstance(Register("other", 9)).replaced, nullptr) << "a new name";
  EXPECT_FALSE(registry_.CheckInstance(Register("w", 0)).retired) << "no instance: no check";

  const WorkerRegistry::InstanceCheck restart = registry_.CheckInstance(Register("w", 8));
  EXPECT_FALSE(restart.retired);
  ASSERT_NE(restart.replaced, nullptr);
  EXPECT_EQ(restart.replaced->instance, 7u);
  EXPECT_TRUE(registry_.CheckInstance(Register("w", 7)).retired)
      << "the replaced process may not come back";
}

TEST_F(WorkerRegistryTest, OnlyTheNewestRetiredInstancesAreKept) {
  Add("w", 1);
  for (uint64_t i = 2; i <= WorkerRegistry::kRetiredKept + 2; ++i) {
    ASSERT_NE(registry_.CheckInstance(Register("w", i)).replaced, nullptr);
    Add("w", i);
  }
  EXPECT_FALSE(registry_.CheckInstance(Register("w", 1)).retired) << "the oldest is forgotten";
  EXPECT_TRUE(registry_.CheckInstance(Register("w", 3)).retired);
}

TEST_F(WorkerRegistryTest, ReportsListLiveDevicesAndTheNewestDeadOnePerName) {
  Add("a");  // device 0: dead, registered again as device 2
  Add("b");  // device 1: dead
  Add("a");  // device 2: alive
  registry_.MarkGone(registry_[0], "re-registered");
  registry_.MarkGone(registry_[1], "missed heartbeats");
  EXPECT_EQ(registry_.ListedDevices(4), (std::vector<bool>{false, true, true, true}))
      << "device 3 has no worker and is listed";
}

TEST_F(WorkerRegistryTest, AtMostSoManyDeadDevicesAreListed) {
  const size_t n = WorkerRegistry::kDeadDevicesListed + 2;
  for (size_t i = 0; i < n; ++i) Add("w" + std::to_string(i));
  for (size_t i = 0; i < n; ++i) registry_.MarkGone(registry_[i], "gone");
  const std::vector<bool> listed = registry_.ListedDevices(n);
  EXPECT_FALSE(listed[0]) << "the oldest dead ones are left out";
  EXPECT_FALSE(listed[1]);
  EXPECT_TRUE(listed[2]);
  EXPECT_TRUE(listed[n - 1]);
}

TEST_F(WorkerRegistryTest, WaitersAreCalledOnceWhenEnoughWorkersAreAlive) {
  int at_once = 0, at_two = 0;
  registry_.WhenAlive(0, [&] { ++at_once; });
  EXPECT_EQ(at_once, 1);
  registry_.WhenAlive(2, [&] { ++at_two; });
  Add("a");
  registry_.WakeWaiters();
  EXPECT_EQ(at_two, 0);
  Add("b");
  registry_.WakeWaiters();
  registry_.WakeWaiters();
  EXPECT_EQ(at_two, 1);
}

}  // namespace
}  // namespace hmpmd
