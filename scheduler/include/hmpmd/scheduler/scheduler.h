// Scheduler: the engine that drives a Policy over a ResourcePool.
//
// It owns the jobs' task states (job_run.h), the ready queue (ready_queue.h:
// a heap per core kind, ordered by the policy's priority) and the cost model. It does no I/O,
// starts no threads and reads no clock: the caller passes `now` into every
// call, so the controller drives it in real time and the simulator in
// virtual time.
//
// Life of a task run: blocked -> ready (inputs done) -> running (placed on a
// core; for the controller, dispatched) -> done | failed. With
// SchedulerOptions::early_dispatch a run may also be ready, and running,
// before its inputs are done (see scheduler_early.cc). Steps of a job
// (spec.repeat) run in order: step k+1's tasks are released when step k is
// done. The members of a collective group (JobGraph::groups()) are a gang:
// they become schedulable when all are ready and are placed together, a
// core for every member or none (a retried member runs alone).
// Thread-safety: not thread-safe; one thread (the controller loop or the
// simulator) owns it.
#pragma once

#include <algorithm>
#include <array>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <queue>
#include <span>
#include <string>
#include <tuple>
#include <unordered_map>
#include <utility>
#include <vector>

#include "hmpmd/scheduler/cost_model.h"
#include "hmpmd/scheduler/death_ledger.h"
#include "hmpmd/scheduler/job_graph.h"
#include "hmpmd/scheduler/job_run.h"
#include "hmpmd/scheduler/lane_order.h"
#include "hmpmd/scheduler/output_sizer.h"
#include "hmpmd/scheduler/policy.h"
#include "hmpmd/scheduler/ready_queue.h"
#include "hmpmd/scheduler/resource_pool.h"

namespace hmpmd {

struct SchedulerOptions {
  PoolOptions pool;
  CostModelOptions cost;
  // Attempts a task run gets when its worker dies under it. Default: 3.
  uint32_t max_attempts = 3;
  // Workers a task run may see die while it runs on them (started by its
  // lane and not finished, not merely queued; see ReportStarted for how
  // that is known) before it is not retried again: the job fails naming
  // the task, which likely kills its process (a kernel that aborts). Each
  // death is on a distinct worker (a dead device never comes back). Lower
  // stops such a task sooner; higher tolerates more workers lost for other
  // reasons while it ran. 0: no limit (only max_attempts). Default: 2.
  uint32_t max_worker_deaths = 2;
  // Ready tasks a Schedule() call may set aside as RetryLater per core kind
  // before it stops looking. Bounds the work of one call. Default: 64.
  uint32_t max_deferred = 64;
  // Early (asynchronous) dispatch: a run whose unfinished inputs are all
  // produced by runs placed on one core C becomes ready at once and may
  // be placed on C only (within C's lookahead), queued behind its
  // producers; the worker's lane runs in order, so its inputs are in the
  // local store when it starts, and the worker->controller->worker round
  // trip leaves the dependency. Not for collective members nor consumers
  // of one. A run dispatched ahead whose producer does not finish is
  // recalled without losing an attempt. Default: false (the simulator has
  // no round trip to hide and does not model lane queues); the controller
  // turns it on.
  bool early_dispatch = false;
};

class Scheduler {
 public:
  Scheduler(SchedulerOptions options, std::unique_ptr<Policy> policy);

  // --- pool ---
  DeviceId AddDevice(DeviceDesc desc);
  // The device is gone: its running tasks go back to ready (or fail the job
  // when out of attempts), and outputs of the current step that lived only
  // there and are still to be read are rebuilt by running their producers
  // again (lineage; recursively, where those producers' inputs are gone
  // too), and so are the last step's final outputs held there. `died`: its worker process died (not
  // merely reconnected, which blames no run); the runs it was running are charged with the death
  // (SchedulerOptions::max_worker_deaths, scheduler_deaths.cc).
  void RemoveDevice(DeviceId id, TimeUs now, bool died = true);
  // What device `id`'s worker last said its lanes have started and not
  // finished (Heartbeat, DoneBatch, RegisterMsg: `started`), replacing
  // what it said before. Should the device die, these runs are blamed,
  // those whose results have not arrived meanwhile. On a lane it named no
  // such run for (the run may have started after it spoke and killed it
  // at once, e.g. a kernel that aborts), the run that lane was next to
  // start is blamed instead (a lane runs its queue in dispatch order); a
  // lane holding a run adopted after a restart, whose order is unknown,
  // then blames none.
  void ReportStarted(DeviceId id, std::span<const StartedRun> runs);
  // Device `id`'s worker reconnected (the same process on a new socket)
  // and holds `held`: of the runs recorded running there, those it does not
  // hold were sent to the connection it had closed and never reached it.
  // They wait again without losing an attempt (a gang's members start over
  // together). Returns how many went back.
  size_t RecallUnheld(DeviceId id, std::span<const StartedRun> held, TimeUs now);

