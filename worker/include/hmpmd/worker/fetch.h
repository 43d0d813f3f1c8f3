// FetchOutputs: reads a task run's outputs straight from the worker that
// holds them, over that worker's data socket.
//
// Thread-safety: safe from any thread; each call uses its own socket.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "hmpmd/protocol/buffer.h"
#include "hmpmd/protocol/data_token.h"
#include "hmpmd/protocol/status.h"
#include "hmpmd/protocol/types.h"
#include "hmpmd/worker/export.h"

namespace hmpmd::worker {

/// The outputs of run `run` of job `job`, fetched from the worker whose data
/// endpoint is `endpoint` (as the controller reports it), with the
/// controller's data token `token` (REST `GET /api/v1/jobs/{id}/outputs`
/// gives it, as hex for ParseDataToken, to authorised callers). Each fetch counts
/// as one read of those outputs: the worker frees them after their last
/// consumer's read; a job's final outputs stay until the job is forgotten.
/// NotFound when the worker does not hold them, PermissionDenied when it
/// refuses the token, Unavailable when it does not answer within
/// `timeout_ms`, Corruption for a malformed reply.
///
/// @code
///   hmpmd::DataToken token = hmpmd::ParseDataToken(outputs_json["data_token"]).value();
///   auto outputs = hmpmd::worker::FetchOutputs("tcp://10.0.0.7:40123", token, 3, 5, 10000);
///   if (outputs.ok()) std::printf("%zu buffers\n", outputs->size());
/// @endcode
HMPMD_WORKER_EXPORT Result<std::vector<Buffer>> FetchOutputs(const std::string& endpoint,
                                                             const DataToken& token, JobId job,
                                                             uint32_t run, int64_t timeout_ms);

}  // namespace hmpmd::worker
