// `hmpmd worker ...` runs the hmpmd-worker binary with the same flags, so the
// controller's CLI never links the worker library (docs/architecture.md, "Parts").
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <cerrno>
#include <cstring>

#include "cli_common.h"
#include "hmpmd/launch/local_workers.h"

namespace hmpmd {

void AddWorkerCommand(CLI::App& app, int* exit_code) {
  CLI::App* sub = app.add_subcommand(
      "worker", "Serve a controller as a worker (runs hmpmd-worker; see hmpmd-worker --help)");
  sub->prefix_command();  // everything after `worker` goes to hmpmd-worker
  sub->callback([sub, exit_code] {
    std::string binary = WorkerBinary();
    std::vector<std::string> args = sub->remaining();
    std::vector<char*> argv;
    argv.push_back(binary.data());
    for (auto& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    execvp(binary.c_str(), argv.data());
    *exit_code = Fail(Status::Unavailable("cannot run " + binary + ": " + std::strerror(errno)));
  });
}

}  // namespace hmpmd