  // --- jobs ---
  // Admits a job. Checks that the pool can run it (kernels, core kinds,
  // devices asked for) unless the pool is still empty. A `held` job is
  // queued with nothing ready until StartHeldJob() (the controller holds a
  // job until its record is stored: one that ran unstored was lost by a
  // crash, and its id given out again). It belongs to `tenant`.
  Result<JobId> AddJob(std::shared_ptr<const JobGraph> graph, TimeUs now, bool held = false,
                       JobTenant tenant = {});
  // Starts a held job's first step. A job not held (or ended) is left as it is.
  void StartHeldJob(JobId id, TimeUs now);
  // Cancels a job that has not ended; frees the cores its runs held.
  Status CancelJob(JobId id, std::string reason, TimeUs now);
  // Forgets an ended job's records.
  void EraseJob(JobId id);

  // --- open jobs (driver sessions; scheduler_open.cc) ---
  // Appends sub-models and tasks to an open job (JobGraph::Append's rules)
  // and readies those whose inputs are done; one whose input already
  // failed ends at once (TakeEnded). Checks the new tasks against the pool
  // like AddJob. Calls Policy::OnJobGrown.
  Status AppendTasks(JobId id, std::vector<SubmodelSpec> submodels, std::vector<TaskSpec> tasks,
                     TimeUs now);
  // Counts `tasks` tasks the controller refused to append to an open job
  // (AppendTasks or an argument check failed) as tasks that did not
  // succeed: the job then ends failed, naming `error` if it is the first.
  void CountRejected(JobId id, uint64_t tasks, const std::string& error);
  // Ends an open job: at once, cancelling what is left, when `cancel_rest`;
  // else once every run has ended (succeeded when all were done).
  Status CloseJob(JobId id, bool cancel_rest, std::string reason, TimeUs now);
  // Ends an open job at once as failed with `reason` (its driver is gone),
  // whether or not anything was left to run.
  Status FailOpenJob(JobId id, std::string reason, TimeUs now);
  // Cancels one run of an open job that has not ended; its dependents end
  // cancelled too (TakeEnded). OK when it had already ended.
  Status CancelRun(JobId id, uint32_t run, TimeUs now);
  // The driver no longer needs run `run`'s outputs: they are freed once its
  // known consumers have read them (TakeFreed).
  void ReleaseOutput(JobId id, uint32_t run);
  // Runs of open jobs that failed or were cancelled since the last call.
  std::vector<RunEnded> TakeEnded() { return std::exchange(ended_, {}); }
  // Outputs of open jobs to free since the last call.
  std::vector<OutputFreed> TakeFreed() { return std::exchange(freed_, {}); }
  // Runs stopped while running because their gang starts over (a member's
  // worker died, its collective failed or its input was lost) or their job
  // failed: the caller cancels each on its `device`, whose attempt is stale
  // now. Any job, since the last call.
  std::vector<RunEnded> TakeAborted() { return std::exchange(aborted_, {}); }
  // Re-admits a job read back from a store after a restart, under its old
  // id: the runs in `done` are done (with their times), the rest of the
  // step being run is blocked or ready as its inputs say. A terminal `state`
  // restores a finished job for queries only. Later AddJob() ids continue
  // above the largest restored id. Skips the feasibility check (the pool
  // is empty while workers re-register). `started`: when it was first
  // dispatched, where the store knows (-1: its earliest done run's start).
  // An open graph (a resumed driver session's) stays open with every run
  // done: its driver closes it. `bytes`, `buffers`: its outputs' size and count (both 0: none; an
  // older store knows no count). Where they live is not known
  // until a worker reports them (RecordOutput); until then a consumer cannot
  // read them (see RebuildUnheldOutputs).
  struct RestoredRun {
    uint32_t run = 0;
    uint32_t attempt = 0;
    TimeUs start = 0, end = 0;
    uint64_t bytes = 0;
    uint32_t buffers = 0;
  };
  Status RestoreJob(JobId id, std::shared_ptr<const JobGraph> graph,
                    const std::vector<RestoredRun>& done, JobState state, std::string error,
                    TimeUs submitted, TimeUs finished, TimeUs now, TimeUs started = -1,
                    JobTenant tenant = {});
  // A restored open job's run `run` had failed (or was cancelled) with
  // `error` before the restart: it ends so again, with its dependents,
  // and does not run. Corruption for a run outside the job.
  Status RestoreRunEnded(JobId id, uint32_t run, bool cancelled, std::string error, TimeUs now);
  // Later AddJob() ids are above `id` (e.g. the largest a store ever saw).
  void ReserveJobIds(JobId id) { next_job_ = std::max(next_job_, id + 1); }
  // A re-registered worker reports it still runs `run` (attempt `attempt`)
  // on its core (`kind`, `lane`): a ready run becomes running there instead
  // of being started twice. Returns false (changing nothing) otherwise.
  bool AdoptRun(JobId job, uint32_t run, uint32_t attempt, DeviceId device, CoreKind kind,
                uint32_t lane, TimeUs now);

