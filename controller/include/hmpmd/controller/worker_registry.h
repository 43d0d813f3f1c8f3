// WorkerRegistry: every worker the controller has known since it started,
// live and dead, and the ways to find one: by WorkerId (its index), by
// ZeroMQ identity and by WorkerKey (live ones), by name (the last one that
// registered with an instance id) and by device. It also keeps the instances
// that a newer process of their name replaced, the live count, a counter of
// changes that pool readers watch, and who waits for enough live workers.
//
// It is bookkeeping only: the controller checks a registration and then
// adds the worker, and it declares one dead and then marks it gone here;
// what follows from either (the scheduler's devices, store records, logs,
// messages) is the controller's.
//
// Thread-safety: not thread-safe; the controller loop owns it. Code that
// runs on the loop (REST snapshots, the event feed) reads it through the
// const methods.
#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <set>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "hmpmd/controller/worker_clock.h"
#include "hmpmd/protocol/messages.h"
#include "hmpmd/protocol/types.h"
#include "hmpmd/scheduler/resource_pool.h"  // DeviceId

namespace hmpmd {

struct WorkerInfo {
  WorkerId id = 0;
  std::string identity;  // ZeroMQ routing id
  std::string key;       // WorkerKey(): the same across controller restarts
  std::string name;
  std::string data_endpoint;  // where peers fetch its outputs
  uint32_t pid = 0;
  uint64_t instance = 0;  // RegisterMsg::instance; 0: not given
  DeviceId device = 0;
  bool alive = true;
  WorkerClock clock;  // puts its timestamps on ours
  TimeUs last_seen = 0;
  TimeUs joined = 0;
  // RegisterMsg::sent_us of its newest registration, on its own clock: the
  // registers a process sent on successive sockets may be read out of order.
  int64_t register_sent_us = 0;
  // When its connection was seen to close; 0: it has one. A suspect until
  // Controller::CheckLiveness decides (it came back, or it is dead).
  TimeUs disconnected_at = 0;
  uint64_t dropped_frames = 0;  // as the worker reported
  uint32_t in_flight = 0;       // tasks queued or running there, as its last heartbeat said
  uint64_t store_bytes = 0;     // in its object store, as its last heartbeat said
  uint64_t state_bytes = 0;     // in its sub-models' states, likewise
  uint64_t tasks_done = 0;
  std::string left_reason;
};

class WorkerRegistry {
 public:
  // Dead devices that ListedDevices() lists at most.
  static constexpr size_t kDeadDevicesListed = 64;
  // Retired instances remembered at most (the oldest are forgotten).
  static constexpr size_t kRetiredKept = 4096;

  // What a registration's instance (RegisterMsg::instance) says.
  struct InstanceCheck {
    // An instance that a newer process of its name replaced: refuse it.
    // Two live processes under one name would replace each other forever.
    bool retired = false;
    // A new process under a known name (the old one crashed and was
    // restarted): the worker it replaces, alive or not, whose instance is
    // retired from now on. Null when it replaces none.
    WorkerInfo* replaced = nullptr;
  };

  // --- every worker, by WorkerId ---
  size_t size() const { return workers_.size(); }
  const WorkerInfo& operator[](WorkerId id) const { return workers_[id]; }
  WorkerInfo& operator[](WorkerId id) { return workers_[id]; }
  auto begin() const { return workers_.cbegin(); }
  auto end() const { return workers_.cend(); }
  auto begin() { return workers_.begin(); }
  auto end() { return workers_.end(); }
  // The id Add() gives the next worker.
  WorkerId next_id() const { return static_cast<WorkerId>(workers_.size()); }

  // --- lookups (O(1)) ---
  // The live worker at ZeroMQ `identity`; null when none.
  WorkerInfo* FindByIdentity(const std::string& identity);
  // The live worker with WorkerKey `key` that registered with a data
  // endpoint (which tells apart workers of one name and pid); null when none.
  WorkerInfo* FindByKey(const std::string& key);
  // The live worker that process `m` registered as before (the same name
  // and RegisterMsg::instance, not 0); null when none.
  WorkerInfo* FindLiveInstance(const RegisterMsg& m);
  // The worker of device `d`; null for a device no worker registered.
  const WorkerInfo* OfDevice(DeviceId d) const;
  WorkerInfo* OfDevice(DeviceId d);
  // The id of device `d`'s worker, unchecked, for the dispatch path.
  // REQUIRES: a worker registered device `d`.
  WorkerId IdOfDevice(DeviceId d) const { return device_worker_[d]; }

  size_t alive_count() const { return alive_; }
  // Moves whenever /api/v1/pool would read differently: a worker joined or
  // left, or its object store holds another byte count.
  uint64_t pool_changes() const { return pool_changes_; }

  // Per device of a pool of `device_count`: whether reports (REST /pool,
  // `hmpmd pool`, /metrics) list it: every live device, devices of no
  // worker, and the newest kDeadDevicesListed dead ones of workers that did
  // not register again under their name since. A worker that registers
  // again after it was declared dead (a controller stall, a restart) gets a
  // new device; its old one stays in the pool, as past task records and
  // traces name it, but is not listed twice. O(workers).
  std::vector<bool> ListedDevices(size_t device_count) const;

  // --- changes ---
  // Restart detection for a registration of `m` (see InstanceCheck); a
  // worker it replaces has its instance retired here. A registration
  // without an instance (0) is never refused and replaces none.
  InstanceCheck CheckInstance(const RegisterMsg& m);
  // Adds live worker `w` and returns it. REQUIRES: w.id == next_id(), and
  // no live worker has its identity.
  WorkerInfo& Add(WorkerInfo w);
  // Live worker `w` is reached at `identity` from now on (the same process
  // reconnected on a new socket). REQUIRES: no other live worker has it.
  void Rebind(WorkerInfo& w, const std::string& identity);
  // Marks live worker `w` gone, for `why`: it is no longer found by
  // identity or key. Does nothing to a worker already gone.
  void MarkGone(WorkerInfo& w, std::string why);
  // What w's last heartbeat said its object store holds.
  void SetStoreBytes(WorkerInfo& w, uint64_t bytes, uint64_t state_bytes);
  // Calls `cb` once at least `n` workers are alive: at once if they are,
  // else from the WakeWaiters() call that finds them.
  void WhenAlive(size_t n, std::function<void()> cb);
  // Calls (and drops) the WhenAlive() callbacks that alive_count() meets.
  void WakeWaiters();

 private:
  std::vector<WorkerInfo> workers_;                        // by WorkerId
  std::unordered_map<std::string, WorkerId> by_identity_;  // live workers
  std::unordered_map<std::string, WorkerId> by_key_;       // live ones with a data endpoint
  // The last worker that registered under each name with an instance,
  // alive or not; and the instances a newer process of their name replaced
  // (the last kRetiredKept, oldest first in retired_order_).
  std::unordered_map<std::string, WorkerId> by_name_;
  std::set<uint64_t> retired_;
  std::deque<uint64_t> retired_order_;
  std::vector<WorkerId> device_worker_;  // by DeviceId
  size_t alive_ = 0;
  uint64_t pool_changes_ = 0;
  std::vector<std::pair<size_t, std::function<void()>>> waiters_;
};

}  // namespace hmpmd
