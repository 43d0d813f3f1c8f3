// hmpmd: the command line of docs/cli.md. Each subcommand
// lives in its own file and maps its flags onto an options struct.
#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "cli_common.h"

int main(int argc, char** argv) {
  // Logs go to stderr so stdout stays clean for --json output.
  spdlog::set_default_logger(spdlog::stderr_color_mt("hmpmd"));
  spdlog::set_pattern("%Y-%m-%d %H:%M:%S.%e %^%l%$ %v");

  CLI::App app{"HyperMPMD: single-controller MPMD orchestration"};
  app.require_subcommand(1);
  int exit_code = hmpmd::kExitOk;
  hmpmd::AddRunCommand(app, &exit_code);
  hmpmd::AddControllerCommand(app, &exit_code);
  hmpmd::AddKeygenCommand(app, &exit_code);
  hmpmd::AddWorkerCommand(app, &exit_code);
  hmpmd::AddClientCommands(app, &exit_code);
  hmpmd::AddSimCommand(app, &exit_code);
  try {
    app.parse(argc, argv);
  } catch (const nlohmann::json::exception& e) {
    // A reply of another shape than ours (a proxy, another service at
    // --url) aborted the process with an uncaught type_error.
    std::cerr << "hmpmd: the controller's answer is not what hmpmd expects: "
              << hmpmd::OneLine(e.what(), 200) << std::endl;
    return hmpmd::kExitFailed;
  } catch (const CLI::ParseError& e) {
    if (e.get_exit_code() == 0) return app.exit(e);  // --help
    // "hmpmd stauts": name the word, not "A subcommand is required".
    if (argc > 1 && argv[1][0] != '-' && app.get_subcommands().empty()) {
      std::string known;
      for (const CLI::App* sub : app.get_subcommands({})) {
        known += (known.empty() ? "" : ", ") + sub->get_name();
      }
      std::cerr << "hmpmd: unknown command '" << hmpmd::OneLine(argv[1]) << "' (" << known << ")"
                << std::endl;
      return hmpmd::kExitUsage;
    }
    std::cerr << "hmpmd: " << hmpmd::OneLine(e.what()) << " (see --help)" << std::endl;
    return hmpmd::kExitUsage;
  }
  return exit_code;
}
