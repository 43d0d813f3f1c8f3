// Helpers every `hmpmd` subcommand shares: files, log levels, one-line
// errors and exit codes.
#pragma once

#include <string>

#include "hmpmd/protocol/status.h"

namespace CLI {
class App;
}

namespace hmpmd {

// Exit codes: 0 success, 1 the work failed (job failed, peer unreachable),
// 2 the input was wrong (flags, spec).
inline constexpr int kExitOk = 0;
inline constexpr int kExitFailed = 1;
inline constexpr int kExitUsage = 2;

Result<std::string> ReadFile(const std::string& path);
Status WriteFile(const std::string& path, const std::string& content);
// Reads a token file: its first line, trimmed; an empty token is an error.
Result<std::string> ReadToken(const std::string& path);
// trace, debug, info, warn, error, off.
Status SetLogLevel(const std::string& level);
// Prints "hmpmd: <message>" on stderr; returns the exit code for `st`.
int Fail(const Status& st);

// Each subcommand registers itself; its callback stores the exit code.
void AddRunCommand(CLI::App& app, int* exit_code);
void AddControllerCommand(CLI::App& app, int* exit_code);
void AddKeygenCommand(CLI::App& app, int* exit_code);
void AddWorkerCommand(CLI::App& app, int* exit_code);
void AddClientCommands(CLI::App& app, int* exit_code);
void AddSimCommand(CLI::App& app, int* exit_code);

}  // namespace hmpmd
