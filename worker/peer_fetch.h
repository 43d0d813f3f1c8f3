// PeerFetch: the client side of the data plane's fetch protocol, on a
// caller-supplied ZeroMQ context (the worker's lanes share the worker's).
//
// Thread-safety: safe from any thread; each call opens its own DEALER.
#pragma once

#include <string>
#include <zmq.hpp>

#include "hmpmd/protocol/status.h"
#include "object_store.h"

namespace hmpmd::worker {

Result<BufferList> FetchFromPeer(zmq::context_t* ctx, const std::string& endpoint, JobId job,
                                 uint32_t run, int64_t timeout_us);

}  // namespace hmpmd::worker
