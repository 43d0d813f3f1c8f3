// Tests for ResourcePool: cores, capacity, the earliest-available order,
// Assign/Release bookkeeping, device removal and kernel support
// (scheduler/resource_pool.{h,cc}).
#include "hmpmd/scheduler/resource_pool.h"

#include <gtest/gtest.h>

#include <vector>

#include "test_builders.h"

namespace hmpmd {
namespace {

using test::Device;

class ResourcePoolTest : public ::testing::Test {
 protected:
  // Core ids of `kind` in the pool's available order.
  static std::vector<CoreId> AvailableOrder(const ResourcePool& pool, CoreKind kind) {
    std::vector<CoreId> out;
    for (const auto& [busy_until, core] : pool.available(kind)) out.push_back(core);
    return out;
  }
  static PoolOptions Deep(uint32_t max_queue, double lookahead_us) {
    PoolOptions o;
    o.max_queue_per_core = max_queue;
    o.lookahead_us = lookahead_us;
    return o;
  }
};

TEST_F(ResourcePoolTest, AddDeviceCreatesCoresPerKindWithLanes) {
  ResourcePool pool;
  DeviceId d0 = pool.AddDevice(Device("d0", 2, 3));
  DeviceId d1 = pool.AddDevice(Device("d1", 1, 0));
  EXPECT_EQ(d0, 0u);
  EXPECT_EQ(d1, 1u);
  EXPECT_EQ(pool.device_count(), 2u);
  EXPECT_EQ(pool.alive_device_count(), 2u);
  EXPECT_EQ(pool.core_count(), 6u);
  EXPECT_EQ(pool.alive_cores(CoreKind::kCube), 3u);
  EXPECT_EQ(pool.alive_cores(CoreKind::kVector), 3u);
  ASSERT_EQ(pool.device(d0).cores.size(), 5u);
  // Cube cores first, then vector cores, lanes counted per kind.
  const std::vector<std::pair<CoreKind, uint32_t>> want = {{CoreKind::kCube, 0},
                                                           {CoreKind::kCube, 1},
                                                           {CoreKind::kVector, 0},
                                                           {CoreKind::kVector, 1},
                                                           {CoreKind::kVector, 2}};
  for (size_t i = 0; i < want.size(); ++i) {
    const auto& c = pool.core(pool.device(d0).cores[i]);
    EXPECT_EQ(c.device, d0);
    EXPECT_EQ(c.kind, want[i].first) << i;
    EXPECT_EQ(c.lane, want[i].second) << i;
    EXPECT_EQ(c.queued, 0u);
  }
  EXPECT_EQ(pool.core(pool.device(d1).cores[0]).device, d1);
  EXPECT_EQ(pool.device(d0).desc.name, "d0");
  EXPECT_TRUE(pool.HasCapacity(CoreKind::kCube));
  EXPECT_EQ(pool.available(CoreKind::kVector).size(), 3u);
}

TEST_F(ResourcePoolTest, EmptyPoolHasNoCapacity) {
  ResourcePool pool;
  EXPECT_FALSE(pool.HasCapacity(CoreKind::kCube));
  EXPECT_FALSE(pool.HasCapacity(CoreKind::kVector));
  pool.AddDevice(Device("cube-only", 1, 0));
  EXPECT_TRUE(pool.HasCapacity(CoreKind::kCube));
  EXPECT_FALSE(pool.HasCapacity(CoreKind::kVector));
}

TEST_F(ResourcePoolTest, DefaultQueueOfOneTakesACoreOutUntilRelease) {
  ResourcePool pool;
  pool.AddDevice(Device("d", 2, 0));
  pool.Assign(0, 100, /*now=*/0);
  EXPECT_FALSE(pool.HasCapacity(CoreId{0}));
  EXPECT_EQ(AvailableOrder(pool, CoreKind::kCube), std::vector<CoreId>{1});
  pool.Assign(1, 100, 0);
  EXPECT_FALSE(pool.HasCapacity(CoreKind::kCube));
  pool.Release(0, 100, /*now=*/100);
  EXPECT_TRUE(pool.HasCapacity(CoreId{0}));
  EXPECT_EQ(AvailableOrder(pool, CoreKind::kCube), std::vector<CoreId>{0});
}

TEST_F(ResourcePoolTest, MaxQueuePerCoreBoundsQueuedTasks) {
  ResourcePool pool(Deep(3, 1e9));
  pool.AddDevice(Device("d", 1, 0));
  for (int i = 0; i < 2; ++i) {
    pool.Assign(0, 10, 0);
    EXPECT_TRUE(pool.HasCapacity(CoreId{0})) << "after " << i + 1;
  }
  pool.Assign(0, 10, 0);
  EXPECT_FALSE(pool.HasCapacity(CoreId{0})) << "three of three queued";
  EXPECT_EQ(pool.core(0).queued, 3u);
  pool.Release(0, 10, 10);
  EXPECT_TRUE(pool.HasCapacity(CoreId{0}));
}

TEST_F(ResourcePoolTest, LookaheadBoundsQueuedWork) {
  ResourcePool pool(Deep(8, 150));
  pool.AddDevice(Device("d", 1, 0));
  pool.Assign(0, 100, 0);
  EXPECT_TRUE(pool.HasCapacity(CoreId{0})) << "100 us queued, under 150";
  pool.Assign(0, 100, 0);
  EXPECT_FALSE(pool.HasCapacity(CoreId{0})) << "200 us queued, over 150, though 2 < 8 tasks";
}

TEST_F(ResourcePoolTest, FirstTaskAlwaysFitsWhateverItsSize) {
  ResourcePool pool(Deep(4, 10));
  pool.AddDevice(Device("d", 1, 0));
  EXPECT_TRUE(pool.HasCapacity(CoreId{0}));
  pool.Assign(0, 1e6, 0);
  EXPECT_EQ(pool.core(0).queued, 1u);
  EXPECT_FALSE(pool.HasCapacity(CoreId{0})) << "no room beyond a task longer than the lookahead";
}

TEST_F(ResourcePoolTest, WaitingOnlyLookaheadQueuesOneTaskBehindALongOne) {
  PoolOptions o = Deep(8, 150);
  o.lookahead_waiting_only = true;
  ResourcePool pool(o);
  pool.AddDevice(Device("d", 1, 0));
  pool.Assign(0, 1e6, 0);
  EXPECT_DOUBLE_EQ(pool.core(0).waiting_us(), 0);
  EXPECT_TRUE(pool.HasCapacity(CoreId{0})) << "nothing waits behind the running task";
  pool.Assign(0, 100, 0);
  EXPECT_DOUBLE_EQ(pool.core(0).waiting_us(), 100);
  EXPECT_TRUE(pool.HasCapacity(CoreId{0})) << "100 us waiting, under 150";
  pool.Assign(0, 100, 0);
  EXPECT_FALSE(pool.HasCapacity(CoreId{0})) << "200 us waiting, over 150";
  EXPECT_EQ(pool.core(0).busy_until, 1'000'200);
  // The long task ends: the first 100 us task runs, the other one waits.
  pool.Release(0, 1e6, 900'000);
  EXPECT_DOUBLE_EQ(pool.core(0).waiting_us(), 100);
  EXPECT_TRUE(pool.HasCapacity(CoreId{0}));
  EXPECT_EQ(pool.core(0).busy_until, 900'200);
}

TEST_F(ResourcePoolTest, WaitingOnlyTracksTheRunningTaskWhenOneLeavesFromTheMiddle) {
  PoolOptions o = Deep(8, 150);
  o.lookahead_waiting_only = true;
  ResourcePool pool(o);
  pool.AddDevice(Device("d", 1, 0));
  pool.Assign(0, 500, 0);
  pool.Assign(0, 120, 0);
  pool.Assign(0, 40, 0);
  EXPECT_FALSE(pool.HasCapacity(CoreId{0})) << "160 us waiting";
  // The 120 us task is cancelled from the middle: the 500 us one still runs.
  pool.Release(0, 120, 10);
  EXPECT_DOUBLE_EQ(pool.core(0).waiting_us(), 40);
  EXPECT_TRUE(pool.HasCapacity(CoreId{0}));
  pool.Release(0, 500, 500);
  EXPECT_EQ(pool.core(0).queued, 1u);
  EXPECT_DOUBLE_EQ(pool.core(0).waiting_us(), 0) << "the 40 us task runs now";
  pool.Release(0, 40, 540);
  EXPECT_EQ(pool.core(0).queued, 0u);
  EXPECT_TRUE(pool.core(0).queue_us.empty());
}

TEST_F(ResourcePoolTest, AvailableIsOrderedByWhenCoresDrain) {
  ResourcePool pool(Deep(2, 1e9));
  pool.AddDevice(Device("d", 3, 0));
  pool.Assign(0, 300, 0);
  pool.Assign(1, 100, 0);
  pool.Assign(2, 200, 0);
  EXPECT_EQ(AvailableOrder(pool, CoreKind::kCube), (std::vector<CoreId>{1, 2, 0}));
  EXPECT_EQ(pool.core(0).busy_until, 300);
  EXPECT_EQ(pool.core(1).busy_until, 100);
  // Release core 0 early: its remaining queue is empty, so it drains now.
  pool.Release(0, 300, 50);
  EXPECT_EQ(pool.core(0).busy_until, 50);
  EXPECT_EQ(AvailableOrder(pool, CoreKind::kCube), (std::vector<CoreId>{0, 1, 2}));
}

TEST_F(ResourcePoolTest, TiesAreBrokenByCoreId) {
  ResourcePool pool;
  pool.AddDevice(Device("a", 2, 1));
  pool.AddDevice(Device("b", 2, 1));
  EXPECT_EQ(AvailableOrder(pool, CoreKind::kCube), (std::vector<CoreId>{0, 1, 3, 4}));
  EXPECT_EQ(AvailableOrder(pool, CoreKind::kVector), (std::vector<CoreId>{2, 5}));
}

TEST_F(ResourcePoolTest, AssignQueuesBehindWorkAlreadyThere) {
  ResourcePool pool(Deep(3, 1e9));
  pool.AddDevice(Device("d", 1, 0));
  pool.Assign(0, 100, /*now=*/10);
  EXPECT_EQ(pool.core(0).busy_until, 110);
  pool.Assign(0, 50, /*now=*/20);
  EXPECT_EQ(pool.core(0).busy_until, 160) << "starts after the queue, not at now";
  EXPECT_DOUBLE_EQ(pool.core(0).queued_us, 150);
  EXPECT_DOUBLE_EQ(pool.core(0).busy_us, 150);
  // An idle core starts new work at now, not at its stale busy_until.
  ResourcePool idle;
  idle.AddDevice(Device("d", 1, 0));
  idle.Assign(0, 10, 0);
  idle.Release(0, 10, 10);
  idle.Assign(0, 10, 500);
  EXPECT_EQ(idle.core(0).busy_until, 510);
}

TEST_F(ResourcePoolTest, ReleaseRestartsTheRemainingQueueAtNow) {
  ResourcePool pool(Deep(3, 1e9));
  pool.AddDevice(Device("d", 1, 0));
  pool.Assign(0, 100, 0);
  pool.Assign(0, 40, 0);
  pool.Release(0, 100, /*now=*/120);  // ran late
  EXPECT_EQ(pool.core(0).queued, 1u);
  EXPECT_DOUBLE_EQ(pool.core(0).queued_us, 40);
  EXPECT_EQ(pool.core(0).busy_until, 160);
  EXPECT_DOUBLE_EQ(pool.core(0).busy_us, 140) << "busy_us counts all work ever assigned";
  pool.Release(0, 40, 150);
  EXPECT_EQ(pool.core(0).queued, 0u);
  EXPECT_DOUBLE_EQ(pool.core(0).queued_us, 0);
  EXPECT_EQ(pool.core(0).busy_until, 150);
}

TEST_F(ResourcePoolTest, ReleaseOfAnIdleCoreIsANoOp) {
  ResourcePool pool;
  pool.AddDevice(Device("d", 1, 0));
  pool.Release(0, 100, 50);
  EXPECT_EQ(pool.core(0).queued, 0u);
  EXPECT_EQ(pool.core(0).busy_until, 0);
  EXPECT_EQ(pool.available(CoreKind::kCube).size(), 1u);
}

TEST_F(ResourcePoolTest, RemoveDeviceTakesItsCoresOutForGood) {
  ResourcePool pool;
  pool.AddDevice(Device("a", 1, 1));
  pool.AddDevice(Device("b", 2, 1));
  pool.Assign(pool.device(0).cores[0], 100, 0);  // a busy core must leave too
  pool.RemoveDevice(0);
  EXPECT_FALSE(pool.device(0).alive);
  EXPECT_EQ(pool.alive_device_count(), 1u);
  EXPECT_EQ(pool.device_count(), 2u);
  EXPECT_EQ(pool.alive_cores(CoreKind::kCube), 2u);
  EXPECT_EQ(pool.alive_cores(CoreKind::kVector), 1u);
  for (CoreId c : pool.device(0).cores) {
    EXPECT_FALSE(pool.HasCapacity(c));
    EXPECT_EQ(pool.core(c).queued, 0u);
  }
  EXPECT_EQ(AvailableOrder(pool, CoreKind::kCube), (std::vector<CoreId>{2, 3}));
  EXPECT_EQ(AvailableOrder(pool, CoreKind::kVector), std::vector<CoreId>{4});
  // Releases for dead cores and a second removal change nothing.
  pool.Release(pool.device(0).cores[0], 100, 10);
  pool.RemoveDevice(0);
  EXPECT_EQ(pool.alive_device_count(), 1u);
  EXPECT_EQ(pool.alive_cores(CoreKind::kCube), 2u);
  EXPECT_EQ(AvailableOrder(pool, CoreKind::kCube), (std::vector<CoreId>{2, 3}));
}

TEST_F(ResourcePoolTest, RemovingTheLastDeviceOfAKindLeavesNoCapacity) {
  ResourcePool pool;
  pool.AddDevice(Device("v", 0, 2));
  pool.AddDevice(Device("c", 1, 0));
  pool.RemoveDevice(0);
  EXPECT_FALSE(pool.HasCapacity(CoreKind::kVector));
  EXPECT_EQ(pool.alive_cores(CoreKind::kVector), 0u);
  EXPECT_TRUE(pool.HasCapacity(CoreKind::kCube));
}

TEST_F(ResourcePoolTest, InternKernelGivesStableIds) {
  ResourcePool pool;
  uint32_t spin = pool.InternKernel("spin");
  uint32_t gemm = pool.InternKernel("gemm");
  EXPECT_NE(spin, gemm);
  EXPECT_EQ(pool.InternKernel("spin"), spin);
  pool.AddDevice(Device("d", 1, 0, {"gemm", "send"}));
  EXPECT_EQ(pool.InternKernel("gemm"), gemm);
}

TEST_F(ResourcePoolTest, DeviceRunsOnlyTheKernelsItListed) {
  ResourcePool pool;
  DeviceId any = pool.AddDevice(Device("any", 1, 0));
  DeviceId some = pool.AddDevice(Device("some", 1, 1, {"gemm", "send"}));
  uint32_t gemm = pool.InternKernel("gemm");
  uint32_t send = pool.InternKernel("send");
  uint32_t spin = pool.InternKernel("spin");  // interned after the devices
  EXPECT_TRUE(pool.Supports(any, gemm));
  EXPECT_TRUE(pool.Supports(any, spin)) << "an empty kernel list means every kernel";
  EXPECT_TRUE(pool.Supports(some, gemm));
  EXPECT_TRUE(pool.Supports(some, send));
  EXPECT_FALSE(pool.Supports(some, spin));
  EXPECT_FALSE(pool.Supports(some, 1000));
}

TEST_F(ResourcePoolTest, AnySupportsNeedsAnAliveDeviceWithTheCoreKind) {
  ResourcePool pool;
  pool.AddDevice(Device("cube-gemm", 1, 0, {"gemm"}));
  pool.AddDevice(Device("vec-send", 0, 1, {"send"}));
  uint32_t gemm = pool.InternKernel("gemm");
  uint32_t send = pool.InternKernel("send");
  EXPECT_TRUE(pool.AnySupports(gemm, CoreKind::kCube));
  EXPECT_FALSE(pool.AnySupports(gemm, CoreKind::kVector))
      << "gemm only where there is no vector core";
  EXPECT_TRUE(pool.AnySupports(send, CoreKind::kVector));
  EXPECT_FALSE(pool.AnySupports(send, CoreKind::kCube));
  pool.RemoveDevice(0);
  EXPECT_FALSE(pool.AnySupports(gemm, CoreKind::kCube)) << "dead devices do not count";
}

// A worker's reported sub-model states take its memory too: 3 MiB of
// state leave a 4 MiB device room for 1 MiB of outputs, and a full one
// counts as full.
TEST_F(ResourcePoolTest, StatesTheWorkerHoldsCountAgainstItsMemory) {
  PoolOptions o;
  o.count_store = true;
  ResourcePool pool(o);
  DeviceDesc desc = Device("d", 1);
  desc.memory_mb = 4;
  const DeviceId d = pool.AddDevice(desc);
  const uint64_t mib = 1 << 20;
  EXPECT_TRUE(pool.StoreTakes(d, CoreKind::kCube, true, 2 * mib, 0, false));
  pool.SetStateBytes(d, 3 * mib);
  EXPECT_FALSE(pool.StoreTakes(d, CoreKind::kCube, true, 2 * mib, 0, false));
  EXPECT_TRUE(pool.StoreTakes(d, CoreKind::kCube, true, mib, 0, false));
  EXPECT_FALSE(pool.MemoryFull(d));
  pool.SetStateBytes(d, 4 * mib);
  EXPECT_TRUE(pool.MemoryFull(d));
  pool.SetStateBytes(d, 0);  // the job ended: its states were freed
  EXPECT_TRUE(pool.StoreTakes(d, CoreKind::kCube, true, 2 * mib, 0, false));
}

TEST_F(ResourcePoolTest, QueuedOutputsCountAgainstTheStoreUntilReleased) {
  PoolOptions o;
  o.max_queue_per_core = 4;
  o.lookahead_us = 1e9;
  o.count_store = true;
  ResourcePool pool(o);
  DeviceDesc desc = Device("d", 1);
  desc.memory_mb = 4;
  const DeviceId d = pool.AddDevice(desc);
  const CoreId core = pool.device(d).cores[0];
  const uint64_t mib = 1 << 20;
  EXPECT_TRUE(pool.StoreTakes(d, CoreKind::kCube, true, 3 * mib, 0, false));
  pool.Assign(core, 10, 0, StoreUse{3 * mib, false});
  EXPECT_EQ(pool.store_movers(), 1u);
  const uint64_t refused = pool.store_refusals();
  EXPECT_FALSE(pool.StoreTakes(d, CoreKind::kCube, true, 2 * mib, 0, false))
      << "3 + 2 MiB on a 4 MiB store";
  EXPECT_EQ(pool.store_refusals(), refused + 1);
  EXPECT_TRUE(pool.StoreTakes(d, CoreKind::kCube, true, 2 * mib, 2 * mib, false))
      << "its read frees 2 MiB";
  EXPECT_TRUE(pool.StoreTakes(d, CoreKind::kCube, true, 0, 0, false)) << "adds nothing";
  EXPECT_TRUE(pool.StoreTakes(d, CoreKind::kCube, true, 5 * mib, 0, false))
      << "larger than every store: the old rule";
  // A larger store joins: 5 MiB wait for it, even in a lenient pass; not
  // for one with no core of the task's kind.
  DeviceDesc vector_only = Device("v", 0, 1);
  vector_only.memory_mb = 8;
  const DeviceId v = pool.AddDevice(vector_only);
  EXPECT_TRUE(pool.StoreTakes(d, CoreKind::kCube, true, 5 * mib, 0, false));
  EXPECT_FALSE(pool.StoreTakes(d, CoreKind::kVector, true, 5 * mib, 0, false));
  pool.set_store_lenient(true);
  EXPECT_FALSE(pool.StoreTakes(d, CoreKind::kVector, true, 5 * mib, 0, false));
  pool.set_store_lenient(false);
  pool.RemoveDevice(v);
  EXPECT_TRUE(pool.StoreTakes(d, CoreKind::kVector, true, 5 * mib, 0, false)) << "it died";
  EXPECT_TRUE(pool.StoreTakes(d, CoreKind::kCube, false, 0, 0, false))
      << "unknown size: not full yet";
  pool.set_store_lenient(true);
  EXPECT_TRUE(pool.StoreTakes(d, CoreKind::kCube, true, 2 * mib, 0, false));
  pool.set_store_lenient(false);
  pool.Assign(core, 10, 0, StoreUse{1 * mib, false});
  EXPECT_TRUE(pool.MemoryFull(d)) << "4 MiB expected on a 4 MiB store";
  EXPECT_FALSE(pool.StoreTakes(d, CoreKind::kCube, false, 0, 0, false));
  EXPECT_TRUE(pool.StoreTakes(d, CoreKind::kCube, false, 0, 0, true)) << "a reader frees memory";
  pool.Release(core, 10, 5, StoreUse{3 * mib, false});
  EXPECT_EQ(pool.device(d).reserved_bytes, 1 * mib);
  EXPECT_EQ(pool.store_movers(), 1u);
  pool.Assign(core, 10, 5, StoreUse{0, true});
  EXPECT_EQ(pool.store_movers(), 2u);
  pool.RemoveDevice(d);
  EXPECT_EQ(pool.store_movers(), 0u) << "a dead device's tasks make no room";
}

}  // namespace
}  // namespace hmpmd
