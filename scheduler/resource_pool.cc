#include "hmpmd/scheduler/resource_pool.h"

#include <algorithm>

namespace hmpmd {

DeviceId ResourcePool::AddDevice(DeviceDesc desc) {
  DeviceId id = static_cast<DeviceId>(devices_.size());
  Device d;
  for (const std::string& k : desc.kernels) InternKernel(k);
  d.kernels.reserve(interned_.size());
  for (const Interned& key : interned_) d.kernels.push_back(Runs(desc, key));
  for (int k = 0; k < kNumCoreKinds; ++k) {
    for (uint32_t lane = 0; lane < desc.cores[k]; ++lane) {
      CoreId cid = static_cast<CoreId>(cores_.size());
      Core c;
      c.device = id;
      c.kind = static_cast<CoreKind>(k);
      c.lane = lane;
      cores_.push_back(c);
      d.cores.push_back(cid);
      available_[k].emplace(0, cid);
      ++alive_cores_[k];
    }
  }
  d.desc = std::move(desc);
  for (int k = 0; k < kNumCoreKinds; ++k) {
    if (d.desc.cores[k] > 0) store_caps_[k].insert(StoreCap(d.desc));
  }
  devices_.push_back(std::move(d));
  ++alive_devices_;
  ++changes_;
  return id;
}

void ResourcePool::RemoveDevice(DeviceId id) {
  Device& d = devices_[id];
  if (!d.alive) return;
  d.alive = false;
  for (int k = 0; k < kNumCoreKinds; ++k) {
    if (d.desc.cores[k] > 0) store_caps_[k].erase(store_caps_[k].find(StoreCap(d.desc)));
  }
  --alive_devices_;
  ++changes_;
  for (CoreId cid : d.cores) {
    Core& c = cores_[cid];
    available_[Index(c.kind)].erase({c.busy_until, cid});
    --alive_cores_[Index(c.kind)];
    movers_ -= c.movers;
    c.movers = 0;
    c.queued = 0;
    c.queued_us = 0;
    c.queue_us.clear();
  }
}

uint32_t ResourcePool::InternKernel(std::string_view name, const Labels& required) {
  std::string key(name);
  for (const Label& l : required) {
    key.push_back('\0');
    key += l.key;
    key.push_back('\0');
    key += l.value;
  }
  auto it = kernel_ids_.find(key);
  if (it != kernel_ids_.end()) return it->second;
  const auto id = static_cast<uint32_t>(interned_.size());
  kernel_ids_.emplace(std::move(key), id);
  interned_.push_back({std::string(name), required});
  for (Device& d : devices_) d.kernels.push_back(Runs(d.desc, interned_.back()));
  return id;
}

bool ResourcePool::Runs(const DeviceDesc& desc, const Interned& key) {
  const bool kernel = desc.kernels.empty() || std::find(desc.kernels.begin(), desc.kernels.end(),
                                                        key.kernel) != desc.kernels.end();
  return kernel && HasLabels(desc.labels, key.required);
}

bool ResourcePool::Supports(DeviceId device, uint32_t kernel_id) const {
  const Device& d = devices_[device];
  // An id this pool never interned requires no label: a device that runs
  // every kernel runs it.
  if (kernel_id >= d.kernels.size()) return d.desc.kernels.empty();
  return d.kernels[kernel_id];
}

bool ResourcePool::AnyHasLabels(const Labels& labels, CoreKind kind) const {
  for (const Device& d : devices_) {
    if (d.alive && d.desc.cores[Index(kind)] > 0 && HasLabels(d.desc.labels, labels)) return true;
  }
  return false;
}

bool ResourcePool::AnySupports(uint32_t kernel_id, CoreKind kind) const {
  for (DeviceId id = 0; id < devices_.size(); ++id) {
    if (devices_[id].alive && devices_[id].desc.cores[Index(kind)] > 0 && Supports(id, kernel_id)) {
      return true;
    }
  }
  return false;
}

bool ResourcePool::HasCapacity(CoreId id) const {
  const Core& c = cores_[id];
  if (!devices_[c.device].alive) return false;
  if (c.queued == 0) return true;
  const double queued_us = options_.lookahead_waiting_only ? c.waiting_us() : c.queued_us;
  return c.queued < options_.max_queue_per_core && queued_us < options_.lookahead_us;
}

void ResourcePool::Reindex(CoreId id, TimeUs old_key) {
  Core& c = cores_[id];
  Available& set = available_[Index(c.kind)];
  set.erase({old_key, id});
  if (HasCapacity(id)) set.emplace(c.busy_until, id);
}

void ResourcePool::Assign(CoreId id, double est_us, TimeUs now, StoreUse use) {
  Core& c = cores_[id];
  TimeUs old_key = c.busy_until;
  devices_[c.device].reserved_bytes += use.reserve;
  if (use.moves_memory()) {
    ++c.movers;
    ++movers_;
  }
  ++c.queued;
  c.queued_us += est_us;
  c.queue_us.push_back(est_us);
  c.busy_us += est_us;
  c.busy_until = std::max(c.busy_until, now) + static_cast<TimeUs>(est_us);
  Reindex(id, old_key);
}

void ResourcePool::Release(CoreId id, double est_us, TimeUs now, StoreUse use) {
  Core& c = cores_[id];
  if (!devices_[c.device].alive || c.queued == 0) return;
  TimeUs old_key = c.busy_until;
  uint64_t& reserved = devices_[c.device].reserved_bytes;
  reserved -= std::min(reserved, use.reserve);
  if (use.moves_memory() && c.movers > 0) {
    --c.movers;
    --movers_;
  }
  ++changes_;
  --c.queued;
  c.queued_us = c.queued == 0 ? 0 : std::max(0.0, c.queued_us - est_us);
  // Tasks end in queue order; a cancelled one may leave from the middle.
  auto it = std::find(c.queue_us.begin(), c.queue_us.end(), est_us);
  if (it == c.queue_us.end()) it = c.queue_us.begin();
  if (it != c.queue_us.end()) c.queue_us.erase(it);
  if (c.queued == 0) c.queue_us.clear();
  // What is left in the queue starts now.
  c.busy_until = now + static_cast<TimeUs>(c.queued_us);
  Reindex(id, old_key);
}

}  // namespace hmpmd

