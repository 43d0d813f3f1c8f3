// DeviceShare: the hmpmd policy's elastic device sets (the driver API's
// "actors": a sub-model whose tasks stay on its devices keeps its state,
// e.g. weights, in those workers between tasks).
//
// 0. Which sub-models get a set: those that keep state between tasks, i.e.
//    the model-level kinds `actor`, `reward` and `learner`, and every actor
//    of a driver session (an open job). Encoders, pipeline stages, experts
//    and generic sub-models keep floating over the pool (their `devices` is
//    a hint for the spmd-1f1b baseline): the sub-model level is balanced
//    moment by moment, which beats any device set (see README, Simulation).
//    With DeviceShareOptions::elastic_dag_sets false (hmpmd), the elastic
//    ones of a known DAG that declare state_bytes float too, placed by
//    where their state is (state_affinity.h).
// 1. At admission every such sub-model with `devices` = N > 0 gets a set
//    of N devices (at least its members of its largest collective group;
//    the whole group when it spans sub-models, whose sets may overlap, so
//    each member finds a device of its set no other took), chosen to span
//    as few nodes as possible and, across jobs, the devices fewest other
//    sets hold. Sets of one job are disjoint while the pool has room; a
//    sub-model that asks for the whole pool spans it (expert-parallel
//    layout: the experts' sets then lie inside it). Its tasks run only on
//    its set; sub-models with devices = 0 run anywhere.
// 2. Rebalancing (elastic sub-models only): when a task of sub-model W finds
//    no free core in its set, a device moves to W from sub-model L of the
//    same job when L has no ready work and no task of L runs on one of its
//    devices, and W's backlog (estimated ready and
//    blocked work not yet placed) per device after the move is still above
//    L's. Hysteresis: a moved device stays min_dwell_us; a set that gave a
//    device receives none for min_dwell_us and one that received gives none
//    for as long; a set keeps its largest gang (at least 1 device) while it
//    has work running or ready (2d).
// 2b. Lending along the critical path (device_share_lend.cc): a set L
//    whose ready work is ahead of the critical path lends a device to a
//    set W whose ready work is on it even while L has ready work, when the
//    least static slack among L's ready runs exceeds the least among W's
//    by more than the two state loads the loan costs (W's now, L's when it
//    comes back). Static slack: the job's estimated critical path minus a
//    run's upward rank and its earliest start with unlimited devices. When
//    no device of L is free, L's next device to free goes to W. A device
//    comes back the same ways (W idles, or L's work becomes the more
//    critical); a set that takes devices takes those it lent first.
// 2c. Growth limit: no device moves into W (by 2 or 2b) once W's ready
//    work per device, counting each ready run's compute chain inside W,
//    is no longer above what a new device costs: W's state load plus the
//    communication it would leave exposed (its mean communication time;
//    a device's last communication has no compute of W behind it), i.e.
//    W grows while devices x (load + exposed comm) < ready chain work.
// 2d. Idle gangs lend too: a set with work ahead keeps its largest gang
//    (rule 1's floor) only while some run of it is ready or running; with
//    nothing of it ready or running, all but one of its devices may go as
//    in 2 (e.g. a learner's devices, while the first rollouts generate, run
//    rollouts instead of idling). Below its floor, a set with ready work
//    takes back the devices it gave (each at its borrower's next free
//    moment, whatever the borrower's work), else a free device of a set
//    above its own floor, then grows by 2 and 2b; 2c does not apply there
//    (a gang with no compute behind it would wait forever).
// 3. Pool changes: a joining device fills the set furthest below its ask;
//    a dead device leaves its sets, and a set left empty while it has work
//    takes a free device (or shares one with another set).
// 4. Core kinds (mixed pools): rule 1 takes first the devices whose cores
//    cover the kinds the set's tasks run on, the kind of its largest gang
//    before the others. A set that still holds no device with a core of a
//    task's kind, or fewer than a gang's members while it holds more
//    devices than that, grows by pool devices that have one (elastic or
//    pinned; none of its own devices leaves), else the task waits only
//    while the pool has no usable such device. A communication task
//    headed for a vector core takes its own kind's core in such a set
//    instead. On a pool of alike devices none of this changes anything.
// 5. Store caps (mixed pools, PoolOptions::count_store): a task whose
//    outputs are larger than a device's store cap (memory_mb) never runs
//    there while a device with a larger store exists. Rule 1 takes first
//    the devices whose store holds the largest output the set's tasks are
//    known at admission to store (weighing more than any core kind). A
//    task whose known outputs fit no store of its set, while an alive
//    device's would, grows an elastic set by such a device (none of its
//    own leaves); in a pinned set it is infeasible: the job fails naming
//    the store caps. Where no device's store holds them, it is placed as
//    before (its worker fails it naming the cap). Pools without store caps,
//    or that do not count stores, are unaffected.
// Every change after admission is recorded as a DeviceMove.
// Cost: O(1) per placement and O(log n) per task event of a set (its ready
// slacks are a sorted multiset; sub-models without a set track none): each
// set keeps a list of its cores that may have capacity, fed by releases
// (OnReleased), so placement never scans the pool or the set; rebalancing
// scans the donors' devices once per core kind and set until a core is
// released or time moves on (the engine asks once per blocked set and pass,
// HmpmdPolicy::WaitClass). The DAG is analysed once at admission, O(tasks).
// Thread-safety: not thread-safe; owned by the policy (scheduler thread).
#pragma once

