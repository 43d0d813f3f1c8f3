// The parts of the hmpmd-worker command line that CLI11 does not check by
// itself, turned into WorkerOptions fields. Errors are one line naming the
// flag, e.g. "--cores: 'gpu' is not a core kind (cube, vector)".
//
// Thread-safety: free functions over values; safe from any thread.
#pragma once

#include <string>
#include <string_view>

#include "hmpmd/protocol/status.h"
#include "hmpmd/worker/worker_options.h"

namespace hmpmd::worker {

// "cube=1,vector=2" sets the core counts it names; kinds it leaves out keep
// their value in `options`. Counts are integers in [0, 256]; at least one
// core in total.
Status ParseCores(std::string_view text, WorkerOptions* options);

// "trace", "debug", "info", "warn" or "error".
Result<LogLevel> ParseLogLevel(std::string_view text);

// tcp://HOST:PORT or ipc://PATH.
Status CheckControllerEndpoint(std::string_view endpoint);

// The token in `path`, without trailing whitespace.
Result<std::string> ReadTokenFile(const std::string& path);

// Reads DIR/controller.pub, DIR/worker.pub and DIR/worker.key (Z85, as
// written by `hmpmd keygen DIR`) into the curve_* fields of `options`.
Status ReadCurveKeys(const std::string& dir, WorkerOptions* options);

}  // namespace hmpmd::worker
