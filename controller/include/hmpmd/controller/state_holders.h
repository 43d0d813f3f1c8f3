// StateHolders: which workers hold which sub-model states of the live
// jobs, as the workers say after each run (TaskResult::state_held), and
// the live loads of those states, for reports and traces.
//
// When the controller sends a task of a stateful sub-model to a worker
// that does not hold its state, it names a holder (TaskAssign::state_from)
// for the worker to load it from: the one that ran the sub-model last, so
// a learner's replica starts from its newest weights.
//
// Thread-safety: the controller loop's, as every piece of its state.
#pragma once

#include <cstdint>
#include <memory>
#include <unordered_map>
#include <vector>

#include "hmpmd/protocol/types.h"
#include "hmpmd/sim/schedule_metrics.h"

namespace hmpmd {

class StateHolders {
 public:
  // `worker` ran a task of `submodel` of `job` and holds its state.
  void Held(JobId job, uint32_t submodel, WorkerId worker);
  bool Holds(JobId job, uint32_t submodel, WorkerId worker) const;
  // The holder for `worker` to load from (the latest to run the
  // sub-model), or kNone when there is none or `worker` holds it already.
  static constexpr WorkerId kNone = UINT32_MAX;
  WorkerId SourceFor(JobId job, uint32_t submodel, WorkerId worker) const;

  // A load of `submodel`'s state onto `device` over [start, end) (the
  // controller's clock) for `run`, which waited `waited` of it (the rest
  // ran while the lane ran the tasks ahead).
  void Loaded(JobId job, uint32_t submodel, DeviceId device, TimeUs start, TimeUs end, uint32_t run,
              uint64_t bytes, TimeUs waited);
  // The job's loads so far (null when none): a snapshot for reports.
  std::shared_ptr<const StateLoadTimes> LoadsOf(JobId job) const;

  // A worker gone: it holds nothing any more.
  void ForgetWorker(WorkerId worker);
  // A job freed: its states and records go.
  void ForgetJob(JobId job);

 private:
  struct OfJob {
    std::vector<std::vector<WorkerId>> holders;  // per sub-model, the latest last
    std::shared_ptr<StateLoadTimes> loads;       // copied on write (snapshots are shared)
  };
  std::unordered_map<JobId, OfJob> jobs_;
};

}  // namespace hmpmd