#include <array>
#include <cstdint>
#include <limits>
#include <set>
#include <unordered_map>
#include <vector>

#include "hmpmd/scheduler/policy.h"

namespace hmpmd {

inline constexpr int32_t kNoSubmodel = -1;

// A device changed hands: `from` and `to` are sub-model indices of `job`
// (kNoSubmodel: the device joined, died or was free).
struct DeviceMove {
  TimeUs at = 0;
  JobId job = 0;
  DeviceId device = 0;
  int32_t from = kNoSubmodel;
  int32_t to = kNoSubmodel;
};

struct DeviceShareOptions {
  // How long a moved device stays, and a set that gave (received) a device
  // waits before it receives (gives) one. Default: 2000 us.
  TimeUs min_dwell_us = 2000;
  // Cores of the pool's available list Place() looks at for a member of the
  // set before it scans the set's devices instead. Default: 64.
  uint32_t scan_limit = 64;
  // Moves kept for reports (the count goes on). Default: 100000.
  size_t max_recorded_moves = 100000;
  // Whether elastic sets move devices between them (rules 2, 2b, 2d).
  // false: each set keeps the devices rule 1 laid out (pool changes aside,
  // rules 3-5), as the fifo baseline wants. Default: true.
  bool rebalance = true;
  // Whether the sub-models StateAffinity::Floats names (elastic, stateful,
  // with state_bytes, of a job whose DAG is known) get a set. false: they
  // float, placed by where their state is (hmpmd, state_affinity.h).
  // Default: true.
  bool elastic_dag_sets = true;
};

// Sets laid out once, never rebalanced: the baselines fifo and spmd-1f1b.
inline DeviceShareOptions FixedSetOptions() {
  DeviceShareOptions options;
  options.rebalance = false;
  return options;
}

class DeviceShare {
 public:
  explicit DeviceShare(DeviceShareOptions options = {}) : options_(options) {}

  // --- jobs ---
  void AddJob(const JobRun& job, const ResourcePool& pool);
  // The job gained sub-models or tasks (driver sessions): new sub-models
  // with devices get a set, new tasks count in the backlog.
  void GrowJob(const JobRun& job, const ResourcePool& pool);
  void RemoveJob(JobId job);

  // --- task events ---
  void OnReady(const TaskView& task);
  void OnPlaced(const TaskView& task, CoreId core);

  // --- pool events ---
  // Run `run` of `job` (kNoRun: a gang member taken back) left `core`: the
  // sets holding its device may use it again.
  void OnReleased(JobId job, uint32_t run, CoreId core, const ResourcePool& pool);
  void OnDeviceAdded(DeviceId device, const ResourcePool& pool);
  void OnDeviceRemoved(DeviceId device, const ResourcePool& pool);

  // --- placement ---
  // True when `task`'s sub-model runs on a device set.
  bool Constrained(const TaskView& task) const;
  // True when `task` may run on `device` (always, when unconstrained).
  bool Allows(const TaskView& task, DeviceId device) const;
  // Places a constrained task on its set: the device of its largest input
  // when a core of `kind` there is idle, else the set's earliest-draining
  // core of `kind`; when the set is full, moves a device in (rebalancing)
  // and places it there, or asks to retry later.
  Placement Place(const TaskView& task, CoreKind kind, const ResourcePool& pool, TimeUs now);
  // Policy::WaitClass of a task Place() takes (its spec's core kind, or a
  // vector core when `to_vector`): Place answers alike for every such task
  // at one moment (a core of the kind with capacity on a usable device of
  // the set, or a device moved in, which depends on the set and kind only).
  // 0 for gang members and tasks without a set.
  uint64_t WaitClass(const TaskView& task, bool to_vector) const;
  // That class's key for any task (set or not): its job and sub-model, core
  // kind, kernel and whether it reads stored inputs. For policies that
  // place a sub-model's tasks alike another way (state_affinity.h).
  static uint64_t SubmodelWaitClass(const TaskView& task, bool to_vector);

