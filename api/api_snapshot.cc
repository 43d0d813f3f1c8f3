#include "hmpmd/api/api_snapshot.h"

#include <time.h>

#include <algorithm>
#include <charconv>
#include <nlohmann/json.hpp>

#include "hmpmd/controller/job_report.h"
#include "hmpmd/protocol/json_text.h"

namespace hmpmd {
namespace {

using json = nlohmann::json;

json PoolJson(const Controller& c) {
  const ResourcePool& pool = c.scheduler().pool();
  json devices = json::array();
  const std::vector<bool> listed = c.workers().ListedDevices(pool.device_count());
  for (DeviceId d = 0; d < pool.device_count(); ++d) {
    if (!listed[d]) continue;  // a worker's past row, or an old dead one
    const auto& dev = pool.device(d);
    const WorkerInfo* w = c.workers().OfDevice(d);
    json cores = json::array();
    for (CoreId cid : dev.cores) {
      const auto& core = pool.core(cid);
      cores.push_back({{"id", cid},
                       {"name", CoreName(core)},
                       {"kind", std::string(CoreKindName(core.kind))},
                       {"lane", core.lane},
                       {"queued", core.queued}});
    }
    json labels = json::object();
    for (const Label& l : dev.desc.labels) labels[l.key] = l.value;
    json e = {{"id", d},
              {"name", dev.desc.name},
              {"alive", dev.alive},
              {"memory_mb", dev.desc.memory_mb},
              {"kernels", dev.desc.kernels},
              {"labels", std::move(labels)},
              {"cores", std::move(cores)}};
    if (w) {
      e["worker"] = w->id;
      e["pid"] = w->pid;
      e["tasks_done"] = w->tasks_done;
      e["dropped_frames"] = w->dropped_frames;
      e["store_bytes"] = w->store_bytes;
      e["state_bytes"] = w->state_bytes;
      if (!w->alive) e["left_reason"] = w->left_reason;
      // Its connection closed; declared dead unless it comes back.
      if (w->alive && w->disconnected_at != 0) e["suspected"] = true;
    }
    devices.push_back(std::move(e));
  }
  return {{"devices", std::move(devices)},
          {"alive_devices", pool.alive_device_count()},
          {"cores",
           {{"cube", pool.alive_cores(CoreKind::kCube)},
            {"vector", pool.alive_cores(CoreKind::kVector)}}},
          {"policy", std::string(c.scheduler().policy().Name())}};
}

// CPU time of the calling thread, in microseconds: what a rendering costs
// the loop, not counting time the loop was preempted.
TimeUs LoopCpuUs() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<TimeUs>(ts.tv_sec) * 1'000'000 + ts.tv_nsec / 1000;
}

}  // namespace

const ApiSnapshot::Job* ApiSnapshot::Find(JobId id) const {
  auto it = std::lower_bound(summaries.begin(), summaries.end(), id,
                             [](const Job& e, JobId v) { return e.id < v; });
  return it != summaries.end() && it->id == id ? &*it : nullptr;
}

std::string ApiSnapshot::JobsOf(std::string_view tenant) const {
  std::string body = "{\"jobs\":[";
  bool comma = false;
  for (const Job& j : summaries) {
    if (j.tenant != tenant) continue;
    if (comma) body += ',';
    body += *j.brief;
    comma = true;
  }
  return body + "]}";
}

std::string ApiSnapshot::MetricsOf(std::string_view tenant) const {
  constexpr std::string_view kJobLabel = "{job=\"";
  std::string out;
  out.reserve(metrics.size());
  for (size_t at = 0; at < metrics.size();) {
    size_t end = metrics.find('\n', at);
    end = end == std::string::npos ? metrics.size() : end + 1;
    const std::string_view line(metrics.data() + at, end - at);
    at = end;
    if (const size_t label = line.find(kJobLabel); label != std::string_view::npos) {
      JobId id = 0;
      const char* first = line.data() + label + kJobLabel.size();
      std::from_chars(first, line.data() + line.size(), id);
      const Job* job = Find(id);
      if (job == nullptr || job->tenant != tenant) continue;
    }
    out += line;
  }
  return out;
}

ApiSnapshots::ApiSnapshots(const Controller* controller, ApiSnapshotOptions options,
                           MetricsFn metrics)
    : controller_(controller), options_(options), metrics_(std::move(metrics)) {}

std::shared_ptr<const ApiSnapshot> ApiSnapshots::Current() const {
  std::lock_guard<std::mutex> lock(snap_mu_);
  return snapshot_;
}

std::shared_ptr<const ApiSnapshot> ApiSnapshots::Fresh() {
  demand_.store(true, std::memory_order_relaxed);
  const uint64_t epoch = epoch_.load(std::memory_order_acquire);
  const TimeUs dirty = dirty_since_.load(std::memory_order_acquire);
  auto s = Current();
  if (!s || s->epoch != epoch) return nullptr;
  if (dirty != 0 && Controller::NowUs() - dirty >= options_.period.count() * 1000) return nullptr;
  return s;
}

void ApiSnapshots::Detach() {
  std::lock_guard<std::mutex> lock(render_mu_);
  detached_ = true;
  metrics_ = nullptr;
}

ApiSnapshots::Signature ApiSnapshots::Discrete() const {
  const auto& jobs = controller_->scheduler().jobs();
  return Signature{jobs.size(), jobs.empty() ? 0 : jobs.rbegin()->first,
                   controller_->workers().size(), controller_->workers().alive_count()};
}

bool ApiSnapshots::LiveJobsChanged() const {
  const Scheduler& s = controller_->scheduler();
  for (const auto& [id, state] : live_) {
    const JobRun* j = s.job(id);
    if (j == nullptr || j->state != state) return true;
  }
  return false;
}

