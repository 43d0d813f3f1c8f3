// Helpers every `hmpmd` subcommand shares: files, log levels, one-line
// errors and exit codes.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "hmpmd/protocol/cli_checks.h"
#include "hmpmd/protocol/one_line.h"
#include "hmpmd/protocol/read_file.h"
#include "hmpmd/protocol/status.h"

namespace CLI {
class App;
class Validator;
}  // namespace CLI

namespace hmpmd {

// Exit codes: 0 success, 1 the work failed (job failed, peer unreachable),
// 2 the input was wrong (flags, spec).
inline constexpr int kExitOk = 0;
inline constexpr int kExitFailed = 1;
inline constexpr int kExitUsage = 2;

Status WriteFile(const std::string& path, const std::string& content);
// Checks before any work that `path` can be written by WriteFile later: not
// a directory, its folder exists and is writable. Leaves no file behind.
// The error names `flag` and the path. Refuses too a path that names one of
// the command's `inputs` (`--trace job.json` replaced the spec).
Status CheckWritable(const std::string& flag, const std::string& path,
                     const std::vector<std::string>& inputs = {});
// OneLine(text) padded with spaces to `width` terminal columns, for a
// table: UTF-8 characters count one column, East Asian wide ones two. With
// `cut`, longer text is cut to `width` columns at a character boundary.
std::string Column(std::string_view text, size_t width, bool cut = false);
// `text` as a whole number in [min, max], decimal digits only; else
// InvalidArgument naming `flag`: "--seed: expected a whole number from 0
// to 18446744073709551615, got 'x'".
Result<uint64_t> ParseWhole(const std::string& flag, std::string_view text, uint64_t min,
                            uint64_t max);
// A check for a path flag (CLI::Option::check): an empty value, as an unset
// variable in a script gives, is refused instead of read as "not given".
// `give` says what to give instead: "a file name", "a directory".
CLI::Validator NonEmptyPath(const std::string& give = "a file name");
// trace, debug, info, warn, error, off.
Status SetLogLevel(const std::string& level);
// Prints "hmpmd: <message>" on stderr, in one line (OneLine); returns the
// exit code for `st`.
int Fail(const Status& st);

// "hmpmd, fifo, ...": the registered policies (PolicyNames), for --help.
std::string PolicyNamesText();

// Each subcommand registers itself; its callback stores the exit code.
void AddRunCommand(CLI::App& app, int* exit_code);
void AddControllerCommand(CLI::App& app, int* exit_code);
void AddKeygenCommand(CLI::App& app, int* exit_code);
void AddWorkerCommand(CLI::App& app, int* exit_code);
void AddClientCommands(CLI::App& app, int* exit_code);
void AddSimCommand(CLI::App& app, int* exit_code);

}  // namespace hmpmd
