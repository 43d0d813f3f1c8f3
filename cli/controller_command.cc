// `hmpmd controller`: the long-running service: the ROUTER endpoint for
// workers and the REST API for clients.
#include <signal.h>
#include <spdlog/spdlog.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <thread>

#include "cli_common.h"
#include "hmpmd/api/service.h"
#include "hmpmd/controller/audit_log.h"
#include "hmpmd/controller/curve_keys.h"
#include "hmpmd/controller/token_book.h"
#include "hmpmd/http/http_server.h"
#include "hmpmd/protocol/token_file.h"
#include "hmpmd/store/sqlite_job_store.h"

namespace hmpmd {
namespace {

struct ControllerArgs {
  std::string listen = "tcp://*:5555";
  std::string http = "127.0.0.1:8080";
  int http_nice = HttpServerOptions{}.nice;
  bool http_idle = false;
  double http_cpu_percent = kDefaultHttpCpuPercent;
  std::string token_file;
  std::string tokens_file;
  std::string audit_log;
  std::string db = "hmpmd.db";
  std::string curve_keys;
  size_t max_tasks = SpecLimits{}.max_tasks;
  size_t max_spec_mb = SpecLimits{}.max_bytes >> 20;
  uint64_t max_runs = kDefaultMaxRuns;
  // Unset: the larger of kDefaultMaxHeldRuns and --max-runs.
  uint64_t max_held_runs = 0;
  size_t keep_jobs = 1000;
  double keep_grace_s = 60;
  double keep_hours = 0;
  uint32_t recovery_grace_ms = 2000;
  std::string policy = "hmpmd";
  std::string log_level = "info";
  uint32_t heartbeat_ms = 500;
  uint32_t worker_timeout_ms = 5000;
  bool no_early_dispatch = false;
  bool insecure = false;
  bool public_read = false;
  bool public_metrics = false;
  bool standby = false;
};

// How often a standby tries the primary's lock on the store.
constexpr auto kStandbyPollInterval = std::chrono::milliseconds(50);

// --standby: waits until the controller holding `path` ends (its lock on
// the store is released, by the kernel when it dies), then opens it. Two
// controllers never hold one store: the lock is the one arbiter, so a
// primary that is paused or cut off keeps the store, and the standby
// waits. Other errors end the wait.
Result<std::unique_ptr<SqliteJobStore>> OpenAsStandby(const std::string& path) {
  const auto since = std::chrono::steady_clock::now();
  bool told = false;
  for (;;) {
    auto store = SqliteJobStore::Open(path);
    if (store.ok() ||
        store.status().message().find("in use by another controller") == std::string::npos) {
      if (store.ok() && told) {
        spdlog::warn(
            "standby: the primary released {} after {:.1f} s; taking over", path,
            std::chrono::duration<double>(std::chrono::steady_clock::now() - since).count());
      }
      return store;
    }
    if (!told) {
      spdlog::info("standby: {}; taking over when it ends", store.status().message());
      told = true;
    }
    std::this_thread::sleep_for(kStandbyPollInterval);
  }
}

// No port beyond loopback opens without a secret: bound elsewhere with no
// --token-file (and, for the worker port, no --curve-keys), the controller
// uses the token in DefaultTokenPath(), made there if missing, where local
// workers and `hmpmd` commands find it. --insecure opts out, loudly.
Status SecureByDefault(const ControllerArgs& a, ControllerOptions* opts) {
  const bool open_listen = !IsLoopbackEndpoint(a.listen) && a.curve_keys.empty();
  const bool open_http = !a.http.empty() && !IsLoopbackHostPort(a.http);
  if (!opts->token.empty() || (!open_listen && !open_http)) return Status::Ok();
  const std::string open_ports = open_listen && open_http ? a.listen + " and http://" + a.http
                                 : open_listen            ? a.listen
                                                          : "http://" + a.http;
  if (a.insecure) {
    spdlog::warn("--insecure: {} open with no secret: anyone who reaches it may {}", open_ports,
                 open_listen ? "serve as a worker (and read every task's inputs) or submit work"
                             : "submit and cancel jobs");
    return Status::Ok();
  }
  const std::string path = DefaultTokenPath();
  bool made = false;
  Result<std::string> token = LoadOrMakeToken(path, &made);
  if (!token.ok()) {
    return Status::InvalidArgument("token for " + open_ports + ": " + token.status().message() +
                                   "; or give --token-file, --curve-keys or --insecure");
  }
  opts->token = *token;
  spdlog::info(
      "{} needs a token: {} {} (workers and hmpmd commands on this host read it there; "
      "give it to others with --token-file)",
      open_ports, made ? "made" : "using", path);
  return Status::Ok();
}

int ControllerMain(const ControllerArgs& a) {
  if (Status st = SetLogLevel(a.log_level); !st.ok()) return Fail(st);
  // Before --db is opened, so that a typo does not leave a new file behind.
  if (Status st = CheckEndpoint(a.listen, /*bind=*/true); !st.ok()) {
    return Fail(Status::InvalidArgument("--listen: " + st.message()));
  }
  if (!a.http.empty()) {
    if (Status st = HttpServer::CheckBind(a.http); !st.ok()) {
      return Fail(st.code() == StatusCode::kInvalidArgument
                      ? Status::InvalidArgument("--http: " + st.message())
                      : st);
    }
  }
  ServiceOptions so;
  ControllerOptions& opts = so.controller;
  opts.listen = a.listen;
  opts.policy = a.policy;
  opts.heartbeat_ms = a.heartbeat_ms;
  opts.worker_timeout_ms = a.worker_timeout_ms;
  opts.keep_finished_jobs = a.keep_jobs;
  opts.keep_ended_grace_ms = static_cast<int64_t>(a.keep_grace_s * 1000);
  opts.keep_finished_hours = a.keep_hours;
  opts.spec_limits.max_tasks = a.max_tasks;
  opts.spec_limits.max_bytes = a.max_spec_mb << 20;
  opts.spec_limits.max_runs = a.max_runs;
  opts.max_held_runs =
      a.max_held_runs > 0 ? a.max_held_runs : std::max(kDefaultMaxHeldRuns, a.max_runs);
  opts.recovery_grace_ms = a.recovery_grace_ms;
  if (a.no_early_dispatch) opts.scheduler.early_dispatch = false;
  if (!a.curve_keys.empty()) {
    auto keys = LoadCurveServerKeys(a.curve_keys);
    if (!keys.ok()) return Fail(keys.status());
    opts.curve_secret_key = keys->secret;
    opts.curve_allowed = keys->allowed;
    spdlog::info("CurveZMQ on: {} authorized worker key(s)", opts.curve_allowed.size());
  }
  if (!a.token_file.empty()) {
    auto token = ReadTokenFile(a.token_file);
    if (!token.ok())
      return Fail(Status::InvalidArgument("--token-file: " + token.status().message()));
    opts.token = *token;
  }
  if (opts.heartbeat_ms == 0) {
    return Fail(Status::InvalidArgument("--heartbeat-ms: must be at least 1"));
  }
  if (opts.worker_timeout_ms <= opts.heartbeat_ms) {
    return Fail(
        Status::InvalidArgument("--worker-timeout-ms: must be larger than --heartbeat-ms (" +
                                std::to_string(opts.heartbeat_ms) + ")"));
  }
  // Before --db is opened: a token that cannot be made leaves no store behind.
  if (Status st = SecureByDefault(a, &opts); !st.ok()) return Fail(st);
  if (!a.tokens_file.empty()) {
    // Checked here too, before --db is opened; the controller reads it again.
    TokenBook check(opts.token);
    if (Status st = check.Watch(a.tokens_file); !st.ok()) {
      return Fail(Status::InvalidArgument("--tokens: " + st.message()));
    }
    opts.tokens_file = a.tokens_file;
  }
  if (!a.audit_log.empty()) {
    // Made here, before --db is opened, so that a path it cannot write
    // stops the controller first; the controller opens it again.
    if (auto log = AuditLog::Open(a.audit_log); !log.ok()) {
      return Fail(Status::InvalidArgument("--audit-log: " + log.status().message()));
    }
  }
  opts.audit_log = a.audit_log;
  so.api.public_read = a.public_read;
  so.api.public_metrics = a.public_metrics;
  so.serve_http = !a.http.empty();
  so.http.bind = a.http;
  so.http.nice = a.http_nice;
  so.http.idle_priority = a.http_idle;
  so.http.max_body_flag = "--max-spec-mb";
  so.http_cpu_percent = a.http_cpu_percent;
  so.fit_connections_to_file_limit = true;

  // A file-size limit (ulimit -f, a quota) reached by the store is a
  // failed write, which the store retries, not a signal that kills the
  // controller (SIGXFSZ's default).
  ::signal(SIGXFSZ, SIG_IGN);
  // Last of the checks: it creates the file.
  if (a.standby && a.db.empty()) {
    return Fail(Status::InvalidArgument("--standby: needs --db, the primary's store"));
  }
  if (!a.db.empty()) {
    auto store = a.standby ? OpenAsStandby(a.db) : SqliteJobStore::Open(a.db);
    if (!store.ok()) return Fail(Status::InvalidArgument("--db: " + store.status().message()));
    opts.store = std::shared_ptr<JobStore>(std::move(store).value());
    spdlog::info("job store: {}", a.db);
  }

  // Signals are taken by one thread with sigwait, never by a handler that
  // could interrupt the loop mid-change; blocked before any thread starts.
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);