namespace hmpmd {

void ResourcePool::AddHeldBytes(DeviceId device, int64_t delta) {
  if (device >= devices_.size()) return;
  uint64_t& held = devices_[device].held_bytes;
  held = delta < 0 && static_cast<uint64_t>(-delta) > held ? 0 : held + delta;
}

void ResourcePool::SetStateBytes(DeviceId device, uint64_t bytes) {
  if (device < devices_.size()) devices_[device].state_bytes = bytes;
}

uint64_t ResourcePool::StoreCap(const DeviceDesc& desc) {
  return desc.memory_mb == 0 ? UINT64_MAX : desc.memory_mb << 20;
}

bool ResourcePool::MemoryFull(DeviceId device) const {
  const Device& d = devices_[device];
  return d.desc.memory_mb != 0 &&
         d.held_bytes + d.reserved_bytes + d.state_bytes >= (d.desc.memory_mb << 20);
}

bool ResourcePool::StoreTakes(DeviceId device, CoreKind kind, bool known, uint64_t output_bytes,
                              uint64_t freed, bool reads_stored) const {
  const Device& d = devices_[device];
  if (d.desc.memory_mb == 0) return true;
  if (options_.count_store && known) {
    if (output_bytes == 0) return true;  // adds nothing
    const uint64_t cap = StoreCap(d.desc);
    if (output_bytes > cap) {
      // It could never fit here; it waits for a store that can hold it, if
      // a device with a core of its kind has one, however long that stays busy.
      const std::multiset<uint64_t>& caps = store_caps_[Index(kind)];
      if (!caps.empty() && output_bytes <= *caps.rbegin()) return false;
    } else {
      const uint64_t used = d.held_bytes + d.reserved_bytes + d.state_bytes;
      if (used - std::min(used, freed) + output_bytes <= cap) return true;
      if (!store_lenient_) {
        ++store_refusals_;
        return false;
      }
    }
  }
  if (reads_stored || !MemoryFull(device)) return true;
  if (!store_lenient_) {
    ++store_refusals_;  // so that Schedule's lenient pass runs if nothing frees room
    return false;
  }
  // No queued work will free room: a full store takes it when every store
  // of its kind is full (its worker fails it naming the cap) rather than
  // keep it waiting forever.
  return !AnyRoom(kind);
}

bool ResourcePool::AnyRoom(CoreKind kind) const {
  for (DeviceId id = 0; id < devices_.size(); ++id) {
    const Device& d = devices_[id];
    if (d.alive && d.desc.cores[Index(kind)] > 0 && !MemoryFull(id)) return true;
  }
  return false;
}

}  // namespace hmpmd
