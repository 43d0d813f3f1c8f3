#include "hmpmd/client/actor.h"

#include "session.h"

namespace hmpmd::client {

Result<Future> Actor::Call(std::string method_kernel, client::Call call) const {
  if (!session_) return Status::InvalidArgument("actor: an empty Actor");
  RETURN_IF_ERROR(internal::RefuseLoneMember(call));
  call.kernel = std::move(method_kernel);
  call.actor = options_.name;
  std::vector<client::Call> calls;
  calls.push_back(std::move(call));
  ASSIGN_OR_RETURN(std::vector<Future> out, session_->Submit(std::move(calls)));
  return out.front();
}

}  // namespace hmpmd::client
