// `hmpmd run JOB.json`: an embedded controller plus N local worker
// processes run one job, print its summary, and exit.
#include <pthread.h>
#include <signal.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cmath>
#include <iostream>
#include <memory>

#include "cli_common.h"
#include "hmpmd/controller/job_report.h"
#include "hmpmd/launch/local_cluster.h"
#include "hmpmd/protocol/json_text.h"
#include "hmpmd/protocol/labels.h"

namespace hmpmd {
namespace {

// --timeout at most: about 115 days, far from overflowing milliseconds.
constexpr double kMaxTimeoutS = 1e7;
// How long local workers may take to register, at most.
constexpr int64_t kRegisterLimitMs = 30000;

struct RunArgs {
  std::string job_file;
  int workers = 4;
  std::string trace_file;
  bool json = false;
  std::string policy = "hmpmd";
  std::string cores = "cube=1,vector=1";
  std::string log_level = "warn";
  double timeout_s = 600;
  std::string worker_binary;  // empty: the hmpmd-worker beside hmpmd
  std::string memory_mb;      // empty: the workers' default
  uint64_t max_runs = kDefaultMaxRuns;
  std::vector<std::string> labels;        // KEY=VALUE, every worker's
  std::vector<std::string> device_files;  // one worker each
  bool cores_given = false;               // --cores on the command line
};

// As hmpmd-worker takes it: 0 (no cap) up to 1 PiB.
constexpr uint64_t kMaxMemoryMb = uint64_t{1} << 30;

int RunMain(const RunArgs& a) {
  if (Status st = SetLogLevel(a.log_level); !st.ok()) return Fail(st);
  if (!(a.timeout_s > 0 && a.timeout_s <= kMaxTimeoutS)) {
    return Fail(Status::InvalidArgument("--timeout: must be a number of seconds in (0, " +
                                        std::to_string(static_cast<int64_t>(kMaxTimeoutS)) + "]"));
  }
  // The workers' --cores, checked once here rather than by each worker.
  if (Result<CoreCounts> cores = ParseCoreCounts(a.cores); !cores.ok()) {
    return Fail(Status::InvalidArgument("--cores: " + cores.status().message()));
  }
  if (!a.trace_file.empty()) {
    if (Status w = CheckWritable("--trace", a.trace_file, {a.job_file}); !w.ok()) return Fail(w);
  }
  LocalClusterOptions opts;
  opts.service.controller.spec_limits.max_runs = a.max_runs;
  // One job: the bound on all jobs held is the bound on it.
  opts.service.controller.max_held_runs = a.max_runs;
  auto text = ReadFile(a.job_file, opts.service.controller.spec_limits.max_bytes);
  if (!text.ok()) return Fail(text.status());
  opts.service.controller.policy = a.policy;
  opts.workers = a.workers;
  opts.cores = a.cores;
  if (!a.device_files.empty()) {
    // The files describe the workers; --cores, given too, wins over them
    // (as on hmpmd-worker).
    opts.workers = static_cast<int>(a.device_files.size());
    if (!a.cores_given) opts.cores.clear();
    for (const std::string& file : a.device_files)
      opts.per_worker_args.push_back({"--device", file});
  }
  for (const std::string& flag : a.labels) {
    // Checked here: a worker refusing it would only exit "before registering".
    if (Result<Label> l = ParseLabelFlag(flag); !l.ok()) return Fail(l.status());
    opts.extra_worker_args.insert(opts.extra_worker_args.end(), {"--label", flag});
  }
  opts.log_level = a.log_level;
  if (!a.worker_binary.empty()) opts.worker_binary = a.worker_binary;
  if (!a.memory_mb.empty()) {
    // Checked here: a worker refusing it would only exit "before registering".
    Result<uint64_t> mb = ParseWhole("--memory-mb", a.memory_mb, 0, kMaxMemoryMb);
    if (!mb.ok()) return Fail(mb.status());
    opts.extra_worker_args.insert(opts.extra_worker_args.end(),
                                  {"--memory-mb", std::to_string(*mb)});
  }
  auto spec = ParseJobSpec(*text, opts.service.controller.spec_limits);
  if (!spec.ok()) return Fail(Status::InvalidArgument(a.job_file + ": " + spec.status().message()));
  auto graph = JobGraph::Build(std::move(spec).value());
  if (!graph.ok()) {
    return Fail(Status::InvalidArgument(a.job_file + ": " + graph.status().message()));
  }

  // SIGINT and SIGTERM are blocked in every thread (the controller's start
  // after this) and taken here while the job runs: the job is cancelled and
  // the workers stopped, not left behind by a killed process.
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);
  int caught = 0;
  opts.interrupted = [&]() -> std::string {
    const timespec now{};
    caught = sigtimedwait(&signals, nullptr, &now);
    if (caught <= 0) return "";
    return std::string("interrupted by ") + (caught == SIGINT ? "SIGINT" : "SIGTERM") +
           ": the job was cancelled";
  };
  // A signal's exit code is 128 + its number, as a shell reports it.
  auto fail = [&caught](const Status& st) {
    const int code = Fail(st);
    return st.code() == StatusCode::kCancelled && caught > 0 ? 128 + caught : code;
  };
  // --timeout bounds the whole run: the workers get at most 30 s of it to
  // register, the job what is left.
  using std::chrono::milliseconds;
  const milliseconds timeout(static_cast<int64_t>(std::ceil(a.timeout_s * 1000)));
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  LocalCluster cluster(opts);
  if (Status st = cluster.Start(std::min(timeout, milliseconds(kRegisterLimitMs))); !st.ok()) {
    return fail(st);
  }
  bool succeeded = false;
  std::string output;
  // The trace is rendered from a copy after the run, off the loop: a large
  // job's trace takes seconds, which on the loop would hold off heartbeats
  // long enough for workers to be declared dead.
  std::shared_ptr<const JobRun> traced_job;
  std::shared_ptr<const ResourcePool> traced_pool;
  std::shared_ptr<const StateLoadTimes> traced_loads;
  const auto left =
      std::chrono::duration_cast<milliseconds>(deadline - std::chrono::steady_clock::now());
  Status st = cluster.RunJob(std::move(graph).value(), std::max(left, milliseconds(1)),
                             [&](const JobRun& job, const Controller& c) {
                               const ResourcePool& pool = c.scheduler().pool();
                               ScheduleMetrics m = ComputeMetrics(job, pool);
                               succeeded = job.state == JobState::kSucceeded;
                               traced_loads = c.ClockOf(job.id).loads;
                               if (a.json) {
                                 auto j = JobSummaryJson(job, pool, false);
                                 j.update(MetricsJson(m, pool));
                                 if (traced_loads) j.update(StateLoadsJson(*traced_loads));
                                 output = JsonText(j, 2);
                               } else {
                                 output = TextSummary(job, m, pool, traced_loads.get());
                               }
                               if (!a.trace_file.empty()) {
                                 traced_job = std::make_shared<const JobRun>(job);
                                 traced_pool = std::make_shared<const ResourcePool>(pool);
                               }
                             });
  cluster.Stop();
  if (!st.ok()) {
    if (st.code() == StatusCode::kInvalidArgument) {
      st = Status::InvalidArgument(a.job_file + ": " + st.message());
    }
    return fail(st);
  }
  // The summary first: a trace that cannot be written must not hide it.
  std::cout << output << std::endl;
  if (traced_job) {
    const std::string trace = TraceText(*traced_job, *traced_pool, traced_loads.get());
    if (Status w = WriteFile(a.trace_file, trace); !w.ok()) return Fail(w);
  }
  return succeeded ? kExitOk : kExitFailed;
}

}  // namespace