  // --- events ---
  // A run finished. Results for stale attempts or ended jobs return false
  // and change nothing.
  bool OnTaskDone(JobId job, uint32_t run, uint32_t attempt, TimeUs start, TimeUs end, TimeUs now);
  // A run failed with `error`. `retryable` failures (lost worker, a
  // collective that timed out or could not reach a peer) run again while
  // attempts last; others fail the job. A collective member's gang starts
  // over as a whole, and its attempts are counted per gang.
  bool OnTaskFailed(JobId job, uint32_t run, uint32_t attempt, const std::string& error,
                    bool retryable, TimeUs now);

  // A run could not read the outputs of the producer runs in `lost` (freed
  // on their worker, or it did not answer): those that are done are rebuilt
  // by running them again (lineage) and this run waits for them, then runs
  // again. Counts as an attempt; out of attempts, the job fails with `error`.
  // `gone`: their workers answered that they hold no such outputs (freed
  // early, or an attempt of them queued ahead there did not succeed): that
  // costs no attempt, up to TaskRecord::kMaxSlips times. Stale results
  // return false and change nothing.
  bool OnInputsLost(JobId job, uint32_t run, uint32_t attempt, const std::vector<uint32_t>& lost,
                    const std::string& error, TimeUs now, bool gone = false);

  // A done run's outputs stay on `device` (its worker's object store); the
  // policy may prefer placing its consumers there. They are read once by
  // each consumer not yet done. Ignored unless the run is done.
  void RecordOutput(JobId job, uint32_t run, DeviceId device, uint64_t bytes, uint32_t buffers);
  // Device `id` holds `bytes` of sub-model state (its worker's heartbeat):
  // placement counts them against its memory_mb beside its outputs.
  void SetStateBytes(DeviceId id, uint64_t bytes) { pool_.SetStateBytes(id, bytes); }

  // After a restart, once workers have reported what they hold: done runs
  // of the step being run whose outputs no worker holds but that a waiting
  // (blocked or ready) run still has to read run again (lineage), as do
  // the last step's final outputs no worker holds. Running readers are
  // left alone (they have read, or they report the loss).
  // A gang some of whose members are done or running (adopted) while
  // others wait starts over whole (RestartGang).
  // Returns how many runs it revived, inputs they need included.
  size_t RebuildUnheldOutputs(JobId job, TimeUs now);

  // --- decisions ---
  // Places ready runs on cores with capacity and appends them to `out`.
  void Schedule(TimeUs now, std::vector<Dispatch>* out);

