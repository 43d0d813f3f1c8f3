#include "data_plane.h"

#include <map>
#include <optional>
#include <stdexcept>
#include <string>
#include <unordered_map>
#include <utility>

#include "hmpmd/protocol/tensor_bytes.h"
#include "peer_fetch.h"

namespace hmpmd::worker {
namespace {

// A task may name one input twice (`add` of x and x): each run is fetched
// and read once (one read of its producer's count), and handed to the
// kernel as often as it is named. For each named input, the index of its
// run among the distinct ones (first-seen order); empty when every run is
// named once, the common case, which costs no copy.
std::vector<size_t> RepeatSlots(const std::vector<InputRef>& named) {
  constexpr size_t kScanUpTo = 16;  // a pairwise scan without allocating
  const size_t n = named.size();
  std::vector<size_t> slot;
  if (n < 2) return slot;
  if (n <= kScanUpTo) {
    bool repeats = false;
    for (size_t i = 1; i < n && !repeats; ++i) {
      for (size_t j = 0; j < i && !repeats; ++j) repeats = named[i].run == named[j].run;
    }
    if (!repeats) return slot;
  }
  std::unordered_map<uint32_t, size_t> seen;
  seen.reserve(n);
  slot.reserve(n);
  for (const InputRef& in : named) {
    const size_t next = seen.size();
    slot.push_back(seen.try_emplace(in.run, next).first->second);
  }
  if (seen.size() == n) slot.clear();
  return slot;
}

std::vector<InputRef> Distinct(const std::vector<InputRef>& named,
                               const std::vector<size_t>& slot) {
  std::vector<InputRef> out;
  for (size_t i = 0; i < named.size(); ++i) {
    if (slot[i] == out.size()) out.push_back(named[i]);
  }
  return out;
}

}  // namespace

InputSet::~InputSet() { RecycleTensorBytes(std::span<Buffer>(owned_)); }

DataPlane::DataPlane(DataPlaneOptions options, spdlog::logger* log)
    : options_(std::move(options)),
      log_(log),
      ctx_(1),
      store_(options_.cap_bytes),
      // Every peer waiting on this worker has given up long before this.
      inbox_(CollectiveInboxOptions{
          .expire_us = 4 * options_.timeout_us, .cap_bytes = options_.cap_bytes, .log = log}),
      server_(&store_, &actor_states_, &inbox_, &tokens_, log),
      fetcher_(
          &ctx_, &store_, &tokens_,
          InputFetcherOptions{options_.cap_bytes, options_.prefetch_bytes, options_.timeout_us}),
      state_loader_([this](JobId job, const std::string& submodel,
                           const std::string& from) { return LoadState(job, submodel, from); },
                    [this](JobId job) { actor_states_.FreeJob(job); }) {}

DataPlane::~DataPlane() { Stop(); }

Status DataPlane::Start() {
  RETURN_IF_ERROR(server_.Bind(options_.host));
  log_->info("data socket on {}", server_.endpoint());
  return Status::Ok();
}

void DataPlane::Stop() {
  state_loader_.Stop();
  fetcher_.Stop();
  server_.Stop();
}

PrefetchedInputs DataPlane::PrefetchInputs(const TaskAssign& task) {
  const std::vector<size_t> slot = RepeatSlots(task.inputs);
  if (slot.empty()) return fetcher_.Begin(task.job, task.inputs, server_.endpoint());
  return fetcher_.Begin(task.job, Distinct(task.inputs, slot), server_.endpoint());
}

Result<InputSet> DataPlane::GatherInputs(JobId job, const std::vector<InputRef>& named,
                                         const PrefetchedInputs* ahead,
                                         const std::atomic<bool>* cancelled,
                                         std::vector<uint32_t>* lost_runs) {
  const std::vector<size_t> slot = RepeatSlots(named);
  std::vector<InputRef> distinct;
  if (!slot.empty()) distinct = Distinct(named, slot);
  const std::vector<InputRef>& inputs = slot.empty() ? named : distinct;
  PrefetchedInputs own;
  if (ahead == nullptr || !*ahead) {
    own = fetcher_.Begin(job, inputs, server_.endpoint());
    ahead = &own;
  }
  // Every remote input is fetched at once, by the fetcher's threads.
  // Whatever this call does not take is freed when it returns.
  struct ReleaseOnReturn {
    const PrefetchedInputs* p;
    ~ReleaseOnReturn() { p->Release(); }
  } release{ahead};
  if (!ahead->WaitAll(cancelled)) {
    return Status::Cancelled("job " + std::to_string(job) +
                             ": the task was cancelled while its inputs were fetched");
  }
  const size_t n = inputs.size();
  std::vector<std::shared_ptr<const BufferList>> local(n);
  std::vector<BufferList> fetched(n);
  std::map<size_t, Status> failed;  // by input index
  // Fetched and unlocated inputs first: when one of them is lost, the
  // task takes no read of its local inputs (their other readers keep them).
  for (size_t i = 0; i < n; ++i) {
    const InputRef& in = inputs[i];
    // A producer that kept no buffers (like noop or spin): nothing to read.
    if (!in.kept() || in.endpoint == server_.endpoint()) continue;
    if (in.endpoint.empty()) {
      failed[i] = Status::NotFound("input: the controller knows no location of job " +
                                   std::to_string(job) + " run " + std::to_string(in.run));
      continue;
    }
    std::optional<Result<BufferList>> got = ahead->Take(i);
    if (!got) {
      failed[i] = Status::Internal("input " + std::to_string(i) + " of job " + std::to_string(job) +
                                   " was not fetched");
    } else if (!got->ok()) {
      Status why = got->status();
      if (why.code() == StatusCode::kNotFound) {
        // The producer answered that it holds no such outputs: the fetch
        // may have gone out ahead, before an early-dispatched task's
        // producer finished. Once more, now that the task runs.
        Result<BufferList> again =
            fetcher_.connections().Fetch(in.endpoint, job, in.run, options_.timeout_us);
        if (again.ok()) {
          fetched[i] = std::move(again).value();
          continue;
        }
        why = again.status();
      }
      failed[i] = std::move(why);
    } else {
      fetched[i] = std::move(got->value());
    }
  }
  // Local inputs are looked at before any read is taken, and every one
  // missing is named: a task short of one took the reads of the others,
  // which its rerun then found gone (one lost input per attempt).
  const auto missing = [&](uint32_t run) {
    return Status::NotFound("input: no outputs of job " + std::to_string(job) + " run " +
                            std::to_string(run) + " in this worker's store");
  };
  for (size_t i = 0; i < n; ++i) {
    const InputRef& in = inputs[i];
    if (!in.kept() || in.endpoint != server_.endpoint()) continue;
    if (store_.Peek(job, in.run) == nullptr) failed[i] = missing(in.run);
  }
  for (size_t i = 0; i < n && failed.empty(); ++i) {
    const InputRef& in = inputs[i];
    if (!in.kept() || in.endpoint != server_.endpoint()) continue;
    local[i] = store_.Read(job, in.run);
    if (local[i] == nullptr) failed[i] = missing(in.run);  // freed since the look
  }
  if (!failed.empty()) {
    // Never run a kernel on a missing input: the caller fails the task.
    if (lost_runs != nullptr) {
      for (const auto& [i, status] : failed) lost_runs->push_back(inputs[i].run);
    }
    Status first = failed.begin()->second;
    if (failed.size() == 1) return first;
    // NotFound only when every one was (the controller tells freed inputs
    // from unreachable ones by it).
    StatusCode code = first.code();
    for (const auto& [i, status] : failed) {
      if (status.code() != StatusCode::kNotFound) code = status.code();
    }
    return Status(code, first.message() + " (and " + std::to_string(failed.size() - 1) +
                            " more input(s) lost)");
  }
  // The task runs with every input: only now does it take the reads of
  // the fetched ones (a task short of one leaves them to its rerun).
  ahead->CommitReads();
  InputSet set;
  size_t sources = 0, last = 0;
  for (size_t i = 0; i < n; ++i) {
    if ((local[i] != nullptr && !local[i]->empty()) || !fetched[i].empty()) ++sources, last = i;
  }
  if (sources == 1 && local[last] != nullptr && slot.empty()) {
    set.shared_ = std::move(local[last]);  // the stored list itself
    return set;
  }
  // An input named again later is copied there and moved at its last use.
  std::vector<size_t> last_use;
  if (!slot.empty()) {
    last_use.resize(n);
    for (size_t i = 0; i < named.size(); ++i) last_use[slot[i]] = i;
  }
  for (size_t i = 0; i < named.size(); ++i) {
    const size_t k = slot.empty() ? i : slot[i];
    const bool final_use = slot.empty() || last_use[k] == i;
    if (local[k] != nullptr) {
      // The last holder of a list the store has freed may take its buffers
      // (the store makes its lists non-const); otherwise copy them.
      if (final_use && local[k].use_count() == 1) {
        auto& mine = const_cast<BufferList&>(*local[k]);
        for (Buffer& b : mine) set.owned_.push_back(std::move(b));
      } else {
        set.owned_.insert(set.owned_.end(), local[k]->begin(), local[k]->end());
      }
    }
    if (final_use) {
      for (Buffer& b : fetched[k]) set.owned_.push_back(std::move(b));
    } else {
      set.owned_.insert(set.owned_.end(), fetched[k].begin(), fetched[k].end());
    }
  }
  return set;
}

BufferList DataPlane::FetchPut(JobId job, const KernelArgs& args) {
  const std::string endpoint = args.String("endpoint", "");
  const int64_t put = args.Int("put", -1);
  if (endpoint.empty() || put < 0 || put > UINT32_MAX) {
    throw std::invalid_argument(std::string(kPutKernel) +
                                ": needs args 'endpoint' (str) and 'put' (int)");
  }
  // Over the kept connections, as an input from a peer: the driver serves
  // the same fetch protocol. A peek, since the driver counts no reads; with
  // the job's token, the only one the driver holds.
  Result<BufferList> got =
      fetcher_.connections().Fetch(endpoint, job, static_cast<uint32_t>(put), options_.timeout_us,
                                   /*peek=*/true, /*job_token=*/true);
  if (!got.ok()) {
    throw std::runtime_error("put " + std::to_string(put) + ": fetch from the driver at " +
                             endpoint + " failed: " + got.status().message());
  }
  return std::move(got).value();
}

void DataPlane::PrefetchState(const TaskAssign& task) {
  if (!task.keeps_state || task.state_from.empty()) return;
  if (actor_states_.Find(task.job, task.submodel) != nullptr) return;
  state_loader_.Begin(task.job, task.submodel, task.state_from);
}

Result<uint64_t> DataPlane::LoadState(JobId job, std::string_view submodel,
                                      const std::string& from) {
  if (actor_states_.Find(job, submodel) != nullptr) return 0;  // held, or made meanwhile
  Result<BufferList> got =
      fetcher_.connections().FetchState(from, job, submodel, options_.timeout_us);
  if (!got.ok()) return got.status();
  const uint64_t bytes = ObjectStore::BytesOf(*got);
  // What this worker holds, plus the load, stays within its memory
  // (--memory-mb): the controller runs the task again rather than this
  // worker holding more than it has.
  const uint64_t held = store_.used_bytes() + actor_states_.bytes();
  if (options_.cap_bytes > 0 && held + bytes > options_.cap_bytes) {
    return Status::ResourceExhausted("load of the state of sub-model '" + std::string(submodel) +
                                     "': " + std::to_string(bytes) + " bytes beside the " +
                                     std::to_string(held) +
                                     " held here would exceed this worker's memory (" +
                                     std::to_string(options_.cap_bytes) + " bytes, --memory-mb)");
  }
  RETURN_IF_ERROR(actor_states_.Install(job, submodel, std::move(got).value()));
  return bytes;
}

std::unique_ptr<Communicator> DataPlane::MakeCommunicator(const GangInfo& gang,
                                                          const std::atomic<bool>* cancel) {
  return std::make_unique<Communicator>(
      &ctx_, &inbox_, GangView{gang.rank, gang.endpoints, gang.tag, tokens_.current()},
      options_.timeout_us, cancel);
}

}  // namespace hmpmd::worker
