// DeviceStates: the sub-model state each simulated device holds, and the
// memory rule it keeps (docs/simulation.md, "State residency"):
// 1. A part of a sub-model's state (job, sub-model, shard;
//    state_shards.h) is resident on a device once loaded, until evicted.
// 2. Resident parts plus the outputs the device's object store holds never
//    exceed its memory (memory_mb): making room evicts the least recently
//    used parts first, never the one a running task needs.
// 3. What cannot fit even after every other part would be evicted is
//    refused, naming the figures, and evicts nothing.
// 4. A prefetch (a load no task waits for yet) takes only room that is
//    free or held by parts no running task uses and that some task has
//    used: it never evicts another prefetched part before its task ran,
//    and when that is not enough it is not started.
// Cost: O(parts resident on the device) per call.
// Thread-safety: not thread-safe; owned by one Simulator.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "hmpmd/protocol/status.h"
#include "hmpmd/protocol/types.h"
#include "hmpmd/scheduler/resource_pool.h"

namespace hmpmd {

struct StatePart {
  JobId job = 0;
  uint32_t submodel = 0;
  uint32_t shard = 0;
  bool operator==(const StatePart&) const = default;
};

class DeviceStates {
 public:
  // Whether `device` holds `part`; if so it becomes the most recently used.
  bool Touch(DeviceId device, const StatePart& part);
  // Rules 1-3: makes `part` (`bytes`) resident on `device`, whose memory is
  // `cap` bytes with `outputs` bytes of outputs held. Returns how many
  // parts it evicted, or an error when it cannot fit.
  Result<uint32_t> Load(DeviceId device, const StatePart& part, double bytes, uint64_t cap,
                        uint64_t outputs);
  // Rule 4: makes `part` resident on `device` ahead of its task, evicting
  // only used parts not in `in_use`. Returns how many it evicted, or
  // nothing (and evicts nothing) when it does not fit so.
  std::optional<uint32_t> Prefetch(DeviceId device, const StatePart& part, double bytes,
                                   uint64_t cap, uint64_t outputs,
                                   const std::vector<StatePart>& in_use);
  // Rule 2 for outputs: evicts parts (never `keep`) until `need` more bytes
  // of outputs fit beside `outputs` held; false when they cannot.
  bool MakeRoom(DeviceId device, uint64_t need, uint64_t cap, uint64_t outputs,
                const StatePart& keep);
  // Whether `device` holds `part`, without using it.
  bool Holds(DeviceId device, const StatePart& part) const;
  // Bytes of state resident on `device`.
  double Bytes(DeviceId device) const;
  // Parts resident on `device`, least recently used first.
  std::vector<StatePart> Parts(DeviceId device) const;

 private:
  struct Held {
    StatePart part;
    double bytes = 0;
    bool used = true;  // false: prefetched, no task has run with it yet
  };
  std::vector<Held>& On(DeviceId device);
  // Evicts the least recently used parts other than `keep` until `room`
  // bytes are free of `cap` beside `outputs`; returns how many went, or -1
  // when they cannot be freed.
  int Evict(std::vector<Held>& held, double room, double cap, double outputs,
            const StatePart& keep);

  std::vector<std::vector<Held>> devices_;
};

}  // namespace hmpmd
