// Session: the calls users make through Client, Future and Actor (the I/O
// thread is in session_io.cc).
#include "session.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <string_view>
#include <utility>
#include <variant>

#include "hmpmd/protocol/data_frames.h"
#include "hmpmd/protocol/job_spec.h"
#include "hmpmd/protocol/local_address.h"
#include "hmpmd/protocol/one_line.h"
#include "hmpmd/protocol/types.h"

namespace hmpmd::client::internal {

FutureState::~FutureState() { session->Dropped(*this); }

Session::Session(ClientOptions options) : options_(std::move(options)) {}

Session::~Session() {
  stop_ = true;
  if (io_.joinable()) {
    Wake();
    io_.join();
  }
  if (wake_fd_ >= 0) ::close(wake_fd_);
}

FutureState* Session::StateOf(const Future& f) { return f.state_.get(); }

Status RefuseLoneMember(const Call& call) {
  if (!call.collective) return Status::Ok();
  return Status::InvalidArgument(
      "call" + (call.label.empty() ? std::string() : " '" + OneLine(call.label, 256) + "'") +
      ": collective: a member of group '" + OneLine(call.collective->group, 256) +
      "' goes in one submit_graph / SubmitGraph() with the rest of its group");
}

namespace {

std::string WireSize(size_t bytes) {
  if (bytes % (size_t{1} << 20) == 0) return std::to_string(bytes >> 20) + " MiB";
  return std::to_string(bytes) + " bytes";
}

}  // namespace

Status CheckWireString(const std::string& field, std::string_view text) {
  if (text.size() <= kWireLimits.max_string) return Status::Ok();
  return Status::InvalidArgument(field + ": " + std::to_string(text.size()) + " bytes, over the " +
                                 WireSize(kWireLimits.max_string) + " a string may hold");
}

namespace {

// A call over a limit of the controller's decoder (kWireLimits): its whole
// message was dropped there, with the tasks sent beside it.
Status CheckWireLimits(const Call& c, const std::string& where) {
  for (const auto& [field, text] :
       {std::pair{"kernel", &c.kernel}, {"label", &c.label}, {"actor", &c.actor}}) {
    RETURN_IF_ERROR(CheckWireString(where + ": " + field, *text));
  }
  if (c.collective) {
    RETURN_IF_ERROR(CheckWireString(where + ": collective.group", c.collective->group));
    RETURN_IF_ERROR(CheckWireString(where + ": collective.op", c.collective->op));
  }
  if (c.args.size() > kWireLimits.max_args) {
    return Status::InvalidArgument(where + ": args: " + std::to_string(c.args.size()) +
                                   " arguments, over the " + std::to_string(kWireLimits.max_args) +
                                   " a task may have");
  }
  for (const Arg& a : c.args) {
    const std::string field = where + ": args['" + OneLine(a.name, 256) + "']";
    RETURN_IF_ERROR(CheckWireString(field + " (its name)", a.name));
    if (const auto* text = std::get_if<std::string>(&a.value)) {
      RETURN_IF_ERROR(CheckWireString(field, *text));
    }
  }
  if (c.inputs.size() > kWireLimits.max_batch) {
    return Status::InvalidArgument(where + ": inputs: " + std::to_string(c.inputs.size()) +
                                   " inputs, over the " + std::to_string(kWireLimits.max_batch) +
                                   " a task may have");
  }
  return Status::Ok();
}

}  // namespace

Result<std::vector<Future>> Session::Submit(std::vector<Call> calls) {
  if (calls.empty()) return Status::InvalidArgument("submit: no calls");
  // One group is one message: the controller takes at most max_batch tasks
  // in it.
  if (calls.size() > kWireLimits.max_batch) {
    return Status::InvalidArgument("submit: " + std::to_string(calls.size()) + " calls, over the " +
                                   std::to_string(kWireLimits.max_batch) +
                                   " one submit may hold; split the graph");
  }
  std::vector<Future> out;
  {
    std::unique_lock lock(mu_);
    if (closing_) return Status::InvalidArgument("submit: the session is closed");
    // Ended by the controller, or lost with it: the session is gone, not
    // the call bad (a retry on ConnectionError in Python catches this).
    if (closed_) return Status::Unavailable("submit: " + end_why_);
    // Check every call before queueing any.
    std::set<std::string> fresh;
    for (size_t i = 0; i < calls.size(); ++i) {
      const Call& c = calls[i];
      // The label as given, escaped: it may hold the control characters
      // refused just below.
      const std::string where =
          "call " + std::to_string(i) + (c.label.empty() ? "" : " '" + OneLine(c.label, 256) + "'");
      if (c.kernel.empty()) return Status::InvalidArgument(where + ": kernel: empty");
      RETURN_IF_ERROR(CheckWireLimits(c, where));
      // Checked here, not only by the controller: a refused label failed
      // its task later, and its consumers as "unknown task".
      for (const auto& [field, text] : {std::pair{"kernel", &c.kernel}, {"label", &c.label}}) {
        if (std::string ch = FirstControlChar(*text); !ch.empty()) {
          return Status::InvalidArgument(where + ": " + field +
                                         ": contains the control character " + ch);
        }
      }
      for (const auto& [field, value] :
           {std::pair{"cost.flops", c.cost.flops}, {"cost.bytes", c.cost.bytes}}) {
        if (!(std::isfinite(value) && value >= 0)) {
          return Status::InvalidArgument(where + ": " + field + ": must be a finite number >= 0");
        }
      }
      if (!c.label.empty()) {
        if (c.label.find('/') != std::string::npos) {
          return Status::InvalidArgument(where + ": label: must not contain '/'");
        }
        if (labels_.count(c.label) || !fresh.insert(c.label).second) {
          return Status::InvalidArgument(where + ": label: duplicate '" + c.label +
                                         "' in this session");
        }
      }
      if (!c.actor.empty() && c.actor != "default" && !actors_.count(c.actor)) {
        return Status::InvalidArgument(where + ": actor: unknown actor '" + OneLine(c.actor, 256) +
                                       "' (CreateActor first)");
      }
      if (auto bad = refused_.find(c.actor); bad != refused_.end()) {
        return Status::InvalidArgument(where + ": actor: '" + c.actor +
                                       "' was refused by the controller: " + bad->second);
      }
      for (size_t k = 0; k < c.inputs.size(); ++k) {
        const FutureState* in = StateOf(c.inputs[k]);
        if (in == nullptr) {
          return Status::InvalidArgument(where + ": inputs[" + std::to_string(k) +
                                         "]: an empty Future");
        }
        if (in->session.get() != this) {
          return Status::InvalidArgument(where + ": inputs[" + std::to_string(k) + "]: task '" +
                                         in->label + "' belongs to another session (job " +
                                         std::to_string(in->session->job()) + ")");
        }
      }
    }
    // The group is built before anything is committed: it may be over the
    // bytes one message may hold.
    SubmitGroup group;
    uint64_t next_auto = submitted_;
    for (Call& c : calls) {
      std::string label = std::move(c.label);
      while (label.empty()) {
        std::string auto_label = "t" + std::to_string(next_auto);
        if (!labels_.count(auto_label) && !fresh.count(auto_label)) label = auto_label;
        ++next_auto;
      }
      WireTask t;
      t.id = std::move(label);
      t.submodel = c.actor.empty() ? "default" : std::move(c.actor);
      t.kernel = std::move(c.kernel);
      t.core = c.core;
      for (const Future& in : c.inputs) t.inputs.push_back(StateOf(in)->label);
      t.args = std::move(c.args);
      t.flops = c.cost.flops;
      t.bytes = c.cost.bytes;
      if (c.collective) {
        t.group = c.collective->group;
        t.op = c.collective->op;
        t.group_bytes = c.collective->bytes;
      }
      t.max_retries = c.max_retries;
      t.retry_on = std::move(c.retry_on);
      for (auto& [key, value] : c.required) t.required.push_back({key, value});
      group.tasks.push_back(std::move(t));
    }
    if (const size_t bytes = kSubmitHeadBytes + EncodedSize(group);
        bytes > kWireLimits.max_body_bytes) {
      return Status::InvalidArgument("submit: " + std::to_string(calls.size()) +
                                     " calls of about " + std::to_string(bytes >> 20) +
                                     " MiB, over the " + WireSize(kWireLimits.max_body_bytes) +
                                     " one submit may hold; split the graph");
    }
    submitted_ = next_auto;
    group.seq = next_seq_++;
    std::vector<std::weak_ptr<FutureState>>& members = unacked_[group.seq];
    for (const WireTask& t : group.tasks) {
      labels_.insert(t.id);
      auto state = std::make_shared<FutureState>(shared_from_this(), t.id);
      members.push_back(state);
      out.push_back(Future(std::move(state)));
    }
    outbox_.push_back(std::move(group));
  }
  Wake();
  return out;
}

Status Session::AddActor(const ActorOptions& options) {
  if (options.name.empty()) return Status::InvalidArgument("actor: name: empty");
  if (options.name == "default") return Status::InvalidArgument("actor: name: 'default' is taken");
  if (std::string ch = FirstControlChar(options.name); !ch.empty()) {
    return Status::InvalidArgument("actor: name: contains the control character " + ch);
  }
  RETURN_IF_ERROR(CheckWireString("actor: name", options.name));
  {
    std::lock_guard lock(mu_);
    if (closing_) return Status::InvalidArgument("actor: the session is closed");
    if (closed_) return Status::Unavailable("actor: " + end_why_);
    if (!actors_.insert(options.name).second) {
      return Status::AlreadyExists("actor: name: duplicate '" + options.name + "'");
    }
    SubmitGroup group;
    group.seq = next_seq_++;
    WireSubmodel sm{
        options.name, static_cast<uint8_t>(options.kind), options.devices, options.elastic, {}};
    for (const auto& [key, value] : options.required) sm.required.push_back({key, value});
    group.submodels.push_back(std::move(sm));
    actor_seq_[group.seq] = options.name;  // the ack only reports errors
    outbox_.push_back(std::move(group));
  }
  Wake();
  return Status::Ok();
}

Status Session::StatusOf(const FutureState& f) {
  switch (f.phase) {
    case FutureState::Phase::kPending:
      return Status::DeadlineExceeded("task '" + f.label + "' has not ended");
    case FutureState::Phase::kDone:
      return Status::Ok();
    case FutureState::Phase::kFailed:
      return Status::Aborted("task '" + f.label + "' failed: " + f.error);
    case FutureState::Phase::kCancelled:
      return Status::Cancelled("task '" + f.label + "' cancelled: " + f.error);
    case FutureState::Phase::kRejected:
      return Status::InvalidArgument("task '" + f.label + "' rejected: " + f.error);
    case FutureState::Phase::kLost:
      return Status::Unavailable("task '" + f.label + "': " + f.error);
  }
  return Status::Internal("task '" + f.label + "': unknown state");
}

bool Session::Ready(const FutureState& f) {
  std::lock_guard lock(mu_);
  return Ended(f);
}

Status Session::Wait(const FutureState& f, int64_t timeout_ms) {
  std::unique_lock lock(mu_);
  const auto deadline = Deadline(timeout_ms);
  while (!Ended(f)) {
    if (cv_.wait_until(lock, deadline) == std::cv_status::timeout && !Ended(f)) {
      return Status::DeadlineExceeded("task '" + f.label + "' not ended within " +
                                      std::to_string(timeout_ms) + " ms");
    }
  }
  return StatusOf(f);
}

Status Session::Outcome(const FutureState& f, std::string* endpoint, uint64_t* bytes,
                        uint32_t* buffers) {
  std::lock_guard lock(mu_);
  if (closed_ && f.phase == FutureState::Phase::kDone) {
    return Status::Unavailable("task '" + f.label +
                               "': the session is closed; its outputs are freed");
  }
  if (f.phase == FutureState::Phase::kDone && f.endpoint.empty() &&
      (f.bytes > 0 || f.buffers > 0)) {
    // A resumed session heard it done, but no worker came back with it.
    return Status::Unavailable("task '" + f.label +
                               "': its outputs are held by no live worker (lost with their worker "
                               "while the controller was away)");
  }
  *endpoint = f.endpoint;
  *bytes = f.bytes;
  if (buffers != nullptr) *buffers = f.buffers;
  return StatusOf(f);
}

Result<size_t> Session::WaitAny(std::span<const Future> futures, int64_t timeout_ms) {
  if (futures.empty()) return Status::InvalidArgument("WaitAny: no futures");
  for (size_t i = 0; i < futures.size(); ++i) {
    if (StateOf(futures[i]) == nullptr) {
      return Status::InvalidArgument("WaitAny: futures[" + std::to_string(i) + "] is empty");
    }
    if (StateOf(futures[i])->session.get() != this) {
      return Status::InvalidArgument("WaitAny: futures[" + std::to_string(i) +
                                     "] belongs to another session");
    }
  }
  std::unique_lock lock(mu_);
  const auto deadline = Deadline(timeout_ms);
  for (;;) {
    for (size_t i = 0; i < futures.size(); ++i) {
      if (Ended(*StateOf(futures[i]))) return i;
    }
    if (cv_.wait_until(lock, deadline) == std::cv_status::timeout) {
      for (size_t i = 0; i < futures.size(); ++i) {
        if (Ended(*StateOf(futures[i]))) return i;
      }
      return Status::DeadlineExceeded("WaitAny: none of " + std::to_string(futures.size()) +
                                      " tasks ended within " + std::to_string(timeout_ms) + " ms");
    }
  }
}

Status Session::Cancel(const FutureState& f) {
  if (f.session.get() != this) {
    return Status::InvalidArgument("cancel: task '" + f.label + "' belongs to another session");
  }
  {
    std::unique_lock lock(mu_);
    if (Ended(f)) return Status::Ok();
    if (closed_) return Status::Ok();
    // Its index comes with the ack; wait for it (the I/O thread sends soon).
    // A negative connect_timeout_ms waits as long as the session lives (it
    // fails every pending future when the controller goes silent).
    const auto deadline = Deadline(options_.connect_timeout_ms);
    while (f.index < 0 && !Ended(f)) {
      if (cv_.wait_until(lock, deadline) == std::cv_status::timeout && f.index < 0 && !Ended(f)) {
        return Status::Unavailable("cancel: task '" + f.label + "' not acknowledged");
      }
    }
    if (Ended(f)) return Status::Ok();
    f.cancelling = true;
    cancel_.push_back(static_cast<uint32_t>(f.index));
  }
  Wake();
  return Status::Ok();
}

Result<Future> Session::Put(std::vector<Buffer> data, CoreKind core) {
  if (Status meta = CheckOutputMeta(data); !meta.ok()) {
    return Status::InvalidArgument("put: " + meta.message());
  }
  ASSIGN_OR_RETURN(PutServer * server, DataServer());
  uint64_t bytes = 0;
  for (const Buffer& b : data) bytes += b.data.size();
  const uint32_t id = server->Add(std::move(data));
  Call call;
  call.kernel = std::string(kPutKernel);
  call.core = core;
  call.args = {{"endpoint", server->endpoint()},
               {"put", int64_t{id}},
               {"bytes", static_cast<int64_t>(bytes)}};
  call.cost.bytes = static_cast<double>(bytes);
  std::vector<Call> calls;
  calls.push_back(std::move(call));
  Result<std::vector<Future>> submitted = Submit(std::move(calls));
  if (!submitted.ok()) {
    server->Erase(id);
    return submitted.status();
  }
  Future f = submitted->front();
  f.state_->put = id;
  {
    // Until its task has ended, the put holds itself: a driver may drop the
    // Future once it passed it to consumers, before any worker fetched it.
    std::lock_guard lock(mu_);
    if (!Ended(*f.state_)) pinned_puts_.push_back(f.state_);
  }
  return f;
}

void Session::Dropped(FutureState& f) {
  if (f.put >= 0) {
    std::lock_guard lock(puts_mu_);
    if (puts_ != nullptr) puts_->Erase(static_cast<uint32_t>(f.put));
  }
  {
    std::lock_guard lock(mu_);
    if (f.index < 0 || closed_) return;  // not acked yet: HandleUpdate releases it
    release_.push_back(static_cast<uint32_t>(f.index));
  }
  Wake();
}

uint64_t Session::in_flight() {
  std::lock_guard lock(mu_);
  return labels_.size() > ended_ ? labels_.size() - ended_ : 0;
}

void Session::EndPending(FutureState::Phase phase, const std::string& why,
                         std::vector<std::shared_ptr<FutureState>>* keep) {
  auto end = [&](const std::weak_ptr<FutureState>& w) {
    if (auto f = w.lock()) {
      if (!Ended(*f)) {
        f->phase = phase;
        f->error = why;
      }
      keep->push_back(std::move(f));
    }
  };
  for (auto& w : tasks_) end(w);
  for (auto& [seq, members] : unacked_) {
    for (auto& w : members) end(w);
  }
  UnpinEndedPuts(keep);
  // Groups not sent: their Futures are handed out, their states not yet
  // listed anywhere but in the group's own seq (unacked_ above).
  unacked_.clear();
  outbox_.clear();
  end_why_ = why;
}

Result<PutServer*> Session::DataServer() {
  std::lock_guard lock(puts_mu_);
  if (puts_ == nullptr) {
    auto made = std::make_unique<PutServer>(
        job_, data_token_, [this](RunDoneNotice notice) { OnRunDone(std::move(notice)); });
    const std::string host =
        options_.data_host.empty() ? LocalAddressFor(controller_) : options_.data_host;
    RETURN_IF_ERROR(made->Start(host));
    puts_ = std::move(made);
  }
  return puts_.get();
}

void Session::OnRunDone(RunDoneNotice notice) {
  std::vector<std::shared_ptr<FutureState>> keep;  // destroyed unlocked
  {
    std::lock_guard lock(mu_);
    for (const RunDone& done : notice.runs) {
      if (done.run < tasks_.size()) {
        ApplyRunDone(done, notice.endpoint, &keep);
      } else if (early_done_.size() < kMaxEarlyDone) {
        early_done_[done.run] = {done, notice.endpoint};
      }
    }
  }
  cv_.notify_all();
}

void Session::ApplyRunDone(const RunDone& done, const std::string& endpoint,
                           std::vector<std::shared_ptr<FutureState>>* keep) {
  const uint32_t index = done.run;
  std::shared_ptr<FutureState> f = tasks_[index].lock();
  // The controller's outcome of a cancel already asked for wins.
  if (f == nullptr || f->cancelling) return;
  if (Ended(*f)) {
    // Done again: its outputs were rebuilt there after their worker died
    // (a consumer needed them), as the controller's word would say; the
    // consumer's own word may come before the controller's. An end other
    // than done that the controller told stays.
    if (f->phase == FutureState::Phase::kDone) {
      f->endpoint = endpoint;
      f->bytes = done.bytes;
      f->buffers = done.buffers;
    }
    return;
  }
  if (!ended_at_[index]) {
    ended_at_[index] = true;
    ++ended_;
  }
  f->phase = FutureState::Phase::kDone;
  f->endpoint = endpoint;
  f->bytes = done.bytes;
  f->buffers = done.buffers;
  keep->push_back(std::move(f));
}

void Session::UnpinEndedPuts(std::vector<std::shared_ptr<FutureState>>* keep) {
  std::erase_if(pinned_puts_, [&](std::shared_ptr<FutureState>& f) {
    if (!Ended(*f)) return false;
    keep->push_back(std::move(f));
    return true;
  });
}

void Session::BeginClose(bool abort, int64_t timeout_ms) {
  std::vector<std::shared_ptr<FutureState>> keep;  // destroyed unlocked
  {
    std::lock_guard lock(mu_);
    if (stopped_) return;
    const bool first = !closing_;
    closing_ = true;
    close_deadline_ = Deadline(timeout_ms);
    close_timeout_ms_ = timeout_ms;
    if (closed_) return;
    if (!abort) {
      if (first) close_ = SessionControl::kClose;
    } else if (!aborted_) {
      aborted_ = true;
      close_ = SessionControl::kAbort;
      // Nothing is waited for: what was not sent never is, and every
      // Future not ended ends now (the controller cancels the rest).
      EndPending(FutureState::Phase::kCancelled, "the session was aborted", &keep);
      ended_ = labels_.size();
    }
  }
  cv_.notify_all();
  Wake();
}

std::optional<Status> Session::PollClose(int64_t wait_ms) {
  std::vector<std::shared_ptr<FutureState>> keep;  // destroyed unlocked
  std::unique_lock lock(mu_);
  if (!closing_) return Status::InvalidArgument("close: PollClose() before BeginClose()");
  if (stopped_) return final_;
  // One caller stops the I/O thread; the others (a second thread, or
  // ~Client after Close()) wait for it and return its status. Both used
  // to join the thread: the second hung for ever.
  // The close's deadline is read anew on each wake-up: another thread's
  // BeginClose() may move it (an abort that stops waiting at once).
  const auto until = Deadline(wait_ms);
  while (!closed_ && !stopping_) {
    const auto now = std::chrono::steady_clock::now();
    if (now >= close_deadline_) {
      closed_ = true;
      final_ = Status::DeadlineExceeded("close: the controller did not end session '" +
                                        options_.session + "' within " +
                                        std::to_string(close_timeout_ms_) + " ms");
      // Every Future not ended is lost, as when the controller closes the
      // session (Wait() on one not acknowledged or not sent hung).
      EndPending(FutureState::Phase::kLost, "the session was closed", &keep);
      break;
    }
    if (now >= until) return std::nullopt;
    cv_.wait_until(lock, std::min(until, close_deadline_));
  }
  if (stopping_) {
    cv_.wait(lock, [&] { return stopped_; });  // the I/O thread stops at once
    return final_;
  }
  stopping_ = true;
  lock.unlock();
  cv_.notify_all();
  stop_ = true;
  Wake();
  io_.join();
  {
    // Its thread tells of runs done (OnRunDone), and what it lets go may be
    // the last reference to this session once the client is gone: a
    // session destroyed on that thread would join it from itself. So it
    // stops here, on the closing thread, with the I/O thread.
    std::lock_guard puts_lock(puts_mu_);
    if (puts_ != nullptr) puts_->Stop();
  }
  lock.lock();
  stopped_ = true;
  cv_.notify_all();
  return final_;
}

}  // namespace hmpmd::client::internal