uint64_t ApiSnapshots::Progress() const {
  const ControllerCounters& k = controller_->counters();
  // Monotonic counters: any change moves the sum. Store bytes go up and
  // down; two changes that cancel out wait for the next change.
  uint64_t sum = k.tasks_dispatched + k.tasks_finished + k.tasks_failed + k.stale_results +
                 k.refused_tokens + controller_->dropped_frames();
  for (const WorkerInfo& w : controller_->workers()) {
    sum += w.dropped_frames + w.store_bytes + w.state_bytes;
  }
  // The writer's batches land after the loop's last change: without them,
  // /metrics would keep the figures of that change while the controller is
  // idle.
  if (const StoreWriter* w = controller_->store_writer()) {
    sum += w->batches_written() + w->write_errors();
  }
  return sum;
}

void ApiSnapshots::Observe(TimeUs now) {
  Signature s = Discrete();
  if (!(s == seen_) || LiveJobsChanged()) {
    seen_ = s;
    live_.clear();
    for (const auto& [id, job] : controller_->scheduler().jobs()) {
      if (!IsTerminal(job.state)) live_.emplace_back(id, job.state);
    }
    MarkChanged();
  }
  uint64_t p = Progress();
  if (p != progress_) {
    progress_ = p;
    if (dirty_since_.load(std::memory_order_relaxed) == 0) {
      dirty_since_.store(now, std::memory_order_release);
    }
  }
}

void ApiSnapshots::Tick(TimeUs now) {
  std::lock_guard<std::mutex> lock(render_mu_);
  if (detached_) return;
  Observe(now);
  if (!demand_.load(std::memory_order_relaxed)) return;
  const TimeUs period_us = options_.period.count() * 1000;
  const bool stale = published_epoch_ != epoch_.load(std::memory_order_relaxed);
  const bool dirty = dirty_since_.load(std::memory_order_relaxed) != 0;
  if (stale || updated_full_ > 0 || (dirty && now - published_at_ >= period_us)) {
    Publish(now);
  }
}

std::shared_ptr<const ApiSnapshot> ApiSnapshots::RefreshOnLoop(TimeUs now) {
  std::lock_guard<std::mutex> lock(render_mu_);
  if (detached_) return Current();
  Observe(now);
  const TimeUs dirty = dirty_since_.load(std::memory_order_relaxed);
  if (published_epoch_ != epoch_.load(std::memory_order_relaxed) || updated_full_ > 0 ||
      (dirty != 0 && now - dirty >= options_.period.count() * 1000)) {
    Publish(now);
  }
  return Current();
}

std::shared_ptr<const std::string> ApiSnapshots::EndedSummary(const JobRun& job) {
  auto& full = ended_full_[job.id];
  if (!full) {
    const JobClock clock = controller_->ClockOf(job.id);
    full = std::make_shared<const std::string>(JsonText(JobSummaryJson(
        job, controller_->scheduler().pool(), true, controller_->StoredMetrics(job.id), &clock)));
    ++updated_full_;
  }
  return full;
}

// REQUIRES: render_mu_ held, not detached.
void ApiSnapshots::Publish(TimeUs now) {
  const TimeUs start = LoopCpuUs();
  const Controller& c = *controller_;
  const Scheduler& sched = c.scheduler();
  const ResourcePool& pool = sched.pool();
  auto s = std::make_shared<ApiSnapshot>();
  s->epoch = epoch_.load(std::memory_order_acquire);
  s->taken = now;
  s->pool = JsonText(PoolJson(c));
  s->summaries.reserve(sched.jobs().size());
  // Byte for byte what JsonText(json{{"jobs", [summaries]}}) gives.
  s->jobs = "{\"jobs\":[";
  bool comma = false;
  for (const auto& [id, job] : sched.jobs()) {
    std::shared_ptr<const std::string> brief, full;
    const JobClock clock = c.ClockOf(id);
    if (IsTerminal(job.state)) {
      auto& b = ended_brief_[id];
      if (!b) {
        b = std::make_shared<const std::string>(
            JsonText(JobSummaryJson(job, pool, false, nullptr, &clock)));
      }
      brief = b;
      // Left out until its end is stored: GET /api/v1/jobs/{id} then waits
      // on the loop (RestApi::GetJob).
      auto f = ended_full_.find(id);
      if (f != ended_full_.end() && c.EndDurable(id)) full = f->second;
    } else {
      brief = full = std::make_shared<const std::string>(
          JsonText(JobSummaryJson(job, pool, false, nullptr, &clock, sched.QueuedRuns(id))));
    }
    if (comma) s->jobs += ',';
    s->jobs += *brief;
    comma = true;
    s->summaries.push_back({id, job.tenant.name, std::move(brief), std::move(full)});
  }
  s->jobs += "]}";
  s->metrics = metrics_ ? metrics_(now) : std::string();
  // Forget the entries of jobs the controller forgot.
  auto sweep = [&sched](auto& m) {
    if (m.size() <= sched.jobs().size()) return;
    std::erase_if(m, [&sched](const auto& e) { return sched.job(e.first) == nullptr; });
  };
  sweep(ended_brief_);
  sweep(ended_full_);
  {
    std::lock_guard<std::mutex> lock(snap_mu_);
    snapshot_ = s;
  }
  published_epoch_ = s->epoch;
  published_at_ = now;
  updated_full_ = 0;
  dirty_since_.store(0, std::memory_order_release);
  demand_.store(false, std::memory_order_relaxed);
  publishes_.fetch_add(1, std::memory_order_relaxed);
  render_us_.fetch_add(static_cast<uint64_t>(std::max<TimeUs>(0, LoopCpuUs() - start)),
                       std::memory_order_relaxed);
}

}  // namespace hmpmd