void AddRunCommand(CLI::App& app, int* exit_code) {
  auto args = std::make_shared<RunArgs>();
  CLI::App* sub = app.add_subcommand(
      "run", "Run one job on an embedded controller with local workers, print its summary");
  sub->add_option("job", args->job_file, "Job spec (JSON)")->required();
  CLI::Option* workers =
      sub->add_option("--workers", args->workers, "Local worker processes to start")
          ->check(WholeRange(1, 256))
          ->capture_default_str();
  sub->add_option("--device", args->device_files,
                  "A device file (as hmpmd-worker --device takes) for one local worker; "
                  "repeat for more, in place of --workers")
      ->check(CLI::ExistingFile)
      ->excludes(workers);
  sub->add_option("--label", args->labels,
                  "KEY=VALUE every local worker advertises, e.g. accel=910c (repeatable)");
  sub->add_option("--worker-binary", args->worker_binary,
                  "Worker program to start (default: hmpmd-worker beside hmpmd); e.g. a "
                  "program embedding hmpmd::worker with its own kernels")
      ->check(NonEmptyPath());
  sub->add_option("--trace", args->trace_file, "Write a Chrome trace / Perfetto JSON here")
      ->check(NonEmptyPath());
  sub->add_flag("--json", args->json, "Print the summary as one JSON object");
  sub->add_option("--policy", args->policy, "Scheduling policy (" + PolicyNamesText() + ")")
      ->capture_default_str();
  CLI::Option* cores =
      sub->add_option("--cores", args->cores, "Cores of each worker, e.g. cube=1,vector=2")
          ->capture_default_str();
  sub->add_option("--memory-mb", args->memory_mb,
                  "Object store of each worker, in MiB (0: no cap; default: the worker's, "
                  "1024)");
  sub->add_option("--log-level", args->log_level, "trace, debug, info, warn, error, off")
      ->capture_default_str();
  sub->add_option("--timeout", args->timeout_s,
                  "Give up after this many seconds (the workers' start included)")
      ->capture_default_str();
  sub->add_option("--max-runs", args->max_runs,
                  "Largest job accepted, in task runs (tasks x repeat; about 80 bytes of "
                  "controller memory each)")
      ->check(WholeRange(1, static_cast<int64_t>(SpecLimits{}.max_runs)))
      ->capture_default_str();
  sub->callback([args, cores, exit_code] {
    args->cores_given = cores->count() > 0;
    *exit_code = RunMain(*args);
  });
}

}  // namespace hmpmd