  // --- queries ---
  const ResourcePool& pool() const { return pool_; }
  const CostModel& cost_model() const { return cost_; }
  CostModel& mutable_cost_model() { return cost_; }
  const Policy& policy() const { return *policy_; }
  Policy& mutable_policy() { return *policy_; }
  const JobRun* job(JobId id) const;
  const std::map<JobId, JobRun>& jobs() const { return jobs_; }
  size_t ready_count() const;
  // Ready runs waiting for a core of `kind`.
  size_t ready_count(CoreKind kind) const { return ready_.size(kind); }
  // Jobs still queued or running.
  size_t active_jobs() const { return active_jobs_; }
  // Whether running `rec` waits on its worker's lane behind another run
  // (LaneOrder): dispatched, not yet started.
  bool Queued(const TaskRecord& rec) const {
    return rec.state == TaskState::kRunning && lanes_.Behind(rec.core, rec.lane_seq);
  }
  // How many of job `id`'s running runs are Queued(). O(cores).
  uint32_t QueuedRuns(JobId id) const { return lanes_.QueuedOf(id); }
  const LaneOrder& lane_order() const { return lanes_; }
  // Task runs of every job held (jobs() summed over runs.size()), kept as
  // they change: a controller checks it for every job and driver group.
  uint64_t held_runs() const { return held_runs_; }

 private:
  using ReadyItem = ReadyQueue::Item;