  Service service(std::move(so));
  if (Status st = service.Start(); !st.ok()) return Fail(st);
  std::thread waiter([&service, signals] {
    int sig = 0;
    sigwait(&signals, &sig);
    spdlog::info("signal {}: stopping", sig);
    service.Stop();
  });
  service.Run();
  // Wake the signal thread if the loop ended for another reason.
  kill(getpid(), SIGTERM);
  waiter.join();
  return kExitOk;
}

}  // namespace

void AddKeygenCommand(CLI::App& app, int* exit_code) {
  auto dir = std::make_shared<std::string>();
  CLI::App* sub = app.add_subcommand("keygen", "Write CurveZMQ keys for --curve-keys into DIR");
  sub->add_option("DIR", *dir, "Key directory (created)")->required();
  sub->callback([dir, exit_code] {
    // An empty DIR would put the secret keys in the working directory and
    // print "/controller.key".
    if (dir->empty()) {
      *exit_code = Fail(Status::InvalidArgument("keygen: DIR is empty; name a directory"));
      return;
    }
    Status st = WriteCurveKeys(*dir);
    if (!st.ok()) {
      *exit_code = Fail(st);
      return;
    }
    std::string shown = *dir;  // keys/ as given: not keys//controller.pub
    while (shown.size() > 1 && shown.back() == '/') shown.pop_back();
    std::printf("wrote %s/{controller,worker}.{pub,key} and %s/authorized/worker.pub\n",
                shown.c_str(), shown.c_str());
    *exit_code = kExitOk;
  });
}

