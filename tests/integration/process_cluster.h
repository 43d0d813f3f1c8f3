// ProcessCluster: a controller (`hmpmd controller`) and workers
// (`hmpmd-worker`) as real processes on loopback, for fault-injection tests
// that kill them with SIGKILL. Every process it starts it stops, by pid.
// Thread-safety: one test thread.
#pragma once

#include <sys/types.h>

#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "hmpmd/http/http_types.h"
#include "hmpmd/protocol/data_token.h"
#include "hmpmd/protocol/status.h"

namespace hmpmd::testing {

class ProcessCluster {
 public:
  // `dir` holds the database and the exec log; it must exist.
  explicit ProcessCluster(std::string dir);
  ~ProcessCluster();

  // Starts (or restarts, with the same ports and --db) the controller and
  // waits until its REST API answers.
  // Processes log to DIR/controller.log and DIR/worker.log at this level.
  void set_log_level(std::string level) { log_level_ = std::move(level); }
  // --recovery-grace-ms of the controllers it starts. Default: 600.
  void set_recovery_grace_ms(int ms) { recovery_grace_ms_ = ms; }
  // `wait`: until its REST API answers (a --standby one answers only once
  // it has taken over).
  Status StartController(const std::vector<std::string>& extra = {}, bool wait = true);
  // True while the controller has not exited.
  bool ControllerRunning();
  // The store its controllers open (default DIR/hmpmd.db): another
  // cluster's, for a standby of that cluster's controller.
  void set_db(std::string db) { db_ = std::move(db); }
  // What workers get as --controller (default this cluster's endpoint).
  void set_worker_controller(std::string endpoints) { worker_controller_ = std::move(endpoints); }
  void KillController();  // SIGKILL, then reaps it
  void StopController();  // SIGTERM (a clean exit), then reaps it
  // Starts a worker (`hmpmd-worker`, or the binary set_worker_bin() names)
  // with these flags beside the cluster's own.
  Status StartWorker(const std::vector<std::string>& extra = {},
                     const std::string& cores = "cube=1,vector=1");
  // The worker program later StartWorker() calls run; it must take
  // --controller, --cores, --exec-log and --log-level. Default: hmpmd-worker.
  void set_worker_bin(std::string bin) { worker_bin_ = std::move(bin); }
  // True while worker `i` has not exited.
  bool WorkerRunning(size_t i);
  void KillWorker(size_t i);  // SIGKILL, then reaps it
  pid_t worker_pid(size_t i) const { return workers_[i]; }
  pid_t controller_pid() const { return controller_; }

  // The token Get() (and so WaitJob, WaitWorkers, JobDataToken) sends, for
  // a controller whose reads need it. Default: none.
  void set_rest_token(std::string token) { rest_token_ = std::move(token); }
  // A REST call with exactly these headers; the raw response.
  Result<struct HttpResponse> Call(const std::string& method, const std::string& path,
                                   const std::string& body,
                                   const std::map<std::string, std::string>& headers = {});
  // REST calls; the body parsed as JSON (null on failure).
  nlohmann::json Get(const std::string& path);
  Result<uint32_t> Submit(const std::string& spec_json);
  // The data token REST gives with job `id`'s outputs (the fixture's
  // controllers have no REST token); empty, and the test failed, when none.
  DataToken JobDataToken(uint32_t id);
  // Polls the job until it ends or `timeout_ms` passes; returns its summary.
  nlohmann::json WaitJob(uint32_t id, int timeout_ms);
  // Polls the pool until at least `n` devices are alive (workers started
  // with StartWorker() register asynchronously); false on timeout.
  bool WaitWorkers(size_t n, int timeout_ms);

  // The exec log's lines as (job, task, attempt, pid).
  struct Exec {
    uint32_t job, task, attempt;
    pid_t pid;
  };
  std::vector<Exec> ReadExecLog() const;
  const std::string& db() const { return db_; }
  std::string zmq_endpoint() const { return "tcp://127.0.0.1:" + std::to_string(zmq_port_); }
  std::string http_url() const { return "http://127.0.0.1:" + std::to_string(http_port_); }

 private:
  static pid_t Spawn(const std::vector<std::string>& argv, const std::string& log);
  static void KillAndReap(pid_t pid, int sig);

  std::string dir_, db_, exec_log_;
  std::string log_level_ = "warn";
  std::string rest_token_;
  std::string worker_bin_ = HMPMD_WORKER_BIN;
  int recovery_grace_ms_ = 600;
  int zmq_port_ = 0, http_port_ = 0;
  pid_t controller_ = -1;
  std::vector<pid_t> workers_;
  std::string worker_controller_;
};

}  // namespace hmpmd::testing
