// crash_worker: a test-only worker with the built-in kernels, `abort`, a
// kernel that aborts its worker process (as a kernel with a fatal bug does),
// for tests of how the controller treats a task that kills its workers, and
// `fail`, which logs a line and throws (args "message"), as a user kernel
// refusing its input does.
//
// It takes the flags ProcessCluster passes to a worker (--controller,
// --cores, --exec-log, --log-level, --name). Its aborts leave no core file.
#include <sys/resource.h>

#include <cstdio>
#include <cstdlib>
#include <stdexcept>
#include <string>
#include <vector>

#include "hmpmd/protocol/types.h"
#include "hmpmd/worker/worker.h"

int main(int argc, char** argv) {
  const rlimit no_core{0, 0};
  ::setrlimit(RLIMIT_CORE, &no_core);
  hmpmd::worker::WorkerOptions options;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string flag = argv[i], value = argv[i + 1];
    if (flag == "--controller") {
      options.controller_endpoint = value;
    } else if (flag == "--cores") {
      hmpmd::Result<hmpmd::CoreCounts> counts = hmpmd::ParseCoreCounts(value);
      if (!counts.ok()) {
        std::fprintf(stderr, "crash_worker: --cores: %s\n", counts.status().message().c_str());
        return 2;
      }
      options.cube_cores = counts->count[static_cast<size_t>(hmpmd::CoreKind::kCube)];
      options.vector_cores = counts->count[static_cast<size_t>(hmpmd::CoreKind::kVector)];
    } else if (flag == "--exec-log") {
      options.exec_log = value;
    } else if (flag == "--name") {
      options.name = value;
    } else if (flag == "--log-level") {
      options.log_level = value == "debug"  ? hmpmd::worker::LogLevel::kDebug
                          : value == "info" ? hmpmd::worker::LogLevel::kInfo
                                            : hmpmd::worker::LogLevel::kWarn;
    } else {
      std::fprintf(stderr, "crash_worker: unknown flag '%s'\n", flag.c_str());
      return 2;
    }
  }
  hmpmd::worker::Worker worker(options);
  worker.RegisterKernel(
      "abort",
      [](const hmpmd::worker::KernelArgs&,
         std::span<const hmpmd::Buffer>) -> std::vector<hmpmd::Buffer> { std::abort(); });
  worker.RegisterKernel("fail",
                        [](const hmpmd::worker::KernelArgs& args,
                           std::span<const hmpmd::Buffer>) -> std::vector<hmpmd::Buffer> {
                          args.Log("checking the input");
                          throw std::runtime_error(args.String("message", "refused"));
                        });
  hmpmd::Status status = worker.Run();
  if (!status.ok()) {
    std::fprintf(stderr, "crash_worker: %s\n", status.ToString().c_str());
    return 1;
  }
  return 0;
}
