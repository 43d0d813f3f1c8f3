// FetchOutputsTo: `hmpmd submit --wait --fetch DIR`. Fetches a job's final
// outputs peer to peer from the workers that hold them (the controller only
// says where they are) and writes them under DIR.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "hmpmd/protocol/status.h"
#include "hmpmd/protocol/types.h"

namespace hmpmd {

// `outputs` is the body of GET /api/v1/jobs/{id}/outputs. Writes
// DIR/<task>.<i>.bin (raw bytes of buffer i) and DIR/manifest.json (task,
// file, dtype, shape of each), creating DIR.
Status FetchOutputsTo(const nlohmann::json& outputs, JobId job, const std::string& dir,
                      double timeout_s);

}  // namespace hmpmd
