#include "hmpmd/client/future.h"

#include <chrono>

#include "hmpmd/client/fetch.h"
#include "session.h"

namespace hmpmd::client {
namespace {

Status Empty() { return Status::InvalidArgument("an empty Future"); }

}  // namespace

bool Future::ready() const { return state_ && state_->session->Ready(*state_); }

Status Future::Wait(int64_t timeout_ms) const {
  if (!state_) return Empty();
  return state_->session->Wait(*state_, timeout_ms);
}

Result<std::vector<Buffer>> Future::Get(int64_t timeout_ms) const {
  if (!state_) return Empty();
  const auto start = std::chrono::steady_clock::now();
  RETURN_IF_ERROR(Wait(timeout_ms));
  std::string endpoint;
  uint64_t bytes = 0;
  uint32_t buffers = 0;
  RETURN_IF_ERROR(state_->session->Outcome(*state_, &endpoint, &bytes, &buffers));
  // None kept; empty buffers are fetched, for their shapes and count.
  if (endpoint.empty() || (bytes == 0 && buffers == 0)) return std::vector<Buffer>{};
  int64_t left = state_->session->options().fetch_timeout_ms;
  if (timeout_ms >= 0) {
    const int64_t spent = std::chrono::duration_cast<std::chrono::milliseconds>(
                              std::chrono::steady_clock::now() - start)
                              .count();
    // fetch_timeout_ms -1 means no limit, not the smallest one: Get(3000)
    // still times out after 3 s.
    const int64_t remaining = std::max<int64_t>(1, timeout_ms - spent);
    left = left < 0 ? remaining : std::min(left, remaining);
  }
  int64_t index;
  {
    // Set once by the ack, before the task could end.
    index = state_->index;
  }
  auto out = FetchOutputs(endpoint, state_->session->data_token(), state_->session->job(),
                          static_cast<uint32_t>(index), left);
  if (!out.ok()) {
    return Status(out.status().code(), "task '" + state_->label + "': " + out.status().message());
  }
  return out;
}

const std::string& Future::label() const {
  static const std::string kNone;
  return state_ ? state_->label : kNone;
}

JobId Future::job() const { return state_ ? state_->session->job() : 0; }

bool Future::is_put() const { return state_ != nullptr && state_->put >= 0; }

uint64_t Future::output_bytes() const {
  if (!state_) return 0;
  std::string endpoint;
  uint64_t bytes = 0;
  (void)state_->session->Outcome(*state_, &endpoint, &bytes);
  return bytes;
}

}  // namespace hmpmd::client
