// rl_worker: a worker program with the RL example's kernels (rl_kernels.h)
// besides the built-in ones.
//
//   rl_worker --controller tcp://127.0.0.1:5555 [--cores cube=1,vector=1]
//             [--name NAME] [--log-level debug|info|warn|error]
#include <cstdio>
#include <string>

#include "hmpmd/worker/worker.h"
#include "rl_kernels.h"

namespace {

// "cube=C,vector=V" into the options; false when malformed.
bool ParseCores(const std::string& text, hmpmd::worker::WorkerOptions* o) {
  unsigned cube = 0, vector = 0;
  char tail = 0;
  if (std::sscanf(text.c_str(), "cube=%u,vector=%u%c", &cube, &vector, &tail) != 2) return false;
  o->cube_cores = cube;
  o->vector_cores = vector;
  return true;
}

}  // namespace

constexpr char kUsage[] =
    "usage: rl_worker --controller tcp://HOST:PORT [--cores cube=C,vector=V] [--name NAME]\n"
    "                 [--log-level debug|info|warn|error]\n"
    "A worker with the RL example's kernels (rl.init, rl.load_weights, rl.rollout,\n"
    "rl.reward, rl.train) besides the built-in ones.\n";

int main(int argc, char** argv) {
  hmpmd::worker::WorkerOptions options;
  for (int i = 1; i < argc; i += 2) {
    const std::string flag = argv[i];
    if (flag == "--help" || flag == "-h") {
      std::fputs(kUsage, stdout);
      return 0;
    }
    if (i + 1 >= argc) {
      std::fprintf(stderr, "rl_worker: %s needs a value\n", flag.c_str());
      return 2;
    }
    const std::string value = argv[i + 1];
    if (flag == "--controller") {
      options.controller_endpoint = value;
    } else if (flag == "--cores") {
      if (!ParseCores(value, &options)) {
        std::fprintf(stderr, "rl_worker: --cores '%s' is not cube=C,vector=V\n", value.c_str());
        return 2;
      }
    } else if (flag == "--name") {
      options.name = value;
    } else if (flag == "--log-level") {
      if (value == "debug") {
        options.log_level = hmpmd::worker::LogLevel::kDebug;
      } else if (value == "info") {
        options.log_level = hmpmd::worker::LogLevel::kInfo;
      } else if (value == "warn") {
        options.log_level = hmpmd::worker::LogLevel::kWarn;
      } else if (value == "error") {
        options.log_level = hmpmd::worker::LogLevel::kError;
      } else {
        std::fprintf(stderr, "rl_worker: --log-level '%s' is not debug, info, warn or error\n",
                     value.c_str());
        return 2;
      }
    } else {
      std::fprintf(stderr, "rl_worker: unknown flag '%s'\n", flag.c_str());
      return 2;
    }
  }
  hmpmd::worker::Worker worker(options);
  rl::RegisterKernels(worker);
  hmpmd::Status status = worker.Run();
  if (!status.ok()) {
    std::fprintf(stderr, "rl_worker: %s\n", status.ToString().c_str());
    return 1;
  }
  return 0;
}
