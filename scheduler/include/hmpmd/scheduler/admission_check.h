// AdmissionCheck: whether the devices that are up can run given tasks at
// all, so that a job (or the tasks a driver appends) they never could is
// refused with one line naming the task or sub-model and the field, instead
// of waiting forever:
// 1. each task: some live device has a core of its kind, and the labels
//    the task requires, and runs its kernel on a core of that kind (the
//    labels are checked first, so a refusal names the missing label);
// 2. each collective gang: as many live devices able to run a member as it
//    has members (members need distinct devices). A gang runs whole, so one
//    with any member still needed needs every member's device;
// 3. at admission, each sub-model's set: no more devices than are up;
// 4. each stateful sub-model: the state one device holds to run it
//    (StateBytesPerDevice, state_shards.h) fits the memory (memory_mb) of
//    some live device.
// A pool with no live device passes everything: the job waits for workers.
// It reads the pool it is given and keeps nothing; checking costs O(tasks)
// plus O(devices) per (kernel, core kind) pair the gangs use.
// Thread-safety: as the pool it reads (the Scheduler's thread).
#pragma once

#include <cstdint>
#include <span>

#include "hmpmd/protocol/job_spec.h"
#include "hmpmd/protocol/status.h"
#include "hmpmd/scheduler/resource_pool.h"

namespace hmpmd {

class AdmissionCheck {
 public:
  explicit AdmissionCheck(const ResourcePool& pool) : pool_(pool) {}

  // Rules 1 and 2 for `tasks`: tasks[i] is task `first` + i of its job (for
  // messages), whose kernel the pool interned as kernel_ids[i]. Only tasks
  // with needed[i] set count, when `needed` is not empty.
  Status Tasks(std::span<const TaskSpec> tasks, uint32_t first,
               std::span<const uint32_t> kernel_ids, std::span<const uint8_t> needed = {}) const;
  // Rule 3 for `submodels`: submodels[s] is sub-model `first` + s of its job.
  Status SetSizes(std::span<const SubmodelSpec> submodels, size_t first) const;
  // Rule 4: per_device[s] is the state one device holds for submodels[s].
  Status States(std::span<const SubmodelSpec> submodels, std::span<const double> per_device,
                size_t first) const;

 private:
  // Why no live device with a core of `kind` has all of `required`:
  // "requires accel=910c: no worker has it".
  std::string Unlabelled(const Labels& required, CoreKind kind) const;
  // Rule 2.
  Status Gangs(std::span<const TaskSpec> tasks, uint32_t first,
               std::span<const uint32_t> kernel_ids, std::span<const uint8_t> needed) const;

  const ResourcePool& pool_;
};

}  // namespace hmpmd
