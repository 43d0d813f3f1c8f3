// A job as the engine runs it: its state, and one TaskRecord per task run
// (graph->total_runs() of them: every task of every step), plus the small
// records the engine hands its caller about runs (dispatches, runs ended,
// outputs to free, runs a worker has started).
// Thread-safety: plain data; the engine's owner thread keeps it.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "hmpmd/scheduler/job_graph.h"
#include "hmpmd/scheduler/policy.h"
#include "hmpmd/scheduler/resource_pool.h"

namespace hmpmd {

enum class TaskState : uint8_t { kBlocked, kReady, kRunning, kDone, kFailed, kCancelled };
enum class JobState : uint8_t { kQueued, kRunning, kSucceeded, kFailed, kCancelled };
std::string_view TaskStateName(TaskState s);
std::string_view JobStateName(JobState s);
inline bool IsTerminal(JobState s) { return s >= JobState::kSucceeded; }

inline constexpr CoreId kNoCore = UINT32_MAX;

// Who a job belongs to: the tenant of the token that submitted it
// (docs/operations.md, "Tenants") and that tenant's share of the pool
// against the other tenants'. Name "": submitted where no tokens are set.
struct JobTenant {
  std::string name;
  uint32_t share = 1;
};

struct TaskRecord {
  TaskState state = TaskState::kBlocked;
  // Ready ahead of its inputs (early dispatch): every input not yet done
  // is running on one core, and it may go only there (pending > 0).
  bool early = false;
  // Attempts it was given back without running (recalled because an input
  // it was dispatched ahead of did not finish); they do not count against
  // SchedulerOptions::max_attempts.
  uint16_t recalled = 0;
  // Attempts it was given again after its kernel failed (TaskSpec's
  // max_retries, retry_rule.h); they do not count against max_attempts
  // either. Kept in memory only: a restarted controller starts it at 0.
  uint16_t retries = 0;
  uint32_t attempt = 0;
  uint32_t pending = 0;  // inputs not yet done
  CoreId core = kNoCore;
  float est_us = 0;  // estimate it was placed with
  // Its StoreUse while placed: output KiB reserved on its device, and
  // whether it reads stored inputs.
  uint32_t reserved_kib = 0;
  TimeUs dispatched = 0;
  // Order in which runs were dispatched, over all jobs: a worker's lane
  // runs its queue in this order, so of the runs on one core the one with
  // the lowest lane_seq is the next to start there. 0: adopted after a
  // controller restart, order unknown. Used only where the worker has not
  // said what it runs (see Scheduler::ReportStarted).
  uint64_t lane_seq = 0;
  TimeUs start = 0;
  TimeUs end = 0;
  // Where its outputs live and how big they are (RecordOutput; live only).
  DeviceId output_device = UINT32_MAX;
  uint64_t output_bytes = 0;
  uint32_t output_buffers = 0;  // empty ones count
  uint32_t reads_left = 0;      // consumers that have not read them yet
  bool held = false;            // counted in the device's held bytes
  // Open jobs: the driver released its outputs (ReleaseOutput); until then
  // they are held whatever their consumers did.
  bool released = false;
  bool reads_stored = false;
  // Ready, and its last placement try was refused for want of room in the
  // object stores of the devices it may use (ResourcePool::StoreTakes): it
  // waits for "store", not for a core. Cleared when it is placed.
  bool store_wait = false;
  // Inputs it found gone while this scheduler counted them held on a live
  // device (OnInputsLost); each cost it no attempt, up to kMaxSlips.
  uint8_t slips = 0;
  static constexpr uint8_t kMaxSlips = 16;
  StoreUse store_use() const { return {uint64_t{reserved_kib} << 10, reads_stored}; }
  // Whether it left outputs to read (0 bytes may still be empty tensors).
  bool kept() const { return output_bytes > 0 || output_buffers > 0; }
};

struct JobRun {
  JobId id = 0;
  std::shared_ptr<const JobGraph> graph;
  JobState state = JobState::kQueued;
  JobTenant tenant;
  std::string error;  // why it failed or was cancelled
  // Why the devices that are up cannot run what is left of it (a gang with
  // more members than live devices able to run them, a kernel or core kind
  // no live worker has, no live worker at all); empty when they can. It
  // waits for workers rather than failing: one may come back. Updated as
  // devices come and go.
  std::string waiting;
  std::vector<TaskRecord> runs;      // graph->total_runs() records
  std::vector<double> rank_us;       // per task of a step
  std::vector<double> est_us;        // per task: estimate at admission
  std::vector<uint32_t> kernel_ids;  // per task of a step
  // Per sub-model: the state one device holds to run it (its shard's part
  // of state_bytes, state_shards.h; 0: no state).
  std::vector<double> state_device_bytes;
  // Per sub-model: the cost model's estimate of moving that state to a
  // device (0: no state), what a policy pays to move it elsewhere.
  std::vector<double> state_load_us;
  uint32_t step = 0;                 // step being run
  std::vector<uint32_t> gang_ready;  // per collective group: members ready this step
  // Per collective group: times it started over this step because a member
  // failed (its worker died, its collective timed out). A gang's members
  // share these attempts: max_attempts bounds the gang, not each member.
  std::vector<uint32_t> gang_retries;
  uint32_t left_in_step = 0;
  uint64_t done = 0;
  uint64_t running = 0;
  TimeUs submitted = 0;
  TimeUs started = -1;  // first dispatch
  TimeUs finished = -1;
  bool held = false;  // AddJob(held): nothing runs until StartHeldJob()
  // Open jobs (driver sessions, JobGraph::BuildOpen): they grow by
  // AppendTasks() and end only after CloseJob(); a failed or cancelled run
  // fails its dependents, not the job.
  bool open = false;
  bool closing = false;     // CloseJob() called: ends once every run has ended
  uint64_t not_ok = 0;      // runs that failed or were cancelled
  std::string first_error;  // of the first of them
  // Sub-models whose device sets are short of their ask (Policy::ShortSets);
  // updated at admission and as devices come and go.
  std::vector<SetShortfall> short_sets;
  // Per run whose worker died while it ran there (not merely queued behind
  // another run; see Scheduler::ReportStarted): those workers' devices, in
  // order of death (SchedulerOptions::max_worker_deaths). In memory only: a
  // restarted controller counts afresh.
  std::map<uint32_t, std::vector<DeviceId>> worker_deaths;
};

// An open job's run that ended other than done (open jobs only; see
// Scheduler::TakeEnded). `device` is where it was running, UINT32_MAX if
// it was not: a running one must be stopped there.
struct RunEnded {
  JobId job = 0;
  uint32_t run = 0;
  TaskState state = TaskState::kFailed;
  std::string error;
  DeviceId device = UINT32_MAX;
};

// Outputs of an open job's run its worker may now free (released by the
// driver and read by every consumer).
struct OutputFreed {
  JobId job = 0;
  uint32_t run = 0;
  DeviceId device = 0;
};

// A run a worker says one of its lanes has started and not finished
// (Scheduler::ReportStarted).
struct StartedRun {
  JobId job = 0;
  uint32_t run = 0;
  uint32_t attempt = 0;
  CoreKind kind = CoreKind::kCube;
  uint32_t lane = 0;  // which core of that kind
};

// One placement decision for the caller to carry out.
struct Dispatch {
  JobId job = 0;
  uint32_t run = 0;
  uint32_t attempt = 0;
  CoreId core = 0;
  DeviceId device = 0;
};

}  // namespace hmpmd
