// Reading a whole input file (job spec, pool spec, --device, --token-file)
// with one-line errors, shared by the CLI and the worker.
// Thread-safety: a free function; safe from any thread.
#pragma once

#include <cstddef>
#include <string>

#include "hmpmd/protocol/status.h"

namespace hmpmd {

// Reads a whole regular file (or pipe) of at most `max_bytes`; a directory,
// a missing file or a larger one is an error naming the path. Default: 1 GiB.
Result<std::string> ReadFile(const std::string& path, size_t max_bytes = size_t{1} << 30);

}  // namespace hmpmd
