// Every message between the controller and its workers.
//
// Each struct lists its fields once, in Serialize(), which the codec uses to
// encode and decode it as a msgpack array; so a field added here is on the
// wire. Times are microseconds on the sender's monotonic clock.
#pragma once

#include <cstdint>
#include <string>
#include <variant>
#include <vector>

#include "hmpmd/protocol/data_token.h"
#include "hmpmd/protocol/labels.h"
#include "hmpmd/protocol/types.h"

namespace hmpmd {

// Wire version; a frame of another version is dropped and counted.
// 2: data plane and re-registration reports; 3: driver sessions, stored
// outputs on re-registration, lost inputs, TaskAssign.submodel; 4: inputs
// produced ahead on the lane (InputRef::kAhead), which a version-3 worker
// would take for a remote input; 5: fetch replies in frames of at most
// kFetchChunkBytes and the data ops kFetchPeek/kTakeRead, which a version-4
// peer would refuse or drop; 6: the store's epoch in RegisterMsg and
// RegisterAck (a version-5 worker would adopt a new controller's job ids
// for an old controller's outputs); 7: TaskResult.retryable (a collective
// that timed out restarts its gang; the decoder takes an exact field count);
// 8: RegisterMsg.instance (a worker restarted under the same name is told
// apart from the same process reconnecting); 9: Heartbeat.store_bytes and
// SessionAck.code (a refused driver learns why: a full store is
// kUnavailable, try again, not a bad request); 10: the data token in
// RegisterAck and SessionAck and in every data frame header (a version-9
// peer sends headers of the old size, which a worker drops); 11: the runs
// each lane has started and not finished (`started`) in Heartbeat,
// DoneBatch and RegisterMsg, which a worker's death is blamed on (a
// version-10 worker sends none, and its deaths would be blamed on guesses);
// 12: TaskAssign.task_id (a kernel's log lines name their task; the decoder
// takes an exact field count); 13: WireTask.max_retries and retry_on (a
// version-12 driver sends tasks with two fields fewer) and TaskResult.log;
// 14: RegisterMsg.labels (the decoder takes an exact field count); 15:
// WireSubmodel.required and WireTask.required (a driver's labels); 16:
// SessionOpen.resume, SessionAck.resumed_seq and SessionUpdate.stored_seq
// (a driver resumes its session after a controller restart or failover);
// 17: SessionSubmit.notify and TaskAssign.notify (a worker tells a driver
// of its session's runs done directly, kRunDone).
inline constexpr uint8_t kProtocolVersion = 18;

enum class MsgType : uint8_t {
  kRegister = 1,
  kRegisterAck = 2,
  kReject = 3,
  kHeartbeat = 4,
  kHeartbeatAck = 5,
  kAssignBatch = 6,
  kDoneBatch = 7,
  kCancelJob = 8,
  kShutdown = 9,
  kFreeJob = 10,
  // Driver sessions (hmpmd::client) and what they need of workers.
  kSessionOpen = 11,
  kSessionAck = 12,
  kSessionSubmit = 13,
  kSessionControl = 14,
  kSessionUpdate = 15,
  kFreeRuns = 16,
  kCancelRuns = 17,
};

struct CoreGroup {
  CoreKind kind = CoreKind::kCube;
  uint32_t count = 0;
  template <typename Ar>
  void Serialize(Ar& ar) {
    ar(kind, count);
  }
  friend bool operator==(const CoreGroup&, const CoreGroup&) = default;
};

// A task a re-registering worker still holds: queued or running on a lane,
// or finished with its result not yet known to be recorded.
struct HeldTask {
  JobId job = 0;
  uint32_t task = 0;
  uint32_t attempt = 0;
  CoreKind core = CoreKind::kCube;
  uint32_t lane = 0;
  template <typename Ar>
  void Serialize(Ar& ar) {
    ar(job, task, attempt, core, lane);
  }
  friend bool operator==(const HeldTask&, const HeldTask&) = default;
};

// An output a re-registering worker keeps in its object store: every
// output of task run `run` of `job`, `bytes` in all.
struct HeldOutput {
  JobId job = 0;
  uint32_t run = 0;
  uint64_t bytes = 0;
  uint32_t buffers = 0;  // how many; empty ones count (a tensor of shape (0,))
  template <typename Ar>
  void Serialize(Ar& ar) {
    ar(job, run, bytes, buffers);
  }
  friend bool operator==(const HeldOutput&, const HeldOutput&) = default;
};

// Worker -> controller, first message and after a controller restart.
// A sub-model state a re-registering worker keeps (ActorStates): a
// restarted controller takes it for a holder of that state again.
struct HeldState {
  JobId job = 0;
  std::string submodel;
  template <typename Ar>
  void Serialize(Ar& ar) {
    ar(job, submodel);
  }
  friend bool operator==(const HeldState&, const HeldState&) = default;
};

struct RegisterMsg {
  std::string name;   // human-readable, e.g. "host:pid"
  std::string token;  // shared secret; empty when the controller has none
  uint32_t pid = 0;
  std::vector<CoreGroup> cores;
  uint64_t memory_mb = 0;
  std::vector<std::string> kernels;
  std::string data_endpoint;  // where peers fetch this worker's outputs; may be empty
  int64_t sent_us = 0;
  // Tasks this worker holds (see HeldTask); empty on a first registration.
  // A restarted controller marks them running here instead of starting them
  // again, and the results the worker then re-sends complete them.
  std::vector<HeldTask> held;
  // Outputs in this worker's object store (see HeldOutput); a restarted
  // controller fetches consumers' inputs from here instead of rebuilding them.
  std::vector<HeldOutput> outputs;
  // RegisterAck::epoch of the controller this worker last registered with
  // (0: none). `held` and `outputs` are adopted only by a controller of the
  // same epoch; another one (a fresh store, or none) has other jobs under
  // the same ids.
  uint64_t epoch = 0;
  // Drawn at random once per worker process (per Worker object, for
  // embedded ones), never 0 from a real worker. A register under a known
  // name with another instance comes from a new process: the controller
  // declares the old one lost (its tasks run again, its outputs are rebuilt)
  // and refuses the old instance from then on. The same instance is the
  // same process reconnecting. 0: not given (only the name, pid and data
  // endpoint tell workers apart).
  uint64_t instance = 0;
  // Of `held`, the runs its lanes have started and not finished, one per
  // busy lane: a restarted controller that adopts them knows which one to
  // blame should this worker die (SchedulerOptions::max_worker_deaths).
  std::vector<HeldTask> started;
  // The device's labels (--label, the device file's "labels"), sorted by
  // key; a task that requires labels runs only where all of them are.
  Labels labels;
  // Sub-model states it keeps (see HeldState); adopted as `outputs` are.
  std::vector<HeldState> states;
  template <typename Ar>
  void Serialize(Ar& ar) {
    ar(name, token, pid, cores, memory_mb, kernels, data_endpoint, sent_us, held, outputs, epoch,
       instance, started, labels, states);
  }
  friend bool operator==(const RegisterMsg&, const RegisterMsg&) = default;
};

// Controller -> worker: registration accepted.
struct RegisterAck {
  WorkerId worker_id = 0;
  uint32_t heartbeat_ms = 0;  // how often the worker must send a heartbeat
  // Names the controller's job store (kept in it across restarts; random
  // per process without one). A worker whose last epoch differs drops what
  // it holds: its tasks and outputs belong to jobs this controller does not
  // know, whatever their ids.
  uint64_t epoch = 0;
  // What the worker's data socket accepts and its peer connections send
  // (data_token.h); kept in the job store with the epoch.
  DataToken data_token;
  template <typename Ar>
  void Serialize(Ar& ar) {
    ar(worker_id, heartbeat_ms, epoch, data_token);
  }
  friend bool operator==(const RegisterAck&, const RegisterAck&) = default;
};

// Controller -> worker: registration refused, or "unknown worker, register".
struct Reject {
  std::string reason;
  bool reregister = false;  // true: the controller forgot us; register again
  template <typename Ar>
  void Serialize(Ar& ar) {
    ar(reason, reregister);
  }
  friend bool operator==(const Reject&, const Reject&) = default;
};

struct Heartbeat {
  WorkerId worker_id = 0;
  uint32_t running = 0;         // tasks queued or running on its lanes
  uint64_t dropped_frames = 0;  // malformed frames it has dropped
  int64_t sent_us = 0;
  uint64_t store_bytes = 0;  // held in its object store now
  uint64_t state_bytes = 0;  // held in its sub-models' states (ActorStates) now
  // The run each busy lane has started and not finished (popped from its
  // queue, result not yet handed on), at `sent_us`; runs queued behind
  // them are not listed. Should the worker die, these are the runs that
  // died with it (SchedulerOptions::max_worker_deaths).
  std::vector<HeldTask> started;
  template <typename Ar>
  void Serialize(Ar& ar) {
    ar(worker_id, running, dropped_frames, sent_us, store_bytes, started, state_bytes);
  }
  friend bool operator==(const Heartbeat&, const Heartbeat&) = default;
};

struct HeartbeatAck {
  template <typename Ar>
  void Serialize(Ar& ar) {
    ar();  // an empty array: the body must still be one msgpack object
  }
  friend bool operator==(const HeartbeatAck&, const HeartbeatAck&) = default;
};

// Where one input of a task lives: every output of producer run `run` of
// the same job, held by the worker whose data socket is `endpoint`.
struct InputRef {
  // `bytes` of an input produced ahead on the same lane (early dispatch):
  // its producer was queued on this lane before this task and has not
  // finished yet; the lane reads what it left in the local store once it
  // ran and succeeded there, else it reports the input lost.
  static constexpr uint64_t kAhead = UINT64_MAX;
  uint32_t run = 0;
  std::string endpoint;
  uint64_t bytes = 0;  // total size of that run's outputs; kAhead: not known yet
  // How many buffers that run kept; 0: none, the edge only orders. Empty
  // buffers count: a producer of only 0-byte tensors still hands them on.
  uint32_t buffers = 0;
  // Whether there is anything to read (bytes alone cannot say: 0 bytes may
  // be empty tensors).
  bool kept() const { return bytes > 0 || buffers > 0; }
  template <typename Ar>
  void Serialize(Ar& ar) {
    ar(run, endpoint, bytes, buffers);
  }
  friend bool operator==(const InputRef&, const InputRef&) = default;
};

// The members of a collective, for one of them: its rank and every member's
// data endpoint in rank order. `tag` tells this gang's traffic apart.
struct GangInfo {
  uint32_t rank = 0;
  std::vector<std::string> endpoints;  // empty: not a collective
  uint64_t tag = 0;
  template <typename Ar>
  void Serialize(Ar& ar) {
    ar(rank, endpoints, tag);
  }
  friend bool operator==(const GangInfo&, const GangInfo&) = default;
};

// One task for one core lane of the worker.
struct TaskAssign {
  JobId job = 0;
  uint32_t task = 0;     // index of the task run inside its job
  uint32_t attempt = 0;  // results of older attempts are ignored
  std::string kernel;
  CoreKind core = CoreKind::kCube;
  uint32_t lane = 0;  // which core of that kind
  Args args;
  std::vector<InputRef> inputs;  // the producers' outputs, in input order
  // Reads of this run's outputs before the worker frees them; 0: a final
  // output, kept until the job is freed (FreeJob); kDropOutputs: nobody
  // reads them (a sink of an earlier step), so they are not kept.
  uint32_t reads = 0;
  static constexpr uint32_t kDropOutputs = UINT32_MAX;
  GangInfo gang;
  // The task's sub-model: with `job`, the key of the worker's actor state
  // (KernelArgs::state()).
  std::string submodel;
  // The task's id in its job spec (a driver's label), for logs.
  std::string task_id;
  // A driver session's data socket: done, the worker tells it there too
  // (DataOp::kRunDone). Empty: the controller alone is told.
  std::string notify;
  // The sub-model keeps state between tasks (a submitted job's stateful
  // sub-model): the worker says whether it holds it after the run
  // (TaskResult::state_held). With `state_from` (a holder's data socket),
  // a worker lacking the state loads it from there before the kernel runs.
  bool keeps_state = false;
  std::string state_from;
  template <typename Ar>
  void Serialize(Ar& ar) {
    ar(job, task, attempt, kernel, core, lane, args, inputs, reads, gang, submodel, task_id, notify,
       keeps_state, state_from);
  }
  friend bool operator==(const TaskAssign&, const TaskAssign&) = default;
};

struct AssignBatch {
  std::vector<TaskAssign> tasks;
  template <typename Ar>
  void Serialize(Ar& ar) {
    ar(tasks);
  }
  friend bool operator==(const AssignBatch&, const AssignBatch&) = default;
};

struct TaskResult {
  JobId job = 0;
  uint32_t task = 0;
  uint32_t attempt = 0;
  bool ok = true;
  int64_t start_us = 0;
  int64_t end_us = 0;
  std::string error;            // the kernel's message when !ok
  uint64_t output_bytes = 0;    // kept in the worker's object store
  uint32_t output_buffers = 0;  // how many buffers it kept (empty ones count)
  // With !ok: the producer runs whose outputs could not be read (freed, or
  // their worker unreachable). The controller rebuilds them (lineage) and
  // runs this task again instead of failing the job.
  std::vector<uint32_t> lost_inputs;
  // With lost_inputs: every one was answered "no such outputs" by the
  // worker that should hold it (freed early, or an attempt queued ahead on
  // this worker did not succeed), none went unanswered.
  bool inputs_gone = false;
  // With !ok: the failure is not the task's own (a collective timed out
  // waiting for a peer, or could not reach one). The controller runs the
  // task's gang again, while attempts last, instead of failing the job.
  bool retryable = false;
  // The run's log lines (worker TaskLog: bounded there, and again by the
  // controller), ok or not.
  std::vector<std::string> log;
  // With TaskAssign::keeps_state: the worker holds the sub-model's state
  // after the run. A load of it before the kernel (TaskAssign::state_from)
  // spans [state_load_start_us, state_load_end_us) inside the run, and
  // brought state_load_bytes; both 0 when there was none.
  bool state_held = false;
  int64_t state_load_start_us = 0;
  int64_t state_load_end_us = 0;
  uint64_t state_load_bytes = 0;
  template <typename Ar>
  void Serialize(Ar& ar) {
    ar(job, task, attempt, ok, start_us, end_us, error, output_bytes, output_buffers, lost_inputs,
       inputs_gone, retryable, log, state_held, state_load_start_us, state_load_end_us,
       state_load_bytes);
  }
  friend bool operator==(const TaskResult&, const TaskResult&) = default;
};

struct DoneBatch {
  WorkerId worker_id = 0;
  std::vector<TaskResult> results;
  int64_t sent_us = 0;
  // As Heartbeat::started, taken after `results`: a run whose result is in
  // this batch is not listed, and the run its lane started next is, once
  // popped. A run started after one batch goes out in the next message.
  std::vector<HeldTask> started;
  template <typename Ar>
  void Serialize(Ar& ar) {
    ar(worker_id, results, sent_us, started);
  }
  friend bool operator==(const DoneBatch&, const DoneBatch&) = default;
};

// Controller -> worker: drop queued tasks of this job; running ones finish.
struct CancelJob {
  JobId job = 0;
  template <typename Ar>
  void Serialize(Ar& ar) {
    ar(job);
  }
  friend bool operator==(const CancelJob&, const CancelJob&) = default;
};

// Controller -> worker: exit cleanly.
struct Shutdown {
  std::string reason;
  template <typename Ar>
  void Serialize(Ar& ar) {
    ar(reason);
  }
  friend bool operator==(const Shutdown&, const Shutdown&) = default;
};

// Controller -> worker: the job is forgotten; free every output it holds.
struct FreeJob {
  JobId job = 0;
  template <typename Ar>
  void Serialize(Ar& ar) {
    ar(job);
  }
  friend bool operator==(const FreeJob&, const FreeJob&) = default;
};

// --- Driver sessions ------------------------------------------------------
// A driver (hmpmd::client::Client) talks to the controller's ROUTER like a
// worker, on its own DEALER: it opens a session (an open job that grows),
// submits tasks to it, releases or cancels them and closes it; the
// controller answers with SessionAck once and SessionUpdate batches after.

// Driver -> controller: open a session job called `name`.
struct SessionOpen {
  std::string name;
  std::string token;  // as RegisterMsg::token
  uint32_t weight = 1;
  uint32_t heartbeat_ms = 0;  // the driver sends SessionControl this often
  int64_t sent_us = 0;
  // Not 0: take up this session job again on this connection (after the
  // controller restarted, a standby took over, or the link broke), proved
  // by the job's own data token. `acked_seq`: the last group whose GroupAck
  // the driver has; later ones are acknowledged again.
  JobId resume = 0;
  DataToken resume_token;
  uint64_t acked_seq = 0;
  template <typename Ar>
  void Serialize(Ar& ar) {
    ar(name, token, weight, heartbeat_ms, sent_us, resume, resume_token, acked_seq);
  }
  friend bool operator==(const SessionOpen&, const SessionOpen&) = default;
};

// Controller -> driver: the session's job, or why there is none.
struct SessionAck {
  JobId job = 0;         // 0 when refused
  std::string error;     // empty when opened
  uint8_t code = 0;      // why refused: a StatusCode (kOk when opened)
  DataToken data_token;  // its job's own (JobDataToken): its fetches and puts carry it
  // A resumed session: the last group the controller holds; the driver
  // sends the later ones again.
  uint64_t resumed_seq = 0;
  template <typename Ar>
  void Serialize(Ar& ar) {
    ar(job, error, code, data_token, resumed_seq);
  }
  friend bool operator==(const SessionAck&, const SessionAck&) = default;
};

// A sub-model added to a session (SubmodelSpec on the wire).
struct WireSubmodel {
  std::string name;
  uint8_t kind = 0;  // SubmodelKind
  uint32_t devices = 0;
  bool elastic = true;  // false: its device set is pinned
  Labels required;      // SubmodelSpec::required, as the driver gave them
  template <typename Ar>
  void Serialize(Ar& ar) {
    ar(name, kind, devices, elastic, required);
  }
  friend bool operator==(const WireSubmodel&, const WireSubmodel&) = default;
};

// A task appended to a session (TaskSpec on the wire). Inputs name earlier
// tasks of the session by id.
struct WireTask {
  std::string id;
  std::string submodel;
  std::string kernel;
  CoreKind core = CoreKind::kCube;
  std::vector<std::string> inputs;
  Args args;
  double flops = 0;
  double bytes = 0;
  std::string group;  // collective group; empty: none
  std::string op;     // collective op
  double group_bytes = 0;
  uint32_t max_retries = 0;  // TaskSpec::max_retries
  std::vector<std::string> retry_on;
  Labels required;  // TaskSpec::required, as the driver gave them
  template <typename Ar>
  void Serialize(Ar& ar) {
    ar(id, submodel, kernel, core, inputs, args, flops, bytes, group, op, group_bytes, max_retries,
       retry_on, required);
  }
  friend bool operator==(const WireTask&, const WireTask&) = default;
};

// One all-or-nothing append (a Submit or SubmitGraph call).
struct SubmitGroup {
  uint64_t seq = 0;  // the driver's number for it, echoed in GroupAck
  std::vector<WireSubmodel> submodels;
  std::vector<WireTask> tasks;
  template <typename Ar>
  void Serialize(Ar& ar) {
    ar(seq, submodels, tasks);
  }
  friend bool operator==(const SubmitGroup&, const SubmitGroup&) = default;
};

// Driver -> controller: appends, applied in order.
struct SessionSubmit {
  JobId job = 0;
  std::vector<SubmitGroup> groups;
  // The driver's data socket, where workers tell it of its runs done
  // (TaskAssign::notify); empty: through the controller only.
  std::string notify;
  template <typename Ar>
  void Serialize(Ar& ar) {
    ar(job, groups, notify);
  }
  friend bool operator==(const SessionSubmit&, const SessionSubmit&) = default;
};

// Driver -> controller: outputs it no longer needs, tasks to cancel, and
// whether to end the session. An empty one is a heartbeat.
struct SessionControl {
  JobId job = 0;
  std::vector<uint32_t> release;  // task indices
  std::vector<uint32_t> cancel;   // task indices
  uint8_t close = 0;              // kKeepOpen, kClose or kAbort
  static constexpr uint8_t kKeepOpen = 0;
  static constexpr uint8_t kClose = 1;  // end once every task has ended
  static constexpr uint8_t kAbort = 2;  // cancel what is left and end now
  int64_t sent_us = 0;
  template <typename Ar>
  void Serialize(Ar& ar) {
    ar(job, release, cancel, close, sent_us);
  }
  friend bool operator==(const SessionControl&, const SessionControl&) = default;
};

// The controller's answer to one SubmitGroup: its tasks are indices
// first_task.. in order, or it was refused with `error`.
struct GroupAck {
  uint64_t seq = 0;
  uint32_t first_task = 0;
  std::string error;  // empty: appended
  template <typename Ar>
  void Serialize(Ar& ar) {
    ar(seq, first_task, error);
  }
  friend bool operator==(const GroupAck&, const GroupAck&) = default;
};

// A session task that ended.
struct TaskEnded {
  uint32_t task = 0;
  uint8_t state = 0;  // kDone, kFailed or kCancelled
  static constexpr uint8_t kDone = 0;
  static constexpr uint8_t kFailed = 1;
  static constexpr uint8_t kCancelled = 2;
  std::string error;     // failed or cancelled: why
  std::string endpoint;  // done: the data endpoint of the worker holding its outputs
  uint64_t output_bytes = 0;
  uint32_t output_buffers = 0;  // 0: it kept nothing
  template <typename Ar>
  void Serialize(Ar& ar) {
    ar(task, state, error, endpoint, output_bytes, output_buffers);
  }
  friend bool operator==(const TaskEnded&, const TaskEnded&) = default;
};

// Controller -> driver: what happened since the last update.
struct SessionUpdate {
  JobId job = 0;
  std::vector<GroupAck> acks;
  std::vector<TaskEnded> ended;
  bool closed = false;    // the session job has ended
  std::string job_state;  // when closed: succeeded, failed or cancelled
  std::string job_error;  // when closed and not succeeded
  // Every group up to this seq is in the job store (0: none yet): the
  // driver forgets them; later ones it keeps, to send again on a resume.
  uint64_t stored_seq = 0;
  template <typename Ar>
  void Serialize(Ar& ar) {
    ar(job, acks, ended, closed, job_state, job_error, stored_seq);
  }
  friend bool operator==(const SessionUpdate&, const SessionUpdate&) = default;
};

// Controller -> worker: free the outputs of these runs of `job` (a driver
// released them).
struct FreeRuns {
  JobId job = 0;
  std::vector<uint32_t> runs;
  template <typename Ar>
  void Serialize(Ar& ar) {
    ar(job, runs);
  }
  friend bool operator==(const FreeRuns&, const FreeRuns&) = default;
};

// Controller -> worker: drop these runs of `job` if queued; a running one
// sees its cancel flag (KernelArgs::cancelled()).
struct CancelRuns {
  JobId job = 0;
  std::vector<uint32_t> runs;
  template <typename Ar>
  void Serialize(Ar& ar) {
    ar(job, runs);
  }
  friend bool operator==(const CancelRuns&, const CancelRuns&) = default;
};

// The alternatives are in MsgType order, so index() + 1 is the type byte.
using Message = std::variant<RegisterMsg, RegisterAck, Reject, Heartbeat, HeartbeatAck, AssignBatch,
                             DoneBatch, CancelJob, Shutdown, FreeJob, SessionOpen, SessionAck,
                             SessionSubmit, SessionControl, SessionUpdate, FreeRuns, CancelRuns>;

MsgType TypeOf(const Message& m);
std::string_view MsgTypeName(MsgType t);

}  // namespace hmpmd
