#include "hmpmd/sim/simulator.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <functional>
#include <unordered_map>

#include "hmpmd/scheduler/output_bytes.h"
#include "hmpmd/scheduler/state_shards.h"

namespace hmpmd {
namespace {

// The bytes `run`'s outputs take in its device's object store, as the
// workers' built-in kernels store them, from its arguments and the sizes
// its inputs' outputs were given; unknown (a worker's own kernel) counts 0.
// `inputs` is scratch.
uint64_t OutputBytes(const JobRun& job, uint32_t run, std::vector<uint64_t>& inputs) {
  const JobGraph& g = *job.graph;
  const uint32_t index = run % g.size();
  inputs.clear();
  for (uint32_t in : g.kernel_inputs(index)) {
    const TaskRecord& p = job.runs[run - index + in];
    const bool known = p.state == TaskState::kDone && p.output_device != UINT32_MAX;
    inputs.push_back(known ? p.output_bytes : UINT64_MAX);
  }
  const uint32_t group = g.task(index).group;
  const uint32_t members =
      group == kNoGroup ? 0 : static_cast<uint32_t>(g.groups()[group].members.size());
  const OutputGuess out = GuessOutputBytes(g.spec_task(index), inputs, members);
  return out.known ? out.bytes : 0;
}

}  // namespace

Result<std::unique_ptr<Simulator>> Simulator::Create(SimOptions options) {
  RETURN_IF_ERROR(ValidatePoolSpec(options.pool));
  auto policy = MakePolicy(options.policy);
  if (!policy.ok()) return policy.status();
  SchedulerOptions so;
  so.cost = CostOptionsFor(options.pool);
  so.max_deferred = options.max_deferred;
  // Place by store room as the controller does; End() fails what does not fit.
  so.pool.count_store = true;
  auto sched = std::make_unique<Scheduler>(so, std::move(policy).value());
  for (DeviceDesc& d : PoolDevices(options.pool)) sched->AddDevice(std::move(d));
  return std::unique_ptr<Simulator>(new Simulator(std::move(options), std::move(sched)));
}

Simulator::Simulator(SimOptions options, std::unique_ptr<Scheduler> scheduler)
    : options_(std::move(options)), scheduler_(std::move(scheduler)) {}

Result<JobId> Simulator::Submit(std::shared_ptr<const JobGraph> graph) {
  return scheduler_->AddJob(std::move(graph), now_);
}

double Simulator::KernelUs(const TaskSpec& t, CoreId core_id) const {
  if (t.kernel == "spin" || t.kernel == "sleep") return ArgNumber(t.args, "us", 0);
  const ResourcePool& pool = scheduler_->pool();
  const ResourcePool::Core& core = pool.core(core_id);
  const DeviceDesc& dev = pool.device(core.device).desc;
  size_t k = static_cast<size_t>(core.kind);
  double rate = dev.flops_per_us[k] > 0 ? dev.flops_per_us[k] : options_.pool.flops_per_us[k];
  double flops = t.cost.flops;
  if (t.kernel == "gemm" && flops == 0) {
    flops = 2.0 * ArgNumber(t.args, "m", 0) * ArgNumber(t.args, "n", 0) * ArgNumber(t.args, "k", 0);
  }
  if ((t.kernel == "add" || t.kernel == "scale") && flops == 0) flops = ArgNumber(t.args, "n", 0);
  return flops / rate;
}

double Simulator::TaskUs(const TaskSpec& t, CoreId core_id) const {
  if (t.kernel == "spin" || t.kernel == "sleep") return std::max(1.0, KernelUs(t, core_id));
  double us = KernelUs(t, core_id);
  if (IsCommKernel(t.kernel) || t.collective) {
    // A collective alone (no gang) moves its bytes like a send.
    const LinkSpec& link = options_.pool.links[options_.pool.nodes > 1 ? 2 : 1];
    us += TransferUs(CommBytes(t), link);
  }
  return std::max(1.0, us);
}

uint64_t Simulator::state_loads_on(DeviceId device) const {
  return device < loads_on_.size() ? loads_on_[device] : 0;
}

std::optional<std::pair<StatePart, double>> Simulator::PartOf(const Dispatch& d,
                                                              const TaskSpec& t) const {
  if (!options_.charge_state) return std::nullopt;
  const JobRun& job = *scheduler_->job(d.job);
  const GraphTask& task = job.graph->task(d.run % job.graph->size());
  if (!NeedsStatePart(task)) return std::nullopt;
  if (task.submodel >= job.state_device_bytes.size()) return std::nullopt;
  const double bytes = job.state_device_bytes[task.submodel];
  if (bytes <= 0) return std::nullopt;
  const SubmodelSpec& sm = job.graph->spec().submodels[task.submodel];
  return std::make_pair(StatePart{d.job, task.submodel, StatePartOf(sm, t)}, bytes);
}

const StateLoadTimes* Simulator::LoadsOf(JobId job) const {
  auto it = recorded_.find(job);
  return it == recorded_.end() ? nullptr : &it->second.times;
}

void Simulator::Grow(DeviceId device) {
  if (lane_free_.size() > device) return;
  const size_t n = device + 1;
  lane_free_.resize(n, 0);
  arriving_.resize(n);
  in_use_.resize(n);
  compute_.resize(n);
  loads_on_.resize(n, 0);
}

TimeUs Simulator::LoadUs(double bytes) const {
  const LinkSpec& link = options_.pool.links[options_.pool.nodes > 1 ? 2 : 1];
  return std::max<TimeUs>(1, static_cast<TimeUs>(TransferUs(bytes, link) + 0.5));
}

TimeUs Simulator::QueueLoad(DeviceId device, const StatePart& part, double bytes, uint32_t run,
                            bool prefetch) {
  const TimeUs us = LoadUs(bytes);
  const TimeUs start = std::max(now_, lane_free_[device]);
  lane_free_[device] = start + us;
  std::vector<Arriving>& arriving = arriving_[device];
  std::erase_if(arriving, [&](const Arriving& a) { return a.part == part; });
  std::vector<StateLoadTimes::Slice>& slices = recorded_[part.job].times.slices;
  slices.push_back({device, start, start + us, part.submodel, run, prefetch});
  arriving.push_back({part, start + us, part.job, slices.size() - 1});
  ++loads_on_[device];
  ++state_loads_;
  state_load_us_ += static_cast<double>(us);
  return start + us;
}

void Simulator::Prefetch() {
  intents_.clear();
  scheduler_->mutable_policy().TakeStateIntents(&intents_);
  if (!options_.charge_state) return;
  const ResourcePool& pool = scheduler_->pool();
  for (const StateIntent& in : intents_) {
    const JobRun* job = scheduler_->job(in.job);
    if (job == nullptr || in.device >= pool.device_count() || !pool.device(in.device).alive ||
        in.submodel >= job->state_device_bytes.size()) {
      continue;
    }
    const double bytes = job->state_device_bytes[in.submodel];
    const StatePart part{in.job, in.submodel, in.part};
    if (bytes <= 0 || states_.Holds(in.device, part)) continue;
    Grow(in.device);
    const ResourcePool::Device& dev = pool.device(in.device);
    const std::optional<uint32_t> evicted =
        states_.Prefetch(in.device, part, bytes, ResourcePool::StoreCap(dev.desc), dev.held_bytes,
                         in_use_[in.device]);
    if (!evicted) continue;  // it would evict what runs or waits to run: on demand instead
    state_evictions_ += *evicted;
    ++state_prefetches_;
    QueueLoad(in.device, part, bytes, kNoRun, /*prefetch=*/true);
  }
}

double Simulator::LoadStateUs(const Dispatch& d, const TaskSpec& t, std::string* error) {
  const auto part = PartOf(d, t);
  if (!part) return 0;
  Recorded& rec = recorded_[d.job];
  const size_t runs = scheduler_->job(d.job)->runs.size();
  rec.times.run_us.resize(runs, 0);
  rec.times.part_us.resize(runs, 0);
  rec.times.run_us[d.run] = 0;
  rec.times.part_us[d.run] = static_cast<double>(LoadUs(part->second));
  Grow(d.device);
  TimeUs ready = now_;
  if (states_.Touch(d.device, part->first)) {
    // Resident, or still arriving: wait for the load's end.
    std::vector<Arriving>& arriving = arriving_[d.device];
    for (auto it = arriving.begin(); it != arriving.end(); ++it) {
      if (!(it->part == part->first)) continue;
      StateLoadTimes::Slice& slice = recorded_[it->job].times.slices[it->slice];
      if (slice.run == kNoRun) slice.run = d.run;
      ready = std::max(now_, it->end);
      arriving.erase(it);
      break;
    }
  } else {
    const ResourcePool::Device& dev = scheduler_->pool().device(d.device);
    Result<uint32_t> loaded = states_.Load(d.device, part->first, part->second,
                                           ResourcePool::StoreCap(dev.desc), dev.held_bytes);
    if (!loaded.ok()) {
      *error = "state of sub-model '" +
               scheduler_->job(d.job)->graph->spec().submodels[part->first.submodel].name +
               "' on device '" + dev.desc.name + "': " + loaded.status().message();
      return 0;
    }
    state_evictions_ += *loaded;
    ready = QueueLoad(d.device, part->first, part->second, d.run, /*prefetch=*/false);
  }
  in_use_[d.device].push_back(part->first);
  const auto wait = static_cast<double>(ready - now_);
  rec.times.run_us[d.run] = wait;
  state_load_exposed_us_ += wait;
  return wait;
}

double Simulator::state_load_hidden_us() const {
  std::vector<std::vector<std::pair<TimeUs, TimeUs>>> loads(compute_.size());
  for (const auto& [job, rec] : recorded_) {
    for (const StateLoadTimes::Slice& s : rec.times.slices) {
      if (s.device < loads.size()) loads[s.device].push_back({s.start, s.end});
    }
  }
  double hidden = 0;
  for (size_t d = 0; d < loads.size(); ++d) {
    if (loads[d].empty()) continue;
    // Compute on one device may run on several cores at once: merged.
    std::vector<std::pair<TimeUs, TimeUs>> busy = compute_[d];
    std::sort(busy.begin(), busy.end());
    std::vector<std::pair<TimeUs, TimeUs>> merged;
    for (const auto& b : busy) {
      if (!merged.empty() && b.first <= merged.back().second) {
        merged.back().second = std::max(merged.back().second, b.second);
      } else {
        merged.push_back(b);
      }
    }
    for (const auto& [a, b] : loads[d]) {  // loads on one lane never overlap
      auto it = std::lower_bound(merged.begin(), merged.end(), std::make_pair(a, TimeUs{0}),
                                 [](const auto& x, const auto& y) { return x.second < y.first; });
      for (; it != merged.end() && it->first < b; ++it) {
        hidden += static_cast<double>(
            std::max<TimeUs>(0, std::min(b, it->second) - std::max(a, it->first)));
      }
    }
  }
  return hidden;
}

void Simulator::Start(const std::vector<Dispatch>& batch) {
  const ResourcePool& pool = scheduler_->pool();
  // Gangs: members placed in this batch, keyed by (job, step base, group).
  struct Gang {
    double us = 0;
    uint32_t members = 0;
    uint32_t node = UINT32_MAX;
    bool one_node = true;
    double own_us = 0;
    bool moves = false;  // a member's kernel communicates
  };
  std::unordered_map<uint64_t, Gang> gangs;
  auto key_of = [&](const Dispatch& d, const JobRun& job) -> int64_t {
    const JobGraph& g = *job.graph;
    uint32_t group = g.task(d.run % g.size()).group;
    if (group == kNoGroup) return -1;
    uint64_t step = d.run / g.size();
    return static_cast<int64_t>((static_cast<uint64_t>(d.job) * 1'000'003 + step) * 65'537 + group);
  };
  std::vector<double> own(batch.size());
  std::vector<int64_t> keys(batch.size());
  std::vector<std::string> state_errors(batch.size());
  std::vector<double> waits(batch.size(), 0);
  for (size_t i = 0; i < batch.size(); ++i) {
    const Dispatch& d = batch[i];
    const JobRun& job = *scheduler_->job(d.job);
    const TaskSpec& t = job.graph->spec_task(d.run % job.graph->size());
    keys[i] = key_of(d, job);
    if (keys[i] < 0) {
      waits[i] = LoadStateUs(d, t, &state_errors[i]);
      own[i] = TaskUs(t, d.core) + waits[i];
      if (!state_errors[i].empty()) own[i] = 0;  // it fails at once, without running
      continue;
    }
    // A member's own kernel time (a spin's `us`, a gemm's or cost.flops'
    // flops; at least 1 us where it has any), plus below the collective's
    // transfer, which only communication kernels make: a worker runs a
    // `spin` member with a `collective` field as a spin, moving nothing.
    const double kernel_us = KernelUs(t, d.core);
    own[i] = kernel_us > 0 ? std::max(1.0, kernel_us) : 0;
    Gang& g = gangs[static_cast<uint64_t>(keys[i])];
    g.moves = g.moves || IsCommKernel(t.kernel);
    ++g.members;
    uint32_t node = pool.device(d.device).desc.node;
    if (g.node == UINT32_MAX) g.node = node;
    g.one_node = g.one_node && g.node == node;
    g.own_us = std::max(g.own_us, own[i]);
  }
  for (size_t i = 0; i < batch.size(); ++i) {
    const Dispatch& d = batch[i];
    double us = own[i];
    if (keys[i] >= 0) {
      Gang& g = gangs[static_cast<uint64_t>(keys[i])];
      if (g.us == 0) {
        const JobRun& job = *scheduler_->job(d.job);
        const TaskSpec& t = job.graph->spec_task(d.run % job.graph->size());
        std::string op = t.collective ? t.collective->op : t.kernel;
        const LinkSpec& link = options_.pool.links[g.one_node ? 1 : 2];
        const double transfer = g.moves ? CollectiveUs(op, CommBytes(t), g.members, link) : 0;
        g.us = std::max(1.0, g.own_us + transfer);
      }
      us = g.us;
    }
    // Past the time limit (or not a number, from absurd cost hints): end
    // it just past the limit, where Run() stops and names it, instead of
    // an out-of-range conversion to TimeUs.
    const double limit = static_cast<double>(options_.max_time_us - now_) + 1;
    if (!(us < limit)) {
      if (too_long_.empty()) {
        const JobRun& job = *scheduler_->job(d.job);
        too_long_ = job.graph->spec_task(d.run % job.graph->size()).id;
        too_long_start_ = now_;
        too_long_us_ = us;
      }
      us = limit;
    }
    TimeUs dur = std::max<TimeUs>(1, static_cast<TimeUs>(us + 0.5));
    if (!state_errors[i].empty()) {
      state_errors_.emplace(seq_, std::move(state_errors[i]));
    } else if (keys[i] < 0 && options_.charge_state) {
      const JobRun& job = *scheduler_->job(d.job);
      if (!IsCommKernel(job.graph->spec_task(d.run % job.graph->size()).kernel)) {
        Grow(d.device);
        const auto begin = std::min(now_ + dur, now_ + static_cast<TimeUs>(waits[i]));
        compute_[d.device].push_back({begin, now_ + dur});
      }
    }
    heap_.push_back({now_ + dur, seq_++, d, now_});
    std::push_heap(heap_.begin(), heap_.end(), std::greater<>());
  }
}

Status Simulator::Run() {
  std::vector<Dispatch> batch;
  while (true) {
    batch.clear();
    scheduler_->Schedule(now_, &batch);
    Prefetch();  // before Start: a task placed now waits for its part's prefetch
    Start(batch);
    if (heap_.empty()) {
      if (scheduler_->active_jobs() == 0) return Status::Ok();
      return Status::Internal("simulation stuck at t=" + std::to_string(now_) +
                              " us: jobs wait and no task can be placed (policy " +
                              std::string(scheduler_->policy().Name()) + ")");
    }
    // Complete every run that ends at the next event time.
    TimeUs t = heap_.front().end;
    if (t > options_.max_time_us) {
      std::string why = "simulation passed its time limit of " +
                        std::to_string(options_.max_time_us / 1'000'000) + " s";
      if (!too_long_.empty()) {
        // "alone" only when it started at 0: a task of a long chain may be
        // short itself and start late.
        char took[96];
        if (std::isfinite(too_long_us_)) {
          std::snprintf(took, sizeof took, "takes %.6g s", too_long_us_ / 1e6);
        } else {
          std::snprintf(took, sizeof took, "takes longer than any number of seconds");
        }
        char at[64];
        std::snprintf(at, sizeof at, "%.6f", static_cast<double>(too_long_start_) / 1e6);
        why += ": task '" + too_long_ + "' starts at " + at + " s and " + took +
               (too_long_start_ == 0 ? ", alone past it" : ", ending past it") +
               " (check its cost hints and its sub-model's state_bytes)";
      }
      return Status::ResourceExhausted(why);
    }
    now_ = t;
    while (!heap_.empty() && heap_.front().end == t) {
      std::pop_heap(heap_.begin(), heap_.end(), std::greater<>());
      Event ev = heap_.back();
      heap_.pop_back();
      End(ev);
      ++events_;
    }
  }
}

void Simulator::End(const Event& ev) {
  const JobRun* job = scheduler_->job(ev.d.job);
  if (job == nullptr) return;
  // Its part is no longer in use here (LoadStateUs marked it so).
  const JobGraph& graph = *job->graph;
  if (const auto used = PartOf(ev.d, graph.spec_task(ev.d.run % graph.size()));
      used && ev.d.device < in_use_.size()) {
    std::vector<StatePart>& in_use = in_use_[ev.d.device];
    auto it = std::find(in_use.begin(), in_use.end(), used->first);
    if (it != in_use.end()) in_use.erase(it);
  }
  // Its state did not fit the device's memory: it never ran.
  if (auto it = state_errors_.find(ev.seq); it != state_errors_.end()) {
    const std::string error = std::move(it->second);
    state_errors_.erase(it);
    scheduler_->OnTaskFailed(ev.d.job, ev.d.run, ev.d.attempt, error, /*retryable=*/false, now_);
    return;
  }
  const uint64_t bytes = OutputBytes(*job, ev.d.run, input_sizes_);
  // The worker's object store refuses outputs past its cap (memory_mb) and
  // fails the task; the scheduler counts what the store holds (RecordOutput).
  const ResourcePool::Device& dev = scheduler_->pool().device(ev.d.device);
  const uint64_t cap = ResourcePool::StoreCap(dev.desc);
  // Inputs it read for the last time on its device left the store then.
  uint64_t freed = 0;
  const JobGraph& g = *job->graph;
  const uint32_t base = ev.d.run - ev.d.run % g.size();
  for (uint32_t in : g.task(ev.d.run % g.size()).inputs) {
    const TaskRecord& p = job->runs[base + in];
    if (p.held && p.reads_left == 1 && p.output_device == ev.d.device) freed += p.output_bytes;
  }
  const uint64_t used = dev.held_bytes - std::min(dev.held_bytes, freed);
  // Resident states count against the same memory: the least recently used
  // make room, never the state this task ran with.
  const TaskSpec& t = g.spec_task(ev.d.run % g.size());
  const auto part = PartOf(ev.d, t);
  const StatePart keep = part ? part->first : StatePart{ev.d.job, UINT32_MAX, 0};
  if (bytes > 0 && !states_.MakeRoom(ev.d.device, bytes, cap, used, keep)) {
    const auto state = static_cast<uint64_t>(states_.Bytes(ev.d.device));
    scheduler_->OnTaskFailed(
        ev.d.job, ev.d.run, ev.d.attempt,
        "object store: outputs of job " + std::to_string(ev.d.job) + " run " +
            std::to_string(ev.d.run) + " need " + std::to_string(bytes) + " bytes; " +
            std::to_string(used + state) + " of the " + std::to_string(cap) +
            " allowed (the pool's memory_mb) are in use on device '" + dev.desc.name + "'" +
            (state > 0 ? ", " + std::to_string(state) + " of them its sub-model's state" : ""),
        /*retryable=*/false, now_);
    return;
  }
  // Its outputs stay on its device, where the policy may place their
  // consumers; they hold store room until their last consumer has read them.
  if (scheduler_->OnTaskDone(ev.d.job, ev.d.run, ev.d.attempt, ev.start, ev.end, now_)) {
    scheduler_->RecordOutput(ev.d.job, ev.d.run, ev.d.device, bytes, bytes > 0 ? 1 : 0);
  }
}

}  // namespace hmpmd
