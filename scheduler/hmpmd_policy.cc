#include "hmpmd/scheduler/hmpmd_policy.h"

#include <algorithm>
#include <cmath>

#include "hmpmd/scheduler/scheduler.h"

namespace hmpmd {

double HmpmdPolicy::Priority(const TaskView& task) const {
  // Critical path first. A driver session's ranks see only the tasks sent
  // so far, so there a task ready at r with rank R goes before one ready at
  // r' with R' when R - r > R' - r': new tasks cannot starve old ones.
  // A known DAG needs no ageing: it would put work ready early but off the
  // critical path (RL's next rollouts) before critical work that became
  // ready later (the rewards the next update waits for).
  const bool open = task.graph != nullptr && task.graph->open();
  double p = std::floor(task.rank_us - (open ? static_cast<double>(task.ready_at) : 0.0));
  // Ties (within 1 us) go to the producers of one gang together, by the
  // gang's index: a gang starts when its last input is done, so producers
  // of several gangs (the shards before each MoE chunk's all-to-all) that
  // run interleaved would make every gang wait for the slowest chunk.
  uint32_t gang = kNoGroup;
  if (task.task != nullptr && task.graph != nullptr) {
    for (uint32_t c : task.task->consumers) gang = std::min(gang, task.graph->task(c).group);
  }
  if (gang != kNoGroup) p -= static_cast<double>(gang % 1024 + 1) / 1025.0;
  // Several jobs: the job furthest behind its fair share of the core kind
  // the task will run on goes first (job_shares.h); each microsecond a job
  // is ahead outweighs kFairGain microseconds of rank and waiting. The
  // clock counts in steps of kFairStepUs: a job's waiting tasks then go
  // stale (re-keyed in the engine's heap) once per step, not at each of
  // its placements. Several tenants: first the tenant furthest behind,
  // each step of its clock outweighing kTenantGain steps of a job's.
  if (fair_.size() > 1) {
    const JobShares::Standing s = fair_.StandingOf(task.job, RunsOn(task));
    if (fair_.tenants() > 1) {
      p -= kTenantGain * kFairGain * std::floor(s.tenant_clock / kFairStepUs) * kFairStepUs;
    }
    if (s.siblings > 1) p -= kFairGain * std::floor(s.job_clock / kFairStepUs) * kFairStepUs;
  }
  return p;
}

uint32_t HmpmdPolicy::GangSize(const TaskView& task) {
  if (task.task == nullptr || task.task->group == kNoGroup || task.graph == nullptr) return 1;
  return static_cast<uint32_t>(task.graph->groups()[task.task->group].members.size());
}

CoreKind HmpmdPolicy::RunsOn(const TaskView& task) const {
  // As Place() chooses (where vector cores have no capacity now, a
  // communication task may take its own kind's core instead).
  if (task.task != nullptr && task.spec != nullptr && CommToVector(*task.task, *task.spec) &&
      fair_.cores(CoreKind::kVector) >= GangSize(task)) {
    return CoreKind::kVector;
  }
  return task.spec != nullptr ? task.spec->core : CoreKind::kCube;
}

uint64_t HmpmdPolicy::WaitClass(const TaskView& task) const {
  const bool to_vector = task.task != nullptr && CommToVector(*task.task, *task.spec);
  if (const uint64_t set = share_.WaitClass(task, to_vector); set != 0) return set;
  // Floating by state affinity: Place answers alike for the sub-model's
  // tasks of one kind and kernel too (its holders, its width, the pool).
  return affinity_.Handles(task) ? DeviceShare::SubmodelWaitClass(task, to_vector) : 0;
}

void HmpmdPolicy::OnJobAdded(const JobRun& job, const ResourcePool& pool) {
  pool_ = &pool;
  fair_.SetCores(pool);
  fair_.AddJob(job.id, job.graph->spec().weight, job.tenant);
  DeviceSetPolicy::OnJobAdded(job, pool);
  affinity_.AddJob(job, static_cast<uint32_t>(pool.alive_device_count()));
  affinity_.PlaceInitial(job, pool);
}

void HmpmdPolicy::OnJobRemoved(JobId job) {
  fair_.RemoveJob(job);
  DeviceSetPolicy::OnJobRemoved(job);
  affinity_.RemoveJob(job);
}

void HmpmdPolicy::OnPlaced(const TaskView& task, CoreId core) {
  DeviceSetPolicy::OnPlaced(task, core);
  if (pool_ != nullptr) affinity_.OnPlaced(task, pool_->core(core).device, *pool_);
  if (task.task != nullptr && task.task->is_comm) comm_cores_.insert(core);
  if (pool_ != nullptr) fair_.Charge(task.job, pool_->core(core).kind, task.est_us);
}

void HmpmdPolicy::OnRunDone(JobId job, uint32_t /*run*/, CoreId core, double est_us,
                            double ran_us) {
  if (pool_ != nullptr) fair_.Charge(job, pool_->core(core).kind, ran_us - est_us);
}

void HmpmdPolicy::OnDeviceAdded(DeviceId device, const ResourcePool& pool) {
  fair_.SetCores(pool);
  DeviceSetPolicy::OnDeviceAdded(device, pool);
}

void HmpmdPolicy::OnDeviceRemoved(DeviceId device, const ResourcePool& pool) {
  fair_.SetCores(pool);
  DeviceSetPolicy::OnDeviceRemoved(device, pool);
  affinity_.OnDeviceRemoved(device);
}

// A core of `kind` free now on a device whose vector core runs
// communication placed earlier (comm_cores_, pruned here as it drains), or
// UINT32_MAX. Looks at kOverlapLook such devices at most.
CoreId HmpmdPolicy::FreeCoreBesideComm(const TaskView& task, CoreKind kind,
                                       const ResourcePool& pool, TimeUs now) {
  int looked = 0;
  for (auto it = comm_cores_.begin(); it != comm_cores_.end() && looked < kOverlapLook;) {
    const ResourcePool::Core& comm = pool.core(*it);
    const ResourcePool::Device& d = pool.device(comm.device);
    if (!d.alive || comm.queued == 0 || comm.busy_until <= now) {
      it = comm_cores_.erase(it);
      continue;
    }
    ++looked;
    ++it;
    if (!pool.Supports(comm.device, task.kernel_id) || !StoreTakes(task, comm.device, pool)) {
      continue;
    }
    for (CoreId c : d.cores) {
      const ResourcePool::Core& core = pool.core(c);
      if (core.kind == kind && core.queued == 0 && core.busy_until <= now) return c;
    }
  }
  return UINT32_MAX;
}

Placement HmpmdPolicy::Place(const TaskView& task, const ResourcePool& pool, TimeUs now) {
  CoreKind kind = task.spec->core;
  // A gang needs a vector core per member: with fewer, it stays on its
  // own kind (else it would wait for ever on a mixed pool).
  if (CommToVector(*task.task, *task.spec) && pool.alive_cores(CoreKind::kVector) > 0 &&
      pool.alive_cores(CoreKind::kVector) >= GangSize(task) &&
      pool.HasCapacity(CoreKind::kVector)) {
    kind = CoreKind::kVector;
  }
  if (share_.Constrained(task)) return share_.Place(task, kind, pool, now);
  if (affinity_.Handles(task)) return affinity_.Place(task, kind, pool, now);
  // Compute with no input data to fetch goes beside running communication
  // when a core there is free: the two overlap on that device.
  if (!task.task->is_comm && task.input_bytes == 0 && !comm_cores_.empty()) {
    CoreId c = FreeCoreBesideComm(task, kind, pool, now);
    if (c != UINT32_MAX) return Placement::Placed(c);
  }
  if (task.input_device != UINT32_MAX) {
    DeviceId near = task.input_device;
    const ResourcePool::Device& d = pool.device(near);
    if (d.alive && pool.Supports(near, task.kernel_id) && StoreTakes(task, near, pool)) {
      for (CoreId c : d.cores) {
        const ResourcePool::Core& core = pool.core(c);
        // Communication stays with its data on the producer's device (its
        // vector core overlaps the cube core's next compute); compute goes
        // there only when the core is free now.
        bool idle = core.queued == 0 && core.busy_until <= now;
        if (core.kind == kind && (idle || task.task->is_comm) && pool.HasCapacity(c)) {
          return Placement::Placed(c);
        }
      }
    }
  }
  // Cores of a kind are equally fast, so the earliest-draining one also
  // finishes the task earliest.
  Placement best = EarliestCore(task, kind, pool, [](DeviceId) { return true; });
  if (best.kind != Placement::Kind::kPlaced || task.input_device == UINT32_MAX ||
      pool.core(best.core).device == task.input_device) {
    return best;
  }
  // Locality: the device that holds the largest input wins while its core
  // drains no later than the earliest one plus the time fetching that
  // input would take.
  // (The input device's own cores, not a scan of every available core.)
  CoreId local = UINT32_MAX;
  const DeviceId near = task.input_device;
  if (pool.device(near).alive && pool.Supports(near, task.kernel_id) &&
      StoreTakes(task, near, pool)) {
    for (CoreId c : pool.device(near).cores) {
      if (pool.core(c).kind != kind || !pool.HasCapacity(c)) continue;
      if (local == UINT32_MAX || pool.core(c).busy_until < pool.core(local).busy_until) local = c;
    }
  }
  if (local == UINT32_MAX) return best;
  const double fetch_us = static_cast<double>(task.input_bytes) / kFetchBytesPerUs;
  if (static_cast<double>(pool.core(local).busy_until) <=
      static_cast<double>(pool.core(best.core).busy_until) + fetch_us) {
    return Placement::Placed(local);
  }
  return best;
}

}  // namespace hmpmd