  // --- queries ---
  // The devices of `submodel` of `job` now (empty: unknown or unconstrained).
  const std::vector<DeviceId>& DeviceSet(JobId job, uint32_t submodel) const;
  const std::vector<DeviceMove>& moves() const { return moves_; }
  uint64_t move_count() const { return move_count_; }
  // Moves of one job so far (kept after it ends).
  uint64_t MoveCount(JobId job) const;
  // Sets of `job` short of their ask: the devices the pool granted them
  // (at admission, or joining a pool still filling up; moves between sets
  // do not count) are fewer than asked, or shared with another set of the
  // job. A set spanning the pool overlaps by design and is not listed.
  std::vector<SetShortfall> Shortfalls(JobId job) const;
  // Rule 0: whether `sm` keeps state between its tasks (and gets a set);
  // the simulator charges loading that state (SubmodelSpec::state_bytes).
  static bool KeepsState(const SubmodelSpec& sm, bool open_job);

 private:
  static constexpr TimeUs kNever = std::numeric_limits<TimeUs>::min() / 2;
  struct Set {
    uint32_t want = 0;   // devices asked for; 0: unconstrained
    uint32_t floor = 1;  // fewest devices while it has work
    // Rule 4: the core kinds its tasks run on (a bit per kind), the kind of
    // the gang that sets its floor, and its devices with a core of each kind.
    uint32_t needs = 0;
    CoreKind floor_kind = CoreKind::kCube;
    std::array<uint32_t, kNumCoreKinds> with_kind{};
    // Rule 5: the largest output its tasks are known to store (at
    // admission, count_store only; 0: none known), and the largest store
    // cap among its devices (ResourcePool::StoreCap; 0: no device).
    uint64_t out_bytes = 0;
    uint64_t max_store = 0;
    // Rule 6 (device_share_layout.cc): its tasks' kernels, interned, each once.
    std::vector<uint32_t> kernels;
    bool elastic = true;
    bool spans = false;    // asked for the whole pool: overlaps the others
    uint32_t granted = 0;  // devices the pool gave it (admission, joins)
    uint32_t shared = 0;   // of those at admission, held by another set too
    std::vector<DeviceId> devices;
    std::vector<uint32_t> slot;  // per device: index in devices + 1; 0: not in it
    // Per core kind: cores of its devices that may have capacity (every
    // one that has is here; stale entries are dropped when looked at).
    std::array<std::vector<CoreId>, kNumCoreKinds> free;
    std::vector<uint32_t> running;  // per device: its runs there now
    uint64_t running_total = 0;     // its runs running now
    double total_us = 0;            // estimated work of all its runs
    double placed_us = 0;
    double ready_us = 0;
    int64_t ready = 0;  // runs ready now
    TimeUs received_at = kNever, gave_at = kNever;
    // Per core kind: when Place() last found its cores of the kind full
    // (now, pool changes), and whether a rebalance then failed: neither is
    // tried again until either changes.
    struct Full {
      TimeUs at = -1;
      uint64_t changes = 0;
      bool tried = false;
    };
    std::array<Full, kNumCoreKinds> full{};
    double Backlog() const { return total_us > placed_us ? total_us - placed_us : 0; }
    // 2b/2c: static slack of its ready runs, their chains' compute inside
    // the set, the estimated state load on a new device, its
    // communication's estimated time, and a set waiting for its next free
    // device (a loan).
    std::multiset<double> ready_slack;
    double ready_chain_us = 0;
    double load_us = 0;
    double comm_us = 0;
    uint32_t comm_n = 0;
    int32_t lend_to = kNoSubmodel;
  };
  struct JobShare {
    const JobRun* run = nullptr;
    std::vector<Set> sets;         // per sub-model
    std::vector<TimeUs> moved_at;  // per device
    uint32_t tasks_counted = 0;    // tasks of a step counted in totals
    // Per task of a step (closed jobs): static earliest start and compute
    // chain inside its own sub-model; the estimated critical path.
    std::vector<double> start_us, chain_us;
    double cp_us = 0;
    std::vector<int32_t> lent_by;  // per device: the set that lent it, or kNoSubmodel
    std::vector<int32_t> lent_to;  // per device on loan: the set it moved into
  };

