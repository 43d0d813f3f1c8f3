// Scheduler: admission checks, whether the pool that is up can run a job
// (or the tasks a driver appends) at all; refused at submission with one
// line instead of waiting forever.
#include <algorithm>
#include <map>
#include <string_view>
#include <unordered_map>

#include "hmpmd/scheduler/scheduler.h"

namespace hmpmd {

Status Scheduler::CheckGangsFit(const std::vector<TaskSpec>& tasks, uint32_t first,
                                std::span<const uint32_t> kernel_ids,
                                std::span<const uint8_t> needed) const {
  // Members per group, groups in the order their first member comes. A
  // gang runs whole: one with any member still to run needs every member's
  // device (its done members run again beside a member rebuilt after its
  // worker died).
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
          "tasks[" + std::to_string(first + m) + "] '" + t.id + "': collective.group: group '" +
          t.collective->group + "' has " + std::to_string(members) +
          " members, which need distinct devices; devices that run '" + t.kernel + "' on a " +
          std::string(CoreKindName(t.core)) + " core: " + std::to_string(it->second));
    }
  }
  return Status::Ok();
}

Status Scheduler::CheckFeasible(const JobGraph& graph, const JobRun& job,
                                std::span<const uint8_t> needed, bool set_sizes) const {
  if (pool_.alive_device_count() == 0) return Status::Ok();  // waits for workers
  for (uint32_t i = 0; i < graph.size(); ++i) {
    if (!needed.empty() && !needed[i]) continue;
    const TaskSpec& t = graph.spec_task(i);
    if (pool_.alive_cores(t.core) == 0) {
      return Status::InvalidArgument(graph.Describe(i) + ": core: no worker has a '" +
                                     std::string(CoreKindName(t.core)) + "' core");
    }
    if (!pool_.AnySupports(job.kernel_ids[i], t.core)) {
      return Status::InvalidArgument(graph.Describe(i) + ": kernel: no worker runs '" + t.kernel +
                                     "' on a " + std::string(CoreKindName(t.core)) + " core");
    }
  }
  RETURN_IF_ERROR(CheckGangsFit(graph.spec().tasks, 0, job.kernel_ids, needed));
  if (!set_sizes) return Status::Ok();
  for (size_t s = 0; s < graph.spec().submodels.size(); ++s) {
    const SubmodelSpec& sm = graph.spec().submodels[s];
    if (sm.devices > pool_.alive_device_count()) {
      return Status::InvalidArgument("submodels[" + std::to_string(s) + "] '" + sm.name +
                                     "': devices: asks for " + std::to_string(sm.devices) +
                                     ", the pool has " +
                                     std::to_string(pool_.alive_device_count()));
    }
  }
  return Status::Ok();
}

void Scheduler::UpdateWaiting() {
  std::vector<uint8_t> needed;
  for (auto& [id, job] : jobs_) {
    if (IsTerminal(job.state)) continue;
    job.short_sets = policy_->ShortSets(id);
    if (pool_.alive_device_count() == 0) {
      job.waiting = "no live worker";
      continue;
    }
    // A task is still needed while its run of the last step is not done.
    const JobGraph& g = *job.graph;
    const size_t last = size_t{g.steps() - 1} * g.size();
    needed.assign(g.size(), 1);
    for (uint32_t i = 0; i < g.size() && last + i < job.runs.size(); ++i) {
      needed[i] = job.runs[last + i].state != TaskState::kDone;
    }
    // A set larger than the devices left runs short (JobRun::short_sets
    // says so); the job does not wait for it.
    Status st = CheckFeasible(g, job, needed, /*set_sizes=*/false);
    job.waiting = st.ok() ? "" : st.message();
  }
}

}  // namespace hmpmd
