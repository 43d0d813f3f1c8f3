// ServeLoop: the I/O thread of a Worker. It owns the connection to the
// controller and the core lanes, and runs the protocol:
//   1. Register (RegisterMsg) and wait for RegisterAck; with no answer,
//      retry on a fresh connection after a back-off that doubles from
//      reconnect_backoff_min_ms to reconnect_backoff_max_ms. Reject with
//      reregister=false ends Run(); with reregister=true it registers again.
//   2. Registered: send a Heartbeat every heartbeat_ms. Nothing at all from
//      the controller for controller_timeout_ms means it is gone: go to 1.
//   3. AssignBatch: bind each task to its kernel and push it to the lane
//      its (core, lane) names; a bad lane or kernel fails the task at once.
//      CancelJob drops queued tasks of the job. Shutdown ends Run().
//   4. Each wake-up (a message, a lane's result, a timer or Stop) ends by
//      sending every result available as one DoneBatch.
// Malformed frames are counted (Heartbeat.dropped_frames) and dropped.
// The loop blocks only in zmq_poll, whose timeout is the next timer.
//
// Thread-safety: not thread-safe; Run() runs on the thread that called
// Worker::Run(), which owns every field. Lanes reach it only through the
// CompletionQueue and the WakeupFd.
#pragma once

#include <spdlog/logger.h>

#include <array>
#include <atomic>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "backoff.h"
#include "completion_queue.h"
#include "controller_link.h"
#include "data_plane.h"
#include "driver_notifier.h"
#include "hmpmd/protocol/messages.h"
#include "hmpmd/protocol/stall_clock.h"
#include "hmpmd/worker/kernel_args.h"
#include "hmpmd/worker/worker_options.h"
#include "lane.h"
#include "wakeup_fd.h"

namespace hmpmd::worker {

using KernelMap = std::map<std::string, Kernel, std::less<>>;

class ServeLoop {
 public:
  // Every pointer must outlive the loop. `options` must be valid (see
  // Worker::Run) and `options.name` filled in.
  ServeLoop(const WorkerOptions& options, const KernelMap* kernels, WakeupFd* wake,
            const std::atomic<bool>* stop, spdlog::logger* log);
  ~ServeLoop();
  ServeLoop(const ServeLoop&) = delete;
  ServeLoop& operator=(const ServeLoop&) = delete;

  // Serves until Shutdown, *stop or a fatal error, then stops the lanes.
  Status Run();

 private:
  enum class Phase { kRegistering, kRegistered };

  Status StartLanes();
  Status Serve();
  void StopLanes();
  Status OnTimers(int64_t now);
  // False once options_.parent_pid is set and no longer our parent.
  bool ParentAlive(int64_t now);
  // Given no token, after the controller refused the one read from the
  // default file (or none): true when the file now holds another token,
  // which the next registration presents.
  bool TokenFileChanged();
  int PollTimeoutMs(int64_t now) const;
  // After each poll: a stall of this process (longer away than the poll's
  // timeout) moves last_rx_us_ forward by it (StallClock).
  void CreditStall(int64_t now, int timeout_ms);
  Status ReadMessages();
  Status Handle(Message& message, int64_t now);
  void OnRegisterAck(const RegisterAck& ack, int64_t now);
  // Registered with a controller of another epoch (another store, or none):
  // what this worker holds belongs to jobs it does not know, whatever their
  // ids. Drops queued tasks, raises the cancel flag of running ones (whose
  // lanes then drop their results), frees every output and actor state and
  // forgets results not yet sent.
  void DropEverything();
  void Dispatch(AssignBatch& batch);
  void FailNow(const TaskAssign& task, std::string error);
  void DropJob(JobId job);
  void SendHeartbeat(int64_t now);
  // Fills `*out` with the run each busy lane has started and not finished
  // (Heartbeat::started), those of this controller's jobs only (held_).
  void TakeStarted(std::vector<HeldTask>* out) const;
  void TakeResults();
  Status FlushResults();

  const WorkerOptions& options_;
  const KernelMap* const kernels_;
  WakeupFd* const wake_;
  const std::atomic<bool>* const stop_;
  spdlog::logger* const log_;

  ControllerLink link_;
  CompletionQueue completions_;
  DataPlane data_;
  DriverNotifier notifier_;  // uses data_'s context and tokens
  // Declared after completions_ and data_, so lanes are gone before them.
  std::array<std::vector<std::unique_ptr<Lane>>, kNumCoreKinds> lanes_;

  RegisterMsg register_;    // sent on every attempt, with a fresh sent_us
  std::string token_hint_;  // DefaultTokenHint when it was given no token
  Phase phase_ = Phase::kRegistering;
  Backoff backoff_;
  bool reconnect_ = false;  // the last attempt got no answer: use a fresh socket
  int64_t next_register_us_ = 0;
  // When the registration now unanswered began (0: registered), and
  // whether the worker has said so: a controller that needs CURVE keys
  // drops a plain worker's messages without a word.
  int64_t unanswered_since_us_ = 0;
  bool told_unanswered_ = false;

  WorkerId worker_id_ = 0;
  int64_t heartbeat_us_ = 0;
  int64_t timeout_us_ = 0;
  int64_t next_heartbeat_us_ = 0;
  int64_t last_rx_us_ = 0;
  StallClock stalls_;
  int64_t next_parent_check_us_ = 0;  // options_.parent_pid > 0 only

  uint32_t in_flight_ = 0;  // pushed to lanes, result not yet taken
  // What a re-registration reports (RegisterMsg::held): tasks pushed to
  // lanes, keyed by (job, task), and the last kMaxRecent finished ones,
  // whose results are sent again after the RegisterAck; and the outputs in
  // the object store (RegisterMsg::outputs).
  std::map<std::pair<JobId, uint32_t>, HeldTask> held_;
  std::deque<std::pair<HeldTask, TaskResult>> recent_;
  // Tasks of driver sessions whose driver hears of them done from here
  // (TaskAssign::notify): (job, task) -> (attempt, the driver's socket).
  std::map<std::pair<JobId, uint32_t>, std::pair<uint32_t, std::string>> notify_;
  // TakeResults' notices, one per (driver socket, job); reused.
  std::map<std::pair<std::string, JobId>, RunDoneNotice> notices_;
  bool registered_once_ = false;
  uint64_t epoch_ = 0;  // RegisterAck::epoch of the controller we registered with
  int exec_log_fd_ = -1;
  uint64_t dropped_frames_ = 0;
  bool shutdown_ = false;
  DoneBatch done_;  // results waiting to go out; its vectors are reused
};

}  // namespace hmpmd::worker
