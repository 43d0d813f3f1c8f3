#include "hmpmd/sim/device_states.h"

#include <algorithm>
#include <cstdio>

namespace hmpmd {

std::vector<DeviceStates::Held>& DeviceStates::On(DeviceId device) {
  if (devices_.size() <= device) devices_.resize(device + 1);
  return devices_[device];
}

bool DeviceStates::Touch(DeviceId device, const StatePart& part) {
  std::vector<Held>& held = On(device);
  auto it = std::find_if(held.begin(), held.end(), [&](const Held& h) { return h.part == part; });
  if (it == held.end()) return false;
  it->used = true;
  std::rotate(it, it + 1, held.end());
  return true;
}

int DeviceStates::Evict(std::vector<Held>& held, double room, double cap, double outputs,
                        const StatePart& keep) {
  double used = outputs, kept = outputs;
  for (const Held& h : held) {
    used += h.bytes;
    if (h.part == keep) kept += h.bytes;
  }
  if (kept + room > cap) return -1;  // evicting everything else would not do
  int evicted = 0;
  for (auto it = held.begin(); used + room > cap && it != held.end();) {
    if (it->part == keep) {
      ++it;
      continue;
    }
    used -= it->bytes;
    it = held.erase(it);
    ++evicted;
  }
  return evicted;
}

Result<uint32_t> DeviceStates::Load(DeviceId device, const StatePart& part, double bytes,
                                    uint64_t cap, uint64_t outputs) {
  std::vector<Held>& held = On(device);
  if (cap != UINT64_MAX) {
    const int evicted =
        Evict(held, bytes, static_cast<double>(cap), static_cast<double>(outputs), part);
    if (evicted < 0) {
      char why[192];
      std::snprintf(why, sizeof why,
                    "%.15g bytes of state do not fit: %llu bytes of outputs held, %llu of "
                    "memory (memory_mb)",
                    bytes, static_cast<unsigned long long>(outputs),
                    static_cast<unsigned long long>(cap));
      return Status::ResourceExhausted(why);
    }
    held.push_back({part, bytes});
    return static_cast<uint32_t>(evicted);
  }
  held.push_back({part, bytes});
  return 0u;
}

std::optional<uint32_t> DeviceStates::Prefetch(DeviceId device, const StatePart& part, double bytes,
                                               uint64_t cap, uint64_t outputs,
                                               const std::vector<StatePart>& in_use) {
  std::vector<Held>& held = On(device);
  auto evictable = [&](const Held& h) {
    return h.used && std::find(in_use.begin(), in_use.end(), h.part) == in_use.end();
  };
  if (cap != UINT64_MAX) {
    double used = static_cast<double>(outputs), kept = used;
    for (const Held& h : held) {
      used += h.bytes;
      if (!evictable(h)) kept += h.bytes;
    }
    if (kept + bytes > static_cast<double>(cap)) return std::nullopt;
    uint32_t evicted = 0;
    for (auto it = held.begin(); used + bytes > static_cast<double>(cap) && it != held.end();) {
      if (!evictable(*it)) {
        ++it;
        continue;
      }
      used -= it->bytes;
      it = held.erase(it);
      ++evicted;
    }
    held.push_back({part, bytes, false});
    return evicted;
  }
  held.push_back({part, bytes, false});
  return 0u;
}

bool DeviceStates::MakeRoom(DeviceId device, uint64_t need, uint64_t cap, uint64_t outputs,
                            const StatePart& keep) {
  if (cap == UINT64_MAX) return true;
  return Evict(On(device), static_cast<double>(need), static_cast<double>(cap),
               static_cast<double>(outputs), keep) >= 0;
}

bool DeviceStates::Holds(DeviceId device, const StatePart& part) const {
  if (device >= devices_.size()) return false;
  const std::vector<Held>& held = devices_[device];
  return std::any_of(held.begin(), held.end(), [&](const Held& h) { return h.part == part; });
}

double DeviceStates::Bytes(DeviceId device) const {
  double total = 0;
  if (device < devices_.size()) {
    for (const Held& h : devices_[device]) total += h.bytes;
  }
  return total;
}

std::vector<StatePart> DeviceStates::Parts(DeviceId device) const {
  std::vector<StatePart> parts;
  if (device < devices_.size()) {
    for (const Held& h : devices_[device]) parts.push_back(h.part);
  }
  return parts;
}

}  // namespace hmpmd
