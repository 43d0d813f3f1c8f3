#include "lane.h"

#include <pthread.h>
#include <unistd.h>

#include <algorithm>
#include <exception>
#include <memory>
#include <mutex>
#include <span>
#include <stdexcept>
#include <utility>
#include <vector>

#include "clock.h"
#include "collective_kernels.h"
#include "hmpmd/protocol/data_frames.h"

namespace hmpmd::worker {
namespace {

// Looks the task's actor state up the first time its kernel asks, so tasks
// that never use state cost nothing; holds it while the kernel runs.
class LazyActorState final : public ActorStateProvider {
 public:
  LazyActorState(ActorStates* states, const TaskAssign& task) : states_(states), task_(task) {}
  ActorState& Get() const override {
    std::call_once(once_, [this] { held_ = states_->For(task_.job, task_.submodel); });
    return *held_;
  }

 private:
  ActorStates* const states_;
  const TaskAssign& task_;
  mutable std::once_flag once_;
  mutable std::shared_ptr<ActorState> held_;
};

}  // namespace

Lane::Lane(CoreKind kind, uint32_t index, CompletionQueue* done, DataPlane* data,
           spdlog::logger* log, int exec_log_fd)
    : kind_(kind),
      index_(index),
      name_(std::string(CoreKindName(kind)) + std::to_string(index)),
      done_(done),
      data_(data),
      log_(log),
      exec_log_fd_(exec_log_fd),
      thread_([this] { Loop(); }) {
  // Named threads show up as such in top, perf and gdb (15 chars at most).
  std::string thread_name = ("hmpmd-" + name_).substr(0, 15);
  pthread_setname_np(thread_.native_handle(), thread_name.c_str());
}

Lane::~Lane() { Stop(); }

void Lane::Push(LaneTask task) {
  bool was_empty;
  {
    MutexLock lock(&mu_);
    was_empty = queue_.empty();
    queue_.push_back(std::move(task));
  }
  // The lane waits only on an empty queue; a busy lane needs no futex wake.
  if (was_empty) cv_.Signal();
}

size_t Lane::CancelJob(JobId job) {
  std::vector<uint64_t> gangs;
  size_t dropped;
  {
    MutexLock lock(&mu_);
    if (running_job_ == job) {
      cancel_running_.store(true, std::memory_order_relaxed);
      drop_running_ = true;
    }
    dropped = std::erase_if(queue_, [&](const LaneTask& t) {
      if (t.assign.job != job) return false;
      if (!t.assign.gang.endpoints.empty()) gangs.push_back(t.assign.gang.tag);
      return true;
    });
  }
  for (uint64_t tag : gangs) data_->CloseGang(tag);
  return dropped;
}

size_t Lane::CancelRun(JobId job, uint32_t run) {
  std::vector<uint64_t> gangs;
  size_t dropped;
  {
    MutexLock lock(&mu_);
    if (running_job_ == job && running_run_ == run) {
      cancel_running_.store(true, std::memory_order_relaxed);
      drop_running_ = true;
    }
    dropped = std::erase_if(queue_, [&](const LaneTask& t) {
      if (t.assign.job != job || t.assign.task != run) return false;
      if (!t.assign.gang.endpoints.empty()) gangs.push_back(t.assign.gang.tag);
      return true;
    });
  }
  // The peers of a member that never ran may have sent it frames already.
  for (uint64_t tag : gangs) data_->CloseGang(tag);
  return dropped;
}

bool Lane::Started(HeldTask* out) const {
  MutexLock lock(&mu_);
  if (running_job_ == 0 || drop_running_) return false;  // cancelled: no one's run
  *out = HeldTask{running_job_, running_run_, running_attempt_, kind_, index_};
  return true;
}

size_t Lane::Stop() {
  size_t dropped;
  {
    MutexLock lock(&mu_);
    stop_ = true;
    cancel_running_.store(true, std::memory_order_relaxed);  // a long kernel ends soon
    dropped = queue_.size();
    queue_.clear();
  }
  cv_.SignalAll();
  if (thread_.joinable()) thread_.join();
  return dropped;
}

void Lane::Loop() {
  for (;;) {
    LaneTask task;
    {
      MutexLock lock(&mu_);
      while (!stop_ && queue_.empty()) cv_.Wait(&mu_);
      if (stop_) return;
      task = std::move(queue_.front());
      queue_.pop_front();
      running_job_ = task.assign.job;
      running_run_ = task.assign.task;
      running_attempt_ = task.assign.attempt;
      cancel_running_.store(false, std::memory_order_relaxed);
      drop_running_ = false;
    }
    TaskResult result = Execute(task);
    // However it ended (even before its Communicator existed: an input
    // failed, it was cancelled), its gang's frames are of no further use.
    if (!task.assign.gang.endpoints.empty()) data_->CloseGang(task.assign.gang.tag);
    bool unwanted;
    {
      MutexLock lock(&mu_);
      running_job_ = 0;
      unwanted = drop_running_;
    }
    if (ran_.size() == kRanKept) ran_.pop_front();
    ran_.push_back(
        {result.job, result.task, result.ok, result.output_bytes, result.output_buffers});
    if (unwanted) {
      done_->PushUnwanted();
    } else {
      done_->Push(std::move(result));
    }
  }
}

TaskResult Lane::Execute(const LaneTask& task) {
  TaskResult r;
  r.job = task.assign.job;
  r.task = task.assign.task;
  r.attempt = task.assign.attempt;
  r.start_us = NowUs();
  // Kernels are user code that reports failure by throwing: this is the
  // adapter where those exceptions stop.
  // Inputs first: one that cannot be read fails the task, naming it
  // (lost_inputs), and the kernel does not run on a partial input list.
  uint32_t lost = 0;
  std::vector<InputRef> resolved;  // a copy only where some input was produced ahead
  const bool any_ahead =
      std::any_of(task.assign.inputs.begin(), task.assign.inputs.end(),
                  [](const InputRef& in) { return in.bytes == InputRef::kAhead; });
  if (any_ahead && !ResolveAhead(task.assign, &resolved, &lost)) {
    r.ok = false;
    r.error = "input: run " + std::to_string(lost) + ", queued ahead of this task on " + name_ +
              ", did not succeed there";
    r.lost_inputs.push_back(lost);
    r.inputs_gone = true;  // this worker's store has no outputs of it: no attempt lost
    r.end_us = NowUs();
    log_->debug("{}: job {} task {} attempt {}: {}", name_, r.job, r.task, r.attempt, r.error);
    return r;
  }
  // Inputs produced ahead resolve to this worker's own endpoint, which the
  // fetcher skips, so their positions in task.inputs_ahead still match.
  Result<InputSet> inputs =
      data_->GatherInputs(r.job, any_ahead ? resolved : task.assign.inputs, &task.inputs_ahead,
                          &cancel_running_, &r.lost_inputs);
  if (!inputs.ok()) {
    r.ok = false;
    r.error = inputs.status().message();
    r.inputs_gone = !r.lost_inputs.empty() && inputs.status().code() == StatusCode::kNotFound;
    r.end_us = NowUs();
    log_->debug("{}: job {} task {} attempt {}: {} input(s) lost: {}", name_, r.job, r.task,
                r.attempt, r.lost_inputs.size(), r.error);
    return r;
  }
  if (!LoadState(task.assign, &r)) return r;
  // Shared, so that a kernel may keep views of its inputs past the call
  // (KernelArgs::inputs_keeper: the Python worker's zero-copy arrays).
  auto held = std::make_shared<const InputSet>(std::move(inputs).value());
  // Shared too: a Python kernel's ctx.log may outlive the call.
  auto log = std::make_shared<TaskLog>();
  try {
    BufferList outputs = RunKernel(task, held->buffers(), held, log);
    // Refused here, where the task fails naming its kernel, rather than at
    // each worker that fetches them (which would rerun it to no end).
    if (Status meta = CheckOutputMeta(outputs); !meta.ok()) {
      throw std::runtime_error("kernel '" + task.assign.kernel + "' returned " + meta.message());
    }
    r.output_bytes = ObjectStore::BytesOf(outputs);
    r.output_buffers = static_cast<uint32_t>(outputs.size());
    // No buffers: nothing to keep (consumers skip a producer that kept none).
    // Empty buffers are kept: their shapes and positions reach consumers.
    if (!outputs.empty() && task.assign.reads != TaskAssign::kDropOutputs) {
      Status kept = data_->store().Put(r.job, r.task, std::move(outputs), task.assign.reads);
      if (!kept.ok()) throw std::runtime_error(kept.message());
    }
  } catch (const CollectiveError& e) {
    r.ok = false;
    r.error = e.what();
    r.retryable = e.retryable();
  } catch (const std::exception& e) {
    r.ok = false;
    r.error = e.what();
    if (r.error.empty()) r.error = "kernel '" + task.assign.kernel + "' threw an empty exception";
  } catch (...) {
    r.ok = false;
    r.error = "kernel '" + task.assign.kernel + "' threw a non-standard exception";
  }
  r.log = log->Take();
  if (task.assign.keeps_state) {
    r.state_held = data_->actor_states().Find(r.job, task.assign.submodel) != nullptr;
  }
  r.end_us = NowUs();
  if (r.ok && exec_log_fd_ >= 0) {
    // One write() of a short line to an O_APPEND file does not interleave.
    std::string line = std::to_string(r.job) + " " + std::to_string(r.task) + " " +
                       std::to_string(r.attempt) + " " + std::to_string(::getpid()) + "\n";
    if (::write(exec_log_fd_, line.data(), line.size()) < 0) {
      log_->warn("{}: exec log write failed", name_);
    }
  }
  if (!r.ok) {
    log_->debug("{}: job {} task {} attempt {} ({}) failed: {}", name_, r.job, r.task, r.attempt,
                task.assign.kernel, r.error);
  }
  return r;
}

bool Lane::LoadState(const TaskAssign& a, TaskResult* r) const {
  if (!a.keeps_state || a.state_from.empty()) return true;
  // Begun ahead when the task was pushed (DataPlane::PrefetchState), else
  // here; either way the load's own span is reported, which may end
  // before this run started (hidden under the tasks ahead of it).
  StateLoader& loader = data_->state_loader();
  std::optional<StateLoader::Outcome> ahead = loader.Take(a.job, a.submodel, &cancel_running_);
  const StateLoader::Outcome out =
      ahead ? std::move(*ahead) : loader.LoadNow(a.job, a.submodel, a.state_from);
  if (out.status.ok()) {
    if (out.bytes > 0) {
      r->state_load_start_us = out.start_us;
      r->state_load_end_us = out.end_us;
      r->state_load_bytes = out.bytes;
    }
    return true;
  }
  // The kernel never runs without its state: a holder that died or lost
  // it is the controller's to replace (run again, elsewhere or from
  // another holder); a state that cannot be copied is the job's error.
  r->ok = false;
  r->error = out.status.message();
  r->retryable = out.status.code() != StatusCode::kInvalidArgument;
  r->end_us = NowUs();
  log_->debug("{}: job {} task {} attempt {}: {}", name_, r->job, r->task, r->attempt, r->error);
  return false;
}

bool Lane::ResolveAhead(const TaskAssign& a, std::vector<InputRef>* inputs, uint32_t* lost) const {
  *inputs = a.inputs;
  for (InputRef& in : *inputs) {
    if (in.bytes != InputRef::kAhead) continue;
    // The latest run of it here (a stale attempt may have run before).
    auto it = std::find_if(ran_.rbegin(), ran_.rend(),
                           [&](const Ran& r) { return r.job == a.job && r.run == in.run; });
    if (it == ran_.rend() || !it->ok) {
      *lost = in.run;
      return false;
    }
    in.bytes = it->bytes;
    in.buffers = it->buffers;  // 0: nothing kept, nothing to read
    in.endpoint = data_->endpoint();
  }
  return true;
}

BufferList Lane::RunKernel(const LaneTask& task, std::span<const Buffer> inputs,
                           std::shared_ptr<const void> inputs_keeper,
                           std::shared_ptr<TaskLog> log) {
  const TaskAssign& a = task.assign;
  const LazyActorState state(&data_->actor_states(), a);
  const TaskInfo info{a.job, a.task, a.attempt, a.task_id, a.kernel, a.submodel, kind_, index_};
  const KernelArgs args(a.args, &cancel_running_, &state, &info, std::move(inputs_keeper),
                        std::move(log));
  if (a.kernel == kPutKernel) return data_->FetchPut(a.job, args);
  if (!a.gang.endpoints.empty() && IsCollectiveKernel(a.kernel)) {
    if (a.gang.rank >= a.gang.endpoints.size()) {
      throw std::invalid_argument("gang rank " + std::to_string(a.gang.rank) + " out of range");
    }
    std::unique_ptr<Communicator> comm = data_->MakeCommunicator(a.gang, &cancel_running_);
    return RunCollective(a.kernel, args, inputs, *comm);
  }
  return (*task.kernel)(args, inputs);
}

}  // namespace hmpmd::worker
