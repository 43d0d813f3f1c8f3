// The parts of the hmpmd-worker command line that CLI11 does not check by
// itself, turned into WorkerOptions fields. Errors are one line naming the
// flag, e.g. "--cores: 'gpu' is not a core kind (cube, vector)".
//
// Thread-safety: free functions over values; safe from any thread.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "hmpmd/protocol/status.h"
#include "hmpmd/worker/worker_options.h"

namespace hmpmd::worker {

// "cube=1,vector=2" sets the core counts it names; kinds it leaves out keep
// their value in `options`. Counts are integers in [0, 256]; at least one
// core in total.
Status ParseCores(std::string_view text, WorkerOptions* options);

// "trace", "debug", "info", "warn" or "error".
Result<LogLevel> ParseLogLevel(std::string_view text);

// The --label flags, each KEY=VALUE (ParseLabelFlag), into options->labels:
// a key the device file gave takes the flag's value; one key given twice
// with different values is an error naming both.
Status ParseLabels(const std::vector<std::string>& flags, WorkerOptions* options);

// A worker name (--name, the device file's "name"): 1 to 255 bytes, no
// control character (it is printed in one-line listings and logs).
Status CheckWorkerName(std::string_view name, std::string_view where);

// tcp://HOST:PORT or ipc://PATH (CheckEndpoint), or several of them
// separated by commas (a primary and its standbys).
Status CheckControllerEndpoint(std::string_view endpoints);

// The token in `path`, without trailing whitespace.
Result<std::string> ReadTokenFile(const std::string& path);

// A device description, so that one manifest serves many machine shapes:
//   {"name": "node7-npu0", "cores": {"cube": 2, "vector": 4}, "memory_mb": 65536,
//    "labels": {"accel": "910c"}}
// Every field is optional; "cores" lists the device completely (a kind left
// out has none, as with --cores). Unknown or repeated fields, wrong types and
// out-of-range values are errors, one line naming `source` and the field. On
// success the fields present overwrite `options`; on error it is untouched.
Status ParseDeviceDescription(std::string_view text, const std::string& source,
                              WorkerOptions* options);

// ParseDeviceDescription() of the file at `path` (the --device flag).
Status LoadDeviceFile(const std::string& path, WorkerOptions* options);

// Reads DIR/controller.pub, DIR/worker.pub and DIR/worker.key (Z85, as
// written by `hmpmd keygen DIR`) into the curve_* fields of `options`.
Status ReadCurveKeys(const std::string& dir, WorkerOptions* options);

}  // namespace hmpmd::worker
