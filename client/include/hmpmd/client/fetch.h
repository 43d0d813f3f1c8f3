// FetchOutputs: reads a task run's outputs straight from the worker that
// holds them, over that worker's data socket (the data plane).
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

namespace hmpmd::client {

/// The outputs of run `run` of job `job`, fetched from the worker whose data
/// endpoint is `endpoint` (as the controller reports it), carrying the
/// controller's data token `token` (Client::data_token(), or REST
/// `GET /api/v1/jobs/{id}/outputs` `data_token` through ParseDataToken).
/// A job's final outputs and a session's outputs stay on the worker after
/// the fetch. NotFound when the worker does not hold them,
/// PermissionDenied when it refuses the token, Unavailable when it does not
/// answer within `timeout_ms`, Corruption for a malformed reply.
///
/// @code
///   auto outputs =
///       hmpmd::client::FetchOutputs("tcp://10.0.0.7:40123", client.data_token(), 3, 5, 10000);
///   if (outputs.ok()) std::printf("%zu buffers\n", outputs->size());
/// @endcode
Result<std::vector<Buffer>> FetchOutputs(const std::string& endpoint, const DataToken& token,
                                         JobId job, uint32_t run, int64_t timeout_ms);

}  // namespace hmpmd::client
