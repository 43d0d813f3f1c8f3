#include "hmpmd/scheduler/admission_check.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

namespace hmpmd {
namespace {

std::string Where(uint32_t index, const std::string& id) {
  return "tasks[" + std::to_string(index) + "] '" + id + "'";
}

// " with accel=910c", or "" for no labels.
std::string With(const Labels& required) {
  return required.empty() ? "" : " with " + LabelsText(required);
}

}  // namespace

std::string AdmissionCheck::Unlabelled(const Labels& required, CoreKind kind) const {
  // Name the first pair no device has at all, then the first no device
  // with a core of the task's kind has; failing both, the devices have
  // each pair but none has them all.
  auto anywhere = [&](const Label& l) {
    for (int k = 0; k < kNumCoreKinds; ++k) {
      if (pool_.AnyHasLabels({l}, static_cast<CoreKind>(k))) return true;
    }
    return false;
  };
  for (const Label& l : required) {
    if (!anywhere(l)) return "requires " + LabelText(l) + ": no worker has it";
  }
  for (const Label& l : required) {
    if (!pool_.AnyHasLabels({l}, kind)) {
      return "requires " + LabelText(l) + ": no worker with a " + std::string(CoreKindName(kind)) +
             " core has it";
    }
  }
  return "requires " + LabelsText(required) + ": no worker with a " +
         std::string(CoreKindName(kind)) + " core has them all";
}

Status AdmissionCheck::Tasks(std::span<const TaskSpec> tasks, uint32_t first,
                             std::span<const uint32_t> kernel_ids,
                             std::span<const uint8_t> needed) const {
  if (pool_.alive_device_count() == 0) return Status::Ok();  // waits for workers
  for (uint32_t i = 0; i < tasks.size(); ++i) {
    if (!needed.empty() && !needed[i]) continue;
    const TaskSpec& t = tasks[i];
    if (pool_.alive_cores(t.core) == 0) {
      return Status::InvalidArgument(Where(first + i, t.id) + ": core: no worker has a '" +
                                     std::string(CoreKindName(t.core)) + "' core");
    }
    const Labels& required = pool_.RequiredLabels(kernel_ids[i]);
    if (!required.empty() && !pool_.AnyHasLabels(required, t.core)) {
      return Status::InvalidArgument(Where(first + i, t.id) + ": " + Unlabelled(required, t.core));
    }
    if (!pool_.AnySupports(kernel_ids[i], t.core)) {
      return Status::InvalidArgument(Where(first + i, t.id) + ": kernel: no worker runs '" +
                                     t.kernel + "' on a " + std::string(CoreKindName(t.core)) +
                                     " core" + With(required));
    }
  }
  return Gangs(tasks, first, kernel_ids, needed);
}

Status AdmissionCheck::Gangs(std::span<const TaskSpec> tasks, uint32_t first,
                             std::span<const uint32_t> kernel_ids,
                             std::span<const uint8_t> needed) const {
  // Members per group, groups in the order their first member comes.
  struct Gang {
    uint32_t first = 0;
    size_t members = 0;
    bool needed = false;
  };
  std::unordered_map<std::string_view, size_t> index;
  std::vector<Gang> gangs;
  for (uint32_t i = 0; i < tasks.size(); ++i) {
    if (!tasks[i].collective) continue;
    auto [it, fresh] = index.try_emplace(tasks[i].collective->group, gangs.size());
    if (fresh) gangs.push_back({i, 0, false});
    Gang& gang = gangs[it->second];
    ++gang.members;
    gang.needed = gang.needed || needed.empty() || needed[i];
  }
  // Devices that can run a member, by (kernel, core kind): a job has many
  // groups but few such pairs.
  std::map<std::pair<uint32_t, CoreKind>, size_t> fits;
  for (const auto& [m, members, wanted] : gangs) {
    if (members < 2 || !wanted) continue;
    const TaskSpec& t = tasks[m];
    auto [it, fresh] = fits.try_emplace({kernel_ids[m], t.core}, 0);
    if (fresh) {
      for (DeviceId d = 0; d < pool_.device_count(); ++d) {
        const ResourcePool::Device& dev = pool_.device(d);
        if (!dev.alive || !pool_.Supports(d, kernel_ids[m])) continue;
        it->second += std::any_of(dev.cores.begin(), dev.cores.end(),
                                  [&](CoreId c) { return pool_.core(c).kind == t.core; });
      }
    }
    if (members > it->second) {
      return Status::InvalidArgument(
          Where(first + m, t.id) + ": collective.group: group '" + t.collective->group + "' has " +
          std::to_string(members) + " members, which need distinct devices; devices that run '" +
          t.kernel + "' on a " + std::string(CoreKindName(t.core)) + " core" +
          With(pool_.RequiredLabels(kernel_ids[m])) + ": " + std::to_string(it->second));
    }
  }
  return Status::Ok();
}

Status AdmissionCheck::SetSizes(std::span<const SubmodelSpec> submodels, size_t first) const {
  const size_t up = pool_.alive_device_count();
  if (up == 0) return Status::Ok();
  for (size_t s = 0; s < submodels.size(); ++s) {
    const SubmodelSpec& sm = submodels[s];
    if (sm.devices > up) {
      return Status::InvalidArgument("submodels[" + std::to_string(first + s) + "] '" + sm.name +
                                     "': devices: asks for " + std::to_string(sm.devices) +
                                     ", the pool has " + std::to_string(up));
    }
  }
  return Status::Ok();
}

Status AdmissionCheck::States(std::span<const SubmodelSpec> submodels,
                              std::span<const double> per_device, size_t first) const {
  if (pool_.alive_device_count() == 0) return Status::Ok();
  uint64_t largest = 0;
  for (int k = 0; k < kNumCoreKinds; ++k) {
    largest = std::max(largest, pool_.LargestStore(static_cast<CoreKind>(k)));
  }
  if (largest == UINT64_MAX) return Status::Ok();  // a device without a memory cap
  for (size_t s = 0; s < submodels.size() && s < per_device.size(); ++s) {
    if (per_device[s] <= static_cast<double>(largest)) continue;
    // Refused: name the device that holds the most, for the message.
    std::string where;
    for (DeviceId d = 0; d < pool_.device_count() && where.empty(); ++d) {
      const ResourcePool::Device& dev = pool_.device(d);
      if (dev.alive && ResourcePool::StoreCap(dev.desc) == largest) where = dev.desc.name;
    }
    const SubmodelSpec& sm = submodels[s];
    char figures[192];
    if (sm.state_shards > 1) {
      std::snprintf(figures, sizeof figures,
                    "%.15g over %u state_shards is %.15g bytes per device, more than any live "
                    "device holds",
                    sm.state_bytes, sm.state_shards, per_device[s]);
    } else {
      std::snprintf(figures, sizeof figures, "%.15g bytes, more than any live device holds",
                    per_device[s]);
    }
    return Status::InvalidArgument("submodels[" + std::to_string(first + s) + "] '" + sm.name +
                                   "': state_bytes: " + figures + " (the largest, '" + where +
                                   "', has memory_mb " + std::to_string(largest >> 20) + ")");
  }
  return Status::Ok();
}

}  // namespace hmpmd
