// WorkerOptions: every knob of a Worker, in one place.
//
// Thread-safety: a plain value; Worker copies it at construction.
#pragma once

#include <cstdint>
#include <map>
#include <string>

namespace hmpmd::worker {

/// How much the worker logs (to stderr).
enum class LogLevel { kTrace, kDebug, kInfo, kWarn, kError, kOff };

/// Configuration of a Worker. The `hmpmd-worker` flags map onto these
/// fields and do nothing else.
struct WorkerOptions {
  /// ZeroMQ endpoint of the controller, e.g. "tcp://10.0.0.5:5555"; or a
  /// primary and its standbys (`hmpmd controller --standby`) separated by
  /// commas, "tcp://10.0.0.5:5555,tcp://10.0.0.6:5555": the worker
  /// registers with whichever answers, and moves on when its connection
  /// closes. Default: none; Run() fails with InvalidArgument when it is
  /// empty.
  std::string controller_endpoint;

  /// Human-readable name the controller shows; unique among live workers.
  /// A worker that registers under the name of a live one with another
  /// process instance is taken for its restart: the old one is declared
  /// lost (its tasks run again, its outputs are rebuilt) and refused if
  /// it comes back. Default: empty, which means "HOSTNAME:PID" (with "/N"
  /// for the Nth Worker of one process).
  std::string name;

  /// Number of cube cores (matrix work). Each core gets its own lane, a
  /// thread that runs one task at a time. Default: 1. More lanes run more
  /// tasks at once but only help while the host has CPU cores to spare.
  uint32_t cube_cores = 1;

  /// Number of vector cores (element-wise work, communication). Default: 1.
  /// Same trade-off as `cube_cores`. At least one core in total is needed.
  uint32_t vector_cores = 1;

  /// Device memory the worker offers, in MiB: the cap of its object store
  /// (outputs kept for consumers; a task whose outputs do not fit fails),
  /// and what the controller places against. Default: 1024.
  uint64_t memory_mb = 1024;

  /// Labels the device advertises, key -> value (e.g. {"accel", "910c"}):
  /// a task or sub-model that requires labels runs only on devices that
  /// have all of them. Keys and values are 1 to 255 bytes of UTF-8 without
  /// control characters, a key has no '=', at most 64 labels; Run() fails
  /// with InvalidArgument otherwise. Default: none.
  std::map<std::string, std::string> labels;

  /// Interface the data socket binds (tcp://HOST:*), where peers fetch this
  /// worker's outputs and collectives exchange data. It must be reachable
  /// from the other workers. Default: empty, which means the address this
  /// host uses to reach the controller (127.0.0.1 for a local controller).
  std::string data_host;

  /// Shared secret sent in the registration. Default: empty, which reads the
  /// token file a local controller made (DefaultTokenPath), if there is one.
  std::string token;

  /// Level of the worker's log. Default: kInfo. kDebug logs every failed
  /// task; kTrace logs every frame, which costs throughput.
  LogLevel log_level = LogLevel::kInfo;

  /// Back-off between registration attempts while the controller does not
  /// answer: it starts at `reconnect_backoff_min_ms` and doubles up to
  /// `reconnect_backoff_max_ms`. Defaults: 100 and 5000. A smaller minimum
  /// reconnects faster after a controller restart; a larger maximum loads a
  /// controller that is down for long less.
  uint32_t reconnect_backoff_min_ms = 100;
  uint32_t reconnect_backoff_max_ms = 5000;

  /// How long the worker waits without any message from the controller
  /// before it decides the controller is gone and registers again (on a
  /// fresh connection). Default: 3000. It is raised to twice the heartbeat
  /// period the controller asks for, since HeartbeatAcks are what keep a
  /// quiet link alive. Smaller notices a dead controller sooner; too small
  /// re-registers on a merely slow one.
  uint32_t controller_timeout_ms = 3000;

  /// For tests and audits: a file to which every lane appends one line per
  /// kernel that ran to success ("JOB TASK ATTEMPT PID"), with O_APPEND so
  /// several workers may share it. Default: empty, no log.
  std::string exec_log;

  /// CurveZMQ keys (Z85, 40 characters; see `hmpmd keygen`): the
  /// controller's public key and this worker's key pair. All three set:
  /// the link to the controller is encrypted and authenticated. Default:
  /// empty, plain TCP. A controller started with --curve-keys accepts no
  /// plain worker, and lets in only workers whose public key it knows.
  std::string curve_server_key;
  std::string curve_public_key;
  std::string curve_secret_key;

  /// Most MiB of the inputs of tasks waiting in a lane's queue that the
  /// worker fetches from their producers ahead, while earlier tasks run.
  /// Fetches ahead also stay within `memory_mb` together with the stored
  /// outputs. Default: 256. 0: a task's inputs are fetched when it starts
  /// (still from all its producers at once).
  uint64_t prefetch_mb = 256;

  /// How long a step of a collective waits for a gang peer, and a fetch of
  /// an input for its producer's worker, before it fails as Unavailable.
  /// Default: 60000. A collective that times out is not the task's fault:
  /// the controller runs its whole gang again (counted as one of the gang's
  /// attempts). Smaller finds a stuck or unreachable peer sooner; too small
  /// fails collectives whose peers are merely busy with earlier work.
  /// Collective frames that arrive for a collective this worker never runs
  /// (its member went elsewhere) are dropped after 4x this long.
  uint32_t peer_timeout_ms = 60000;

  /// Stop (as Worker::Stop) once the process with this pid is no longer
  /// this process's parent: the worker leaves with the program that
  /// started it, even one killed by SIGKILL. Checked every 200 ms.
  /// Default: 0, never; Worker::Run() then takes it from the environment
  /// variable HMPMD_PARENT_PID, which `hmpmd run` sets for the workers it
  /// starts (so a program embedding the worker library gets it too).
  int64_t parent_pid = 0;
};

}  // namespace hmpmd::worker
