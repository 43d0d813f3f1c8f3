// ResourcePool: the devices, their cores, and how busy each core is.
//
// This is the mechanism: only the pool allocates (Assign) and frees
// (Release) core time. Policies read it through const references.
// A core "has capacity" while it is alive and its queue holds fewer than
// max_queue_per_core tasks and less than lookahead_us of estimated work
// (with lookahead_waiting_only, work waiting behind the running task);
// the pool keeps such cores of each kind ordered by when they drain, so the
// earliest-free core is found in O(log cores).
// Thread-safety: not thread-safe; owned by the scheduler's single thread.
#pragma once

#include <array>
#include <cstdint>
#include <set>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "hmpmd/protocol/labels.h"
#include "hmpmd/protocol/types.h"

namespace hmpmd {

using DeviceId = uint32_t;
using CoreId = uint32_t;

struct DeviceDesc {
  std::string name;
  WorkerId worker = 0;
  std::array<uint32_t, kNumCoreKinds> cores{};  // cores per kind
  uint64_t memory_mb = 0;
  // Node the device sits in: devices of one node share the faster node-tier
  // link. Default 0 (live workers do not report it yet).
  uint32_t node = 0;
  // Throughput of one core per kind, flops per us; 0 means "the cost
  // model's default" (live workers do not report it yet).
  std::array<double, kNumCoreKinds> flops_per_us{};
  // Kernels it runs; empty means every kernel (the simulator's devices).
  std::vector<std::string> kernels;
  // Its labels, sorted by key (Labels): a task that requires labels runs
  // only on a device that has them all. Default: none.
  Labels labels;
};

struct PoolOptions {
  // Tasks a core may hold queued, counting the running one. 1 gives the
  // scheduler a free hand; more hides the dispatch round trip for short
  // tasks. Default: 1 (the simulator); the controller raises it.
  uint32_t max_queue_per_core = 1;
  // A core with a task takes another only while its queued estimated work
  // (the running task's included) is below this, in us. Keeps deep queues
  // for tiny tasks only. Default: 0 (one task per core).
  double lookahead_us = 0;
  // Count only the work waiting behind the running (oldest) task against
  // lookahead_us, so a core running a long task still takes the next one
  // and starts it without a dispatch round trip; the cost is that the next
  // task is bound to that core before it frees. Default: false (the
  // running task counts too; the simulator has no round trip to hide).
  bool lookahead_waiting_only = false;
  // Count the outputs a placed task will add to its device's object store
  // (StoreUse) against the device's memory_mb, so that tasks whose outputs
  // together pass it go to different devices. Default: false; the
  // controller and the simulator turn it on.
  bool count_store = false;
};

// What a task placed on a core does to its device's object store: the
// output bytes it is expected to add (reserved until it ends) and whether
// it reads stored inputs (which frees them after the last read).
struct StoreUse {
  uint64_t reserve = 0;
  bool reads_stored = false;
  bool moves_memory() const { return reserve > 0 || reads_stored; }
};

class ResourcePool {
 public:
  struct Core {
    DeviceId device = 0;
    CoreKind kind = CoreKind::kCube;
    uint32_t lane = 0;      // index among the device's cores of this kind
    uint32_t queued = 0;    // tasks assigned and not yet released
    double queued_us = 0;   // their estimated work
    TimeUs busy_until = 0;  // estimate of when the queue drains
    double busy_us = 0;     // estimated work assigned so far
    // Estimates of the queued tasks in assignment order; the front one
    // runs (a worker's lane runs its queue in order).
    std::vector<double> queue_us;
    // Queued tasks with a StoreUse that moves memory.
    uint32_t movers = 0;
    // Estimated work waiting behind the running task.
    double waiting_us() const { return queue_us.empty() ? 0 : queued_us - queue_us.front(); }
  };
  struct Device {
    DeviceDesc desc;
    bool alive = true;
    std::vector<CoreId> cores;
    std::vector<bool> kernels;    // by kernel id: runs it and has its labels
    uint64_t held_bytes = 0;      // outputs its object store keeps (live only)
    uint64_t state_bytes = 0;     // sub-model states its worker reports holding (live only)
    uint64_t reserved_bytes = 0;  // outputs expected from tasks queued here
  };
  using Available = std::set<std::pair<TimeUs, CoreId>>;

  explicit ResourcePool(PoolOptions options = {}) : options_(options) {}

  DeviceId AddDevice(DeviceDesc desc);
  // Marks the device dead; its cores leave the available sets for good.
  void RemoveDevice(DeviceId id);

  // A kernel name and the labels a task of it requires are interned
  // together; the id is stable for the pool's life. A device supports the
  // id when it runs the kernel (or every kernel) and has all the labels.
  // Costs O(devices) the first time a pair is seen.
  uint32_t InternKernel(std::string_view name, const Labels& required = {});
  bool Supports(DeviceId device, uint32_t kernel_id) const;
  // The labels that kernel id `kernel_id` requires.
  const Labels& RequiredLabels(uint32_t kernel_id) const { return interned_[kernel_id].required; }
  // True when some alive device with cores of `kind` has every label of
  // `labels`.
  bool AnyHasLabels(const Labels& labels, CoreKind kind) const;
  // True when some alive device runs `kernel_id` on a core of `kind`.
  bool AnySupports(uint32_t kernel_id, CoreKind kind) const;

