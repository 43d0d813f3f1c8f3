// The worker's logger: one spdlog logger per Worker, writing to stderr.
//
// Thread-safety: the logger is thread-safe; lanes and the I/O thread share
// it.
#pragma once

#include <spdlog/logger.h>

#include <memory>

#include "hmpmd/worker/worker_options.h"

namespace hmpmd::worker {

// A logger at `level` on the process's shared stderr sink. It is not put in
// spdlog's registry, so several Workers in one process do not collide.
std::shared_ptr<spdlog::logger> MakeLogger(LogLevel level);

}  // namespace hmpmd::worker