  // Fills a new job's per-task tables (kernel ids, ranks, estimates, runs).
  void Prepare(const JobGraph& graph, JobRun* job);
  // Fills job->state_load_us for every sub-model of `graph`.
  void EstimateStateLoads(const JobGraph& graph, JobRun* job) const;
  // One walk of the ready heaps (Schedule() may take two).
  void SchedulePass(TimeUs now, std::vector<Dispatch>* out);
  // Puts the items whose keys the policy woke (TakeWoken) back in the
  // ready queue.
  void Wake();
  TaskView View(const JobRun& job, uint32_t run) const;
  // With PoolOptions::count_store: sets v->output_known/output_bytes
  // (OutputSizer).
  void GuessOutput(const JobRun& job, TaskView* v);
  void MakeReady(JobRun& job, uint32_t run, TimeUs now);
  // A gang member made ready again (scheduler_lineage.cc): the gang's
  // other members cannot finish without it, so those running are stopped
  // (aborted_, not counted as attempts), those done run again, and the
  // whole gang is queued together once all are ready.
  void RestartGang(JobRun& job, uint32_t run, TimeUs now);
  // Gangs that lineage split (a member revived beside a mate done or
  // running) start over whole: the member alone would wait for its gang
  // for ever. After every place that revives outputs.
  void RestartSplitGangs(JobRun& job, TimeUs now);
  // `run` ran (or was queued) and goes again: the inputs it was the last
  // to read were freed on their workers when it read them (a worker takes
  // a task's reads as it starts), so they are rebuilt first.
  void ReviveReadInputs(JobRun& job, uint32_t run, TimeUs now);
  void StartStep(JobRun& job, uint32_t step, TimeUs now);
  void FinishJob(JobRun& job, JobState state, std::string error, TimeUs now);
  // The job of (job, run) when that run is running as `attempt`; null for
  // a stale or unknown report (ended job, another attempt, not running).
  JobRun* RunningAttempt(JobId job_id, uint32_t run, uint32_t attempt);
  void ReleaseRun(JobRun& job, TaskRecord& rec, TimeUs now);
  // The open job `id`, marked closing; nullptr when it has ended already.
  Result<JobRun*> CloseOpenJob(JobId id);
  // A ready run waits again (an input it read is gone): blocked, and its
  // gang, if any, counted one member short.
  void Unready(JobRun& job, uint32_t run);
  // False for a gang's queued entry while a member is not ready any more.
  static bool GangComplete(const JobRun& job, uint32_t run) {
    const uint32_t group = job.graph->task(run % job.graph->size()).group;
    return group == kNoGroup || job.gang_ready[group] >= job.graph->groups()[group].members.size();
  }
  // Records run `run` as placed on `core` and reports it in `out`.
  void Commit(JobRun& job, uint32_t run, CoreId core, double est_us, StoreUse use, TimeUs now,
              std::vector<Dispatch>* out);
  // Places one ready item (a gang when it leads one); the outcome of the
  // first member that could not be placed, or kPlaced.
  Placement PlaceItem(JobRun& job, const ReadyItem& item, TimeUs now, std::vector<Dispatch>* out);
  // Early dispatch (scheduler_early.cc). The core every input of `run`
  // not yet done runs on, or kNoCore when they are not all on one core (or
  // one is a collective member, or `run` is one).
  CoreId EarlyCore(const JobRun& job, uint32_t run) const;
  // After `run` was placed: readies its blocked consumers that may now be
  // dispatched ahead of their inputs.
  void ReadyEarlyConsumers(JobRun& job, uint32_t run, TimeUs now);
  // Places an early-ready item on its producers' core, parks it there when
  // that core has no room (it is looked at again when the core frees), or
  // leaves it when it is stale. Returns true when it placed it.
  bool PlaceEarly(JobRun& job, const ReadyItem& item, TimeUs now, std::vector<Dispatch>* out);
  // `run` stopped running (requeued, restarted, waiting for a rebuilt
  // input): consumers dispatched or readied ahead of it go back to blocked,
  // recursively; a running one gets a new attempt that does not count.
  void RecallEarly(JobRun& job, uint32_t run, TimeUs now);
  // Inputs of `run` not done.
  uint32_t CountPending(const JobRun& job, uint32_t run) const;
  // Attempts that count against max_attempts.
  static uint32_t AttemptsUsed(const TaskRecord& rec) {
    return rec.attempt - rec.recalled - rec.retries;
  }
  // Attempts of run `run` that count: a gang member's are its gang's
  // (whichever member fails, the whole gang runs again).
  static uint32_t AttemptsUsed(const JobRun& job, uint32_t run) {
    const uint32_t group = job.graph->task(run % job.graph->size()).group;
    const uint32_t own = AttemptsUsed(job.runs[run]);
    return group == kNoGroup ? own : std::max(own, job.gang_retries[group]);
  }
  // Sets JobRun::waiting of every unfinished job (devices came or went).
  void UpdateWaiting();
  // Takes a run's outputs off its device's held bytes (read or freed).
  void ReleaseHeld(TaskRecord& rec);
  // True when a done run's output can still be read (or it has none).
  bool OutputAvailable(const TaskRecord& rec) const;
  // Lineage: makes a done run whose output was lost run again, first
  // reviving its inputs that are gone too; its consumers wait for it. With
  // `restart_readers`, consumers running now start over too (they may be
  // stuck reading the lost output). Returns how many runs it revived.
  size_t Revive(JobRun& job, uint32_t run, TimeUs now, bool restart_readers = true);
  // Open jobs: ends run `run` (not yet ended) as failed or cancelled with
  // `error`, and with it every run that depends on it or shares its gang.
  void EndOpenRun(JobRun& job, uint32_t run, TaskState state, std::string error, TimeUs now);
  // Open jobs: one read of `run`'s outputs fewer to wait for.
  void OpenOutputRead(JobRun& job, uint32_t run);
  // Open jobs: finishes a closing job whose runs have all ended.
  void MaybeFinishOpen(JobRun& job, TimeUs now);

  SchedulerOptions options_;
  std::unique_ptr<Policy> policy_;
  ResourcePool pool_;
  CostModel cost_;
  std::map<JobId, JobRun> jobs_;
  JobId next_job_ = 1;
  size_t active_jobs_ = 0;
  // Ready runs, by core kind and priority, with those set aside (wait
  // classes, sleeping, parked).
  ReadyQueue ready_;
  std::vector<uint64_t> woken_;                                         // Wake() scratch
  std::vector<std::tuple<uint32_t, CoreId, double, StoreUse>> placed_;  // PlaceItem scratch
  OutputSizer outputs_;     // what runs will store (count_store)
  LaneOrder lanes_;         // which placed runs their lanes run now
  uint64_t lane_seq_ = 0;   // last TaskRecord::lane_seq given out
  DeathLedger deaths_;      // what workers say their lanes run; who a death is charged to
  uint64_t held_runs_ = 0;  // see held_runs()
  std::vector<RunEnded> ended_;
  std::vector<RunEnded> aborted_;
  std::vector<OutputFreed> freed_;
};

}  // namespace hmpmd
