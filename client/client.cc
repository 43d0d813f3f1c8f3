#include "hmpmd/client/client.h"

#include "session.h"

namespace hmpmd::client {

Result<std::unique_ptr<Client>> Client::Connect(ClientOptions options) {
  auto session = std::make_shared<internal::Session>(std::move(options));
  RETURN_IF_ERROR(session->Start());
  return std::unique_ptr<Client>(new Client(std::move(session)));
}

Client::Client(std::shared_ptr<internal::Session> session) : session_(std::move(session)) {}

Client::~Client() {
  if (session_) (void)Abort();
}

Result<Future> Client::Submit(Call call) {
  RETURN_IF_ERROR(internal::RefuseLoneMember(call));
  std::vector<Call> calls;
  calls.push_back(std::move(call));
  ASSIGN_OR_RETURN(std::vector<Future> out, session_->Submit(std::move(calls)));
  return out.front();
}

Result<std::vector<Future>> Client::SubmitGraph(std::vector<Call> calls) {
  return session_->Submit(std::move(calls));
}

Result<Future> Client::Put(std::vector<Buffer> data, CoreKind core) {
  return session_->Put(std::move(data), core);
}

Result<Actor> Client::CreateActor(ActorOptions options) {
  RETURN_IF_ERROR(session_->AddActor(options));
  return Actor(session_, std::move(options));
}

Result<size_t> Client::WaitAny(std::span<const Future> futures, int64_t timeout_ms) {
  return session_->WaitAny(futures, timeout_ms);
}

Status Client::Cancel(const Future& future) {
  const internal::FutureState* f = internal::Session::StateOf(future);
  if (f == nullptr) return Status::InvalidArgument("cancel: an empty Future");
  return session_->Cancel(*f);
}

Status Client::Close() {
  BeginClose(CloseMode::kFinish, session_->options().close_timeout_ms);
  return *PollClose(kForever);
}

Status Client::Abort() {
  BeginClose(CloseMode::kAbort, session_->options().close_timeout_ms);
  return *PollClose(kForever);
}

void Client::BeginClose(CloseMode mode, int64_t timeout_ms) {
  session_->BeginClose(mode == CloseMode::kAbort, timeout_ms);
}

std::optional<Status> Client::PollClose(int64_t wait_ms) { return session_->PollClose(wait_ms); }

JobId Client::job() const { return session_->job(); }

const DataToken& Client::data_token() const { return session_->data_token(); }

const std::string& Client::session() const { return session_->options().session; }

const ClientOptions& Client::options() const { return session_->options(); }

uint64_t Client::in_flight() const { return session_->in_flight(); }

}  // namespace hmpmd::client
