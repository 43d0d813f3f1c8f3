// hmpmd-worker: serves a HyperMPMD controller with the built-in kernels.
//
// Exit codes: 0 after Shutdown or SIGINT/SIGTERM; 1 when the worker fails
// (e.g. the controller rejects it); 2 for a bad command line.
#include <CLI/CLI.hpp>
#include <atomic>
#include <csignal>
#include <cstdio>
#include <string>
#include <vector>

#include "cli_options.h"
#include "hmpmd/protocol/cli_checks.h"
#include "hmpmd/protocol/tensor_bytes.h"
#include "hmpmd/worker/worker.h"
#include "tune_allocator.h"

namespace {

constexpr int kExitUsage = 2;

// Lock-free, so the signal handler may read it.
std::atomic<hmpmd::worker::Worker*> g_worker{nullptr};

// Worker::Stop() is async-signal-safe. SA_RESETHAND makes a second signal
// end the process even while a long kernel finishes.
extern "C" void OnSignal(int) {
  if (hmpmd::worker::Worker* w = g_worker.load()) w->Stop();
}

void InstallSignalHandlers() {
  struct sigaction sa = {};
  sa.sa_handler = OnSignal;
  sa.sa_flags = SA_RESETHAND;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGINT, &sa, nullptr);
  sigaction(SIGTERM, &sa, nullptr);
}

int UsageError(const std::string& message) {
  std::fprintf(stderr, "hmpmd-worker: %s\n", message.c_str());
  return kExitUsage;
}

}  // namespace

int main(int argc, char** argv) {
  hmpmd::worker::TuneAllocatorForTensors();
  using hmpmd::worker::WorkerOptions;
  WorkerOptions options;
  std::string cores;
  std::string device_file;
  std::string name;
  std::vector<std::string> labels;
  uint64_t memory_mb = options.memory_mb;
  std::string token_file;
  std::string curve_dir;
  std::string log_level = "info";
  uint64_t tensor_pool_mb = hmpmd::kTensorPoolDefaultBytes >> 20;

  CLI::App app{"Runs kernels on this host's cores for a HyperMPMD controller.", "hmpmd-worker"};
  app.add_option("--controller", options.controller_endpoint,
                 "Controller endpoint, tcp://HOST:PORT; a primary and its standbys "
                 "(hmpmd controller --standby) separated by commas")
      ->required();
  CLI::Option* cores_flag = app.add_option(
      "--cores", cores, "Cores per kind, e.g. cube=1,vector=2 (default cube=1,vector=1)");
  CLI::Option* memory_flag =
      app.add_option("--memory-mb", memory_mb, "Device memory to offer, in MiB (0: no cap)")
          ->check(hmpmd::WholeRange(0, int64_t{1} << 30))
          ->capture_default_str();
  CLI::Option* name_flag =
      app.add_option("--name", name, "Name shown by the controller (default HOST:PID)");
  app.add_option("--device", device_file,
                 "JSON device description {\"name\", \"cores\": {\"cube\", \"vector\"}, "
                 "\"memory_mb\", \"labels\": {KEY: VALUE}}; flags given beside it win");
  CLI::Option* label_flag = app.add_option(
      "--label", labels,
      "KEY=VALUE the device advertises, e.g. accel=910c (repeatable); tasks that require "
      "labels run only where all of them are");
  app.add_option("--prefetch-mb", options.prefetch_mb,
                 "Most MiB of queued tasks' inputs fetched ahead, within --memory-mb too "
                 "(0: fetch when a task starts)")
      ->check(hmpmd::WholeRange(0, int64_t{1} << 30))
      ->capture_default_str();
  app.add_option("--tensor-pool-mb", tensor_pool_mb,
                 "Most MiB of freed large tensors kept for reuse by later outputs and "
                 "fetches, beside --memory-mb (0: none)")
      ->check(hmpmd::WholeRange(0, int64_t{1} << 30))
      ->capture_default_str();
  app.add_option("--data-host", options.data_host,
                 "Interface of the data socket peers fetch from (default: the one that "
                 "reaches the controller)");
  app.add_option("--peer-timeout-ms", options.peer_timeout_ms,
                 "How long a collective step waits for a gang peer, and an input fetch for "
                 "its producer, before failing; a collective that times out runs its gang again")
      ->check(hmpmd::WholeRange(1, 86'400'000))
      ->capture_default_str();
  app.add_option("--token-file", token_file,
                 "File holding the controller's token (default: $HMPMD_TOKEN_FILE, else "
                 "~/.config/hmpmd/token if it exists)");
  app.add_option("--curve-keys", curve_dir,
                 "Directory from `hmpmd keygen`: encrypt and authenticate with CurveZMQ");
  app.add_option("--exec-log", options.exec_log,
                 "Append one line per successful kernel run to this file (for tests)");
  app.add_option("--log-level", log_level, "trace, debug, info, warn or error")
      ->capture_default_str();
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    if (e.get_exit_code() == static_cast<int>(CLI::ExitCodes::Success)) return app.exit(e);
    return UsageError(e.what());
  }

  // A process-wide setting, as the allocator's (TuneAllocatorForTensors).
  hmpmd::SetTensorPoolLimit(tensor_pool_mb << 20);

  // The flags map onto WorkerOptions and do nothing else. The device file
  // comes first, so that flags given beside it override its fields.
  hmpmd::Status status = hmpmd::worker::CheckControllerEndpoint(options.controller_endpoint);
  if (status.ok() && !device_file.empty()) {
    status = hmpmd::worker::LoadDeviceFile(device_file, &options);
  }
  if (status.ok() && cores_flag->count() > 0) status = hmpmd::worker::ParseCores(cores, &options);
  if (memory_flag->count() > 0) options.memory_mb = memory_mb;
  if (status.ok() && label_flag->count() > 0) status = hmpmd::worker::ParseLabels(labels, &options);
  if (status.ok() && name_flag->count() > 0) {
    status = hmpmd::worker::CheckWorkerName(name, "--name:");
    options.name = name;
  }
  if (!status.ok()) return UsageError(status.message());
  hmpmd::Result<hmpmd::worker::LogLevel> level = hmpmd::worker::ParseLogLevel(log_level);
  if (!level.ok()) return UsageError(level.status().message());
  options.log_level = *level;
  if (!token_file.empty()) {
    hmpmd::Result<std::string> token = hmpmd::worker::ReadTokenFile(token_file);
    if (!token.ok()) return UsageError(token.status().message());
    options.token = std::move(token).value();
  }

  if (!curve_dir.empty()) {
    status = hmpmd::worker::ReadCurveKeys(curve_dir, &options);
    if (!status.ok()) return UsageError(status.message());
  }
  hmpmd::worker::Worker worker(std::move(options));
  g_worker.store(&worker);
  InstallSignalHandlers();
  status = worker.Run();
  g_worker.store(nullptr);
  // A failed Run() has already logged why, in one line.
  return status.ok() ? 0 : 1;
}