  // Lays out sets [first, end) of `js` on the alive devices.
  void Layout(JobShare& js, size_t first, const ResourcePool& pool);
  void CountTasks(JobShare& js);
  void Insert(JobId job, JobShare& js, uint32_t sm, DeviceId d, const ResourcePool& pool);
  void Erase(JobId job, JobShare& js, uint32_t sm, DeviceId d, const ResourcePool& pool);
  // Rule 4: grows set `sm` by pool devices with a core of `kind` that can
  // run `task` until it holds `need` of them or has none short only for
  // want of devices (Short); returns whether it grew.
  bool GrowForKind(const TaskView& task, JobShare& js, uint32_t sm, CoreKind kind, uint32_t need,
                   const ResourcePool& pool);
  // Rule 5: grows set `sm` by a pool device with a core of `kind` that
  // runs `task` and whose store holds `bytes`; returns whether it grew.
  bool GrowForStore(const TaskView& task, JobShare& js, uint32_t sm, CoreKind kind, uint64_t bytes,
                    const ResourcePool& pool);
  // Recomputes set.max_store from its devices.
  static void RecountStore(Set& set, const ResourcePool& pool);
  // Whether `set` lacks devices with a core of `kind` for `need` members
  // that it holds devices of other kinds in place of.
  static bool Short(const Set& set, CoreKind kind, uint32_t need) {
    const uint32_t n = set.with_kind[static_cast<size_t>(kind)];
    return n < need && n < set.devices.size();
  }
  void Record(JobId job, DeviceId d, int32_t from, int32_t to);
  // A device that no set of `js` holds, or the one fewest of its sets hold.
  DeviceId SpareDevice(const JobShare& js, const ResourcePool& pool) const;
  // A core of `kind` with capacity on a device of the set that runs the
  // task, from the set's free list.
  Placement Earliest(Set& set, const TaskView& task, CoreKind kind, const ResourcePool& pool) const;
  // Refills a set's free list of `kind` from its devices.
  void RebuildFree(Set& set, CoreKind kind, const ResourcePool& pool) const;
  // Moves an idle device of another sub-model into `sm`; returns it or
  // UINT32_MAX.
  DeviceId Rebalance(JobId job, JobShare& js, uint32_t sm, CoreKind kind, const ResourcePool& pool,
                     TimeUs now);
  const Set* Find(JobId job, uint32_t sm) const;
  // --- 2b/2c (device_share_lend.cc) ---
  // Fills start_us, chain_us and cp_us of a closed job.
  void Analyse(JobShare& js) const;
  double Slack(const JobShare& js, uint32_t index) const;
  double Chain(const JobShare& js, uint32_t index) const;
  // 2c: whether one more device still pays for `w`.
  static bool Grows(const Set& w);
  // 2b: whether `l` lends to `w` now.
  static bool Lends(const Set& l, const Set& w);
  // Moves `d` from set `from` to `to` and records it.
  void Move(JobId job, JobShare& js, uint32_t from, uint32_t to, DeviceId d,
            const ResourcePool& pool, TimeUs now);
  // Whether `d` is on loan from set `lender` in `borrower` (the set it moved
  // into; another set holding it too does not count).
  static bool LentTo(const JobShare& js, DeviceId d, uint32_t lender, const Set& borrower);
  // A device of `l` that may move to set `to` now (none of l's runs on it,
  // not moved within the dwell unless `urgent`; those `to` lent first), or
  // UINT32_MAX.
  DeviceId Movable(const JobShare& js, const Set& l, uint32_t to, CoreKind kind,
                   const ResourcePool& pool, TimeUs now, bool urgent = false) const;
  // 2d: a device `sm` lent (on loan in another set, free of its runs), or
  // else a free one of a set above its floor, moves to `sm`; returns it or
  // UINT32_MAX. `urgent`: a gang of `sm` is ready (dwell or not).
  DeviceId Recall(JobId job, JobShare& js, uint32_t sm, CoreKind kind, const ResourcePool& pool,
                  TimeUs now, bool urgent = false);
  // A run of set `l` left device `d`: honours a loan `l` owes.
  void MaybeLend(JobId job, JobShare& js, uint32_t l, DeviceId d, const ResourcePool& pool);

  DeviceShareOptions options_;
  std::unordered_map<JobId, JobShare> jobs_;
  std::vector<uint32_t> claims_;  // per device: sets (of all jobs) holding it
  uint64_t wanting_ = 0;          // sub-models (of all jobs) with a set
  // Per device: the (job, sub-model) sets holding it.
  std::vector<std::vector<std::pair<JobId, uint32_t>>> holders_;
  std::vector<DeviceMove> moves_;
  uint64_t move_count_ = 0;
  std::unordered_map<JobId, uint64_t> moves_by_job_;
  TimeUs last_now_ = 0;                 // latest time seen (pool events carry none)
  const ResourcePool* pool_ = nullptr;  // the scheduler's, seen at AddJob
};

}  // namespace hmpmd
