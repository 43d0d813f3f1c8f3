// Controller::FillDataPlane: what each dispatched task is told beyond its
// kernel: where its inputs live, how often its outputs will be read, its
// gang's members, and its driver's data socket. The rest of the class is in
// controller.cc.
#include <spdlog/spdlog.h>

#include "hmpmd/controller/controller.h"
#include "hmpmd/scheduler/device_share.h"

namespace hmpmd {

// Inputs: where each producer's outputs live. Reads: how many consumers
// will fetch this run's outputs (0 keeps a final output for the user).
// Gang: every member's data endpoint; the scheduler placed the whole gang
// in this round (gang start), so every member's device is known here.
void Controller::FillDataPlane(const Dispatch& d, TaskAssign& a) {
  const JobRun& job = *scheduler_->job(d.job);
  const JobGraph& g = *job.graph;
  const uint32_t index = d.run % g.size();
  const uint32_t base = d.run - index;
  const GraphTask& gt = g.task(index);
  if (g.open()) {
    a.reads = 0;  // a session's outputs stay until released (FreeRuns)
    a.notify = sessions_.NotifyOf(d.job);
  } else {
    // Consumers already done (of a rebuilt run) do not read it again.
    a.reads = 0;
    for (uint32_t c : gt.consumers) a.reads += job.runs[base + c].state != TaskState::kDone;
    // Only the last step's sinks are the job's final outputs.
    if (a.reads == 0 && (!gt.consumers.empty() || d.run / g.size() + 1 < g.steps())) {
      a.reads = TaskAssign::kDropOutputs;
    }
  }
  bool ahead = false;
  for (uint32_t p : g.kernel_inputs(index)) {
    InputRef in;
    in.run = base + p;
    if (job.runs[in.run].state != TaskState::kDone) {
      // Dispatched early, behind its producer on the same lane: the worker
      // reads what that run left there, once it ran and succeeded.
      in.bytes = InputRef::kAhead;
      in.endpoint = workers_[workers_.IdOfDevice(d.device)].data_endpoint;
      a.inputs.push_back(std::move(in));
      ahead = true;
      continue;
    }
    // The size is known even where no worker holds the output (after a
    // restart); an empty endpoint then fails the task, naming the input.
    in.bytes = job.runs[in.run].output_bytes;
    in.buffers = job.runs[in.run].output_buffers;
    const OutputLocation* loc = OutputOf(d.job, in.run);
    if (loc != nullptr && in.kept() && workers_[loc->worker].alive) {
      in.endpoint = workers_[loc->worker].data_endpoint;
    }
    a.inputs.push_back(std::move(in));
  }
  counters_.early_runs += ahead;
  FillState(d, job, gt.submodel, a);
  if (gt.group == kNoGroup) return;
  auto [tag, fresh] = round_gangs_.try_emplace({d.job, base, gt.group}, 0);
  if (fresh) tag->second = (static_cast<uint64_t>(started_at_) << 24) ^ ++next_gang_;
  a.gang.tag = tag->second;
  const CollectiveGroup& group = g.groups()[gt.group];
  for (uint32_t i = 0; i < group.members.size(); ++i) {
    if (base + group.members[i] == d.run) a.gang.rank = i;
    auto dev = round_devices_.find({d.job, base + group.members[i]});
    if (dev == round_devices_.end()) {
      // Not placed together: leave the gang empty and the task fails.
      spdlog::error("job {} run {}: collective member {} not dispatched with its gang", d.job,
                    d.run, group.members[i]);
      a.gang.endpoints.clear();
      return;
    }
    a.gang.endpoints.push_back(workers_[workers_.IdOfDevice(dev->second)].data_endpoint);
  }
}

// State: a submitted job's stateful sub-model follows its tasks. A worker
// that lacks it loads it from the latest holder before the kernel runs;
// the first to run the sub-model makes it. A driver session's actors keep
// theirs on the devices of their sets instead (each replica made by its
// kernel): their state holds autograd graphs in flight, which no copy
// carries.
void Controller::FillState(const Dispatch& d, const JobRun& job, uint32_t submodel, TaskAssign& a) {
  const JobGraph& g = *job.graph;
  if (g.open() || !DeviceShare::KeepsState(g.spec().submodels[submodel], false)) return;
  a.keeps_state = true;
  const WorkerId w = workers_.IdOfDevice(d.device);
  const WorkerId from = state_holders_.SourceFor(d.job, submodel, w);
  if (from != StateHolders::kNone && workers_[from].alive) {
    a.state_from = workers_[from].data_endpoint;
  }
}

}  // namespace hmpmd
