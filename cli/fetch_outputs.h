// FetchOutputsTo: `hmpmd submit --wait --fetch DIR`. Fetches a job's final
// outputs peer to peer from the workers that hold them (the controller only
// says where they are) and writes them under DIR.
#pragma once

#include <cstddef>
#include <nlohmann/json.hpp>
#include <string>

#include "hmpmd/protocol/status.h"
#include "hmpmd/protocol/types.h"

namespace hmpmd {

// Creates DIR (and its parents) if missing and checks that it is an empty,
// writable directory, before the job is submitted: outputs never mix with
// files already there. InvalidArgument naming --fetch and DIR otherwise.
Status PrepareFetchDir(const std::string& dir);

// The file name of buffer `index` of `task`: "<task>.<index>.bin", with
// '/', '%', a leading '.' and other characters unsafe in a file name
// written as %XX (UTF-8 letters are kept), so any task id gives one file
// inside DIR.
std::string OutputFileName(const std::string& task, size_t index);

// `outputs` is the body of GET /api/v1/jobs/{id}/outputs, with the
// `data_token` the fetches carry (PermissionDenied without one). Writes
// DIR/OutputFileName(task, i) (raw bytes of buffer i) and DIR/manifest.json
// (task, file, dtype, shape of each), creating DIR.
Status FetchOutputsTo(const nlohmann::json& outputs, JobId job, const std::string& dir,
                      double timeout_s);

}  // namespace hmpmd