  size_t device_count() const { return devices_.size(); }
  size_t alive_device_count() const { return alive_devices_; }
  const Device& device(DeviceId id) const { return devices_[id]; }
  const Core& core(CoreId id) const { return cores_[id]; }
  size_t core_count() const { return cores_.size(); }
  uint32_t alive_cores(CoreKind kind) const { return alive_cores_[Index(kind)]; }
  // Cores of `kind` with capacity, earliest to drain first.
  const Available& available(CoreKind kind) const { return available_[Index(kind)]; }
  bool HasCapacity(CoreKind kind) const { return !available_[Index(kind)].empty(); }
  bool HasCapacity(CoreId id) const;
  const PoolOptions& options() const { return options_; }
  // Counts releases and devices joining or dying: a core that had no
  // capacity can have some again only after this changed.
  uint64_t changes() const { return changes_; }

  // Puts a task of `est_us` estimated work on `core`.
  void Assign(CoreId core, double est_us, TimeUs now, StoreUse use = {});
  // Takes back the task Assign() put there (the same `use`).
  void Release(CoreId core, double est_us, TimeUs now, StoreUse use = {});

  // Outputs kept in a device's object store: `delta` bytes more or fewer.
  void AddHeldBytes(DeviceId device, int64_t delta);
  // The sub-model states the device holds beside its outputs (its worker's
  // heartbeat): they take memory_mb too.
  void SetStateBytes(DeviceId device, uint64_t bytes);
  // True when the device's store holds, or expects from queued tasks, at
  // least its memory_mb (0: no cap).
  bool MemoryFull(DeviceId device) const;
  // Whether `device` may take a task that adds `output_bytes` of outputs
  // to its store (known: the size is predicted, else only the run tells),
  // after its read frees `freed` bytes there. A task with a known size
  // goes only where it fits (each refusal counted in store_refusals()),
  // unless the pool is lenient; then, as without count_store or with the
  // size unknown, any device not full, or any device at all for a task that
  // reads stored inputs (that frees memory). A store smaller than the
  // outputs refuses them even then while an alive device's store could
  // hold them (of those with cores of `kind`, the task's), and takes them
  // as a lenient pool would when none can (the worker then fails the task
  // naming its cap). A full store refuses a task unless it reads stored
  // inputs, or the pool is lenient and every store of `kind` is full.
  bool StoreTakes(DeviceId device, CoreKind kind, bool known, uint64_t output_bytes, uint64_t freed,
                  bool reads_stored) const;
  uint64_t store_refusals() const { return store_refusals_; }
  // Queued tasks whose StoreUse moves memory: while there are none, no
  // refused output will find room by waiting (the scheduler then places
  // it leniently, and its worker fails it naming the cap if it does not fit).
  uint64_t store_movers() const { return movers_; }
  void set_store_lenient(bool lenient) { store_lenient_ = lenient; }
  // A device's store cap in bytes; UINT64_MAX for none (memory_mb 0).
  static uint64_t StoreCap(const DeviceDesc& desc);
  // The largest StoreCap of the alive devices with cores of `kind`; 0: none.
  uint64_t LargestStore(CoreKind kind) const {
    const std::multiset<uint64_t>& caps = store_caps_[Index(kind)];
    return caps.empty() ? 0 : *caps.rbegin();
  }

 private:
  // Whether an alive device with cores of `kind` has a store not full.
  bool AnyRoom(CoreKind kind) const;
  static size_t Index(CoreKind k) { return static_cast<size_t>(k); }
  void Reindex(CoreId id, TimeUs old_key);

  PoolOptions options_;
  std::vector<Device> devices_;
  std::vector<Core> cores_;
  std::array<Available, kNumCoreKinds> available_;
  std::array<uint32_t, kNumCoreKinds> alive_cores_{};
  size_t alive_devices_ = 0;
  uint64_t changes_ = 0;
  uint64_t movers_ = 0;  // queued tasks that move memory, all devices
  bool store_lenient_ = false;
  // StoreCap of every alive device with cores of each kind.
  std::array<std::multiset<uint64_t>, kNumCoreKinds> store_caps_;
  mutable uint64_t store_refusals_ = 0;
  struct Interned {
    std::string kernel;
    Labels required;
  };
  // Whether `desc` runs the interned pair `key` (its kernel, its labels).
  static bool Runs(const DeviceDesc& desc, const Interned& key);
  // By kernel id; kernel_ids_ maps "kernel\0key\0value..." to the id.
  std::vector<Interned> interned_;
  std::unordered_map<std::string, uint32_t> kernel_ids_;
};

}  // namespace hmpmd