void AddControllerCommand(CLI::App& app, int* exit_code) {
  auto args = std::make_shared<ControllerArgs>();
  CLI::App* sub = app.add_subcommand("controller", "Run the controller service");
  sub->add_option("--listen", args->listen, "ZeroMQ endpoint for workers")->capture_default_str();
  sub->add_option("--http", args->http, "host:port of the REST API and dashboard ('' = off)")
      ->capture_default_str();
  sub->add_option("--http-nice", args->http_nice,
                  "Nice value of the HTTP server and formatting threads: higher gives dispatch "
                  "the CPU first on a busy machine (0 = the process's priority)")
      ->check(WholeRange(-20, 19))
      ->capture_default_str();
  sub->add_flag("--http-idle", args->http_idle,
                "Run the HTTP server and formatting threads at SCHED_IDLE: only on CPU time "
                "dispatch and local workers leave over (requests wait while they are busy)");
  sub->add_option("--http-cpu-percent", args->http_cpu_percent,
                  "Most CPU the HTTP server and formatting threads take together, in percent of "
                  "one core (the spec parsing thread has a budget as large of its own); over it "
                  "they pause and requests wait (none is refused). 0 = no cap")
      ->check(FiniteRange(0.0, 6400.0))
      ->capture_default_str();
  CLI::Option* token_flag = sub->add_option(
      "--token-file", args->token_file,
      "File holding the token workers, drivers and REST calls must present (default, "
      "when --listen or --http is beyond loopback: $HMPMD_TOKEN_FILE, else "
      "~/.config/hmpmd/token, made if missing)");
  CLI::Option* tokens_flag = sub->add_option(
      "--tokens", args->tokens_file,
      "JSON file of more tokens, each with a holder's name and a role (admin, submit, read); "
      "read again when it changes, so tokens are added and revoked without a restart");
  sub->add_option("--audit-log", args->audit_log,
                  "File every mutating call is appended to, one JSON line each (who, what, "
                  "when, from where)");
  sub->add_option("--curve-keys", args->curve_keys,
                  "Key directory from `hmpmd keygen`: CurveZMQ with authorized worker keys");
  sub->add_flag("--insecure", args->insecure,
                "Bound beyond loopback, run with no secret at all (anyone who reaches the ports "
                "may serve as a worker or submit work)")
      ->excludes(token_flag)
      ->excludes(tokens_flag);
  sub->add_flag("--public-read", args->public_read,
                "With a token, let anyone who reaches --http read the API (jobs, tasks, traces, "
                "outputs' places, events, metrics); writes still need the token");
  sub->add_flag("--public-metrics", args->public_metrics,
                "With a token, let anyone who reaches --http read /metrics (for Prometheus)");
  sub->add_option("--max-tasks", args->max_tasks, "Largest job spec accepted, in tasks per step")
      ->check(WholeRange(1, 100'000'000))
      ->capture_default_str();
  sub->add_option("--max-spec-mb", args->max_spec_mb, "Largest job spec accepted, in MiB of JSON")
      ->check(WholeRange(1, 65536))
      ->capture_default_str();
  sub->add_option("--max-runs", args->max_runs,
                  "Largest job accepted, in task runs (tasks x repeat; about 80 bytes of "
                  "controller memory each)")
      ->check(WholeRange(1, static_cast<int64_t>(SpecLimits{}.max_runs)))
      ->capture_default_str();
  sub->add_option("--max-held-runs", args->max_held_runs,
                  "Task runs held over all jobs, ended ones included (default: the larger of " +
                      std::to_string(kDefaultMaxHeldRuns) +
                      " and --max-runs); the oldest ended jobs are forgotten to make room")
      ->check(WholeRange(1, static_cast<int64_t>(SpecLimits{}.max_runs) * 4));
  sub->add_option("--db", args->db,
                  "SQLite file keeping jobs across restarts ('' = in memory only)")
      ->capture_default_str();
  sub->add_flag("--standby", args->standby,
                "Wait for the controller holding --db to end, then take over its jobs and "
                "workers (a hot standby: give workers both endpoints, --controller A,B)");
  sub->add_option("--keep-jobs", args->keep_jobs,
                  "Finished jobs kept for queries (in memory and in --db)")
      // 0 would forget each job as it ends: `submit --wait` would never see it.
      ->check(WholeRange(1, 100'000'000))
      ->capture_default_str();
  sub->add_option("--keep-grace-s", args->keep_grace_s,
                  "A job that ended less than this many seconds ago is kept whatever "
                  "--keep-jobs says, so `submit --wait` reads its end (0 = none)")
      ->check(FiniteRange(0.0, 86400.0))
      ->capture_default_str();
  sub->add_option("--keep-hours", args->keep_hours,
                  "Also forget finished jobs this many hours after they ended (0 = no limit)")
      ->check(FiniteRange(0.0, 1e6))
      ->capture_default_str();
  sub->add_option("--recovery-grace-ms", args->recovery_grace_ms,
                  "After a restart, longest wait for the workers to re-register before "
                  "dispatch resumes (it resumes once all of them are back)")
      ->check(WholeRange(0, UINT32_MAX))
      ->capture_default_str();
  sub->add_option("--policy", args->policy, "Scheduling policy (" + PolicyNamesText() + ")")
      ->capture_default_str();
  sub->add_option("--heartbeat-ms", args->heartbeat_ms, "Worker heartbeat period")
      ->check(WholeRange(0, UINT32_MAX))
      ->capture_default_str();
  sub->add_option("--worker-timeout-ms", args->worker_timeout_ms,
                  "Silence after which a worker is declared dead")
      ->check(WholeRange(0, UINT32_MAX))
      ->capture_default_str();
  sub->add_option("--log-level", args->log_level, "trace, debug, info, warn, error, off")
      ->capture_default_str();
  sub->add_flag("--no-early-dispatch", args->no_early_dispatch,
                "Send a task only once its inputs' results are back (by default a task whose "
                "producers all run on one core is queued behind them there)");
  sub->callback([args, exit_code] { *exit_code = ControllerMain(*args); });
}

}  // namespace hmpmd
