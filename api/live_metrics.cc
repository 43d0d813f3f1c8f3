#include "hmpmd/api/live_metrics.h"

#include <time.h>

#include <algorithm>
#include <cstdio>

#include "hmpmd/sim/schedule_metrics.h"

namespace hmpmd {
namespace {

std::string Num(double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.9g", v);
  return buf;
}

void Header(std::string* out, const char* name, const char* type, const char* help) {
  *out += std::string("# HELP ") + name + " " + help + "\n# TYPE " + name + " " + type + "\n";
}

std::string Escape(const std::string& s) {
  std::string out;
  for (char c : s) {
    if (c == '\\' || c == '"') out += '\\';
    if (c == '\n') {
      out += "\\n";
      continue;
    }
    out += c;
  }
  return out;
}

// Ratios are recomputed at most this often per job (sooner while its step
// is young, less often for big jobs): they walk its runs.
constexpr TimeUs kRatioPeriodUs = 1'000'000;

// Until the next recomputation of a step `age` old whose last one cost
// `cost`: 200 x the cost (0.5% of a thread), and no more than the step's
// age up to kRatioPeriodUs (a young step's first figures, from a few runs,
// are soon replaced).
TimeUs RatioPeriod(TimeUs age, TimeUs cost) {
  return std::max(std::min(kRatioPeriodUs, age), 200 * cost);
}

// Jobs with at most this many runs get their step ratios at once (the copy
// and walk take well under a millisecond); larger ones after a period.
constexpr size_t kEagerRatioRuns = 20'000;

// CPU time of the calling thread (the loop), in microseconds.
TimeUs ThreadCpuUs() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<TimeUs>(ts.tv_sec) * 1'000'000 + ts.tv_nsec / 1000;
}

}  // namespace

void AppendStoreMetrics(std::string* out, const StoreWriteLatency& latency, uint64_t batches,
                        uint64_t errors) {
  Header(out, "hmpmd_store_write_latency_seconds", "histogram",
         "Time the job store took to write one batch (one transaction), failed ones included.");
  uint64_t cum = 0;
  for (size_t b = 0; b < StoreWriteLatency::kBuckets.size(); ++b) {
    cum += latency.counts[b];
    *out += "hmpmd_store_write_latency_seconds_bucket{le=\"" + Num(StoreWriteLatency::kBuckets[b]) +
            "\"} " + std::to_string(cum) + "\n";
  }
  cum += latency.counts.back();
  *out += "hmpmd_store_write_latency_seconds_bucket{le=\"+Inf\"} " + std::to_string(cum) + "\n";
  *out += "hmpmd_store_write_latency_seconds_sum " + Num(latency.sum_s) + "\n";
  *out += "hmpmd_store_write_latency_seconds_count " + std::to_string(latency.count) + "\n";
  Header(out, "hmpmd_store_batches_written_total", "counter", "Batches the job store wrote.");
  *out += "hmpmd_store_batches_written_total " + std::to_string(batches) + "\n";
  Header(out, "hmpmd_store_write_errors_total", "counter",
         "Failed job store writes (retried with the next batch).");
  *out += "hmpmd_store_write_errors_total " + std::to_string(errors) + "\n";
}

void LiveMetrics::OnTaskEnded(JobId job_id, uint32_t run, TimeUs start, TimeUs end) {
  const JobRun* job = controller_->scheduler().job(job_id);
  if (job == nullptr || run >= job->runs.size()) return;
  const TaskRecord& rec = job->runs[run];
  double latency = std::max<TimeUs>(0, start - rec.dispatched) / 1e6;
  size_t b = 0;
  while (b < kLatencyBuckets.size() && latency > kLatencyBuckets[b]) ++b;
  ++latency_counts_[b];
  latency_sum_s_ += latency;
  ++latency_count_;
  if (rec.core == kNoCore) return;
  DeviceId d = controller_->scheduler().pool().core(rec.core).device;
  if (device_busy_s_.size() <= d) device_busy_s_.resize(d + 1, 0.0);
  device_busy_s_[d] += std::max<TimeUs>(0, end - start) / 1e6;
}

void LiveMetrics::ComputeRatios(JobId id, const JobRun& job, StepRatios& r, TimeUs now,
                                bool large) {
  const TimeUs cpu0 = ThreadCpuUs();
  if (offload_ && large) {
    // Small steps are walked at once (well under a millisecond, and their
    // figures are in this very rendering). For a large one the loop pays
    // for the copy only; the walk's cost comes back with its
    // figures and sets the next period then.
    auto copy = std::make_shared<JobRun>(job);
    auto pool = std::make_shared<const ResourcePool>(controller_->scheduler().pool());
    r.pending = true;
    const TimeUs copy_cost = ThreadCpuUs() - cpu0;
    next_large_ = now + 200 * copy_cost;
    offload_([copy, pool, id, results = results_, copy_cost, now] {
      const TimeUs c0 = ThreadCpuUs();
      StepSoFar(copy.get(), now);
      ScheduleMetrics m = ComputeMetrics(*copy, *pool);
      Result res{copy->step,     m.tasks > 0,   m.masking_ratio,
                 m.bubble_ratio, m.utilisation, copy_cost + ThreadCpuUs() - c0};
      std::lock_guard<std::mutex> lock(results->mu);
      results->ready[id] = res;
    });
    return;
  }
  JobRun step_only = job;
  StepSoFar(&step_only, now);
  ScheduleMetrics m = ComputeMetrics(step_only, controller_->scheduler().pool());
  // Spend at most ~0.5% of the loop's CPU on this: wait 200x what it
  // cost (a 200,000-task step costs ~20 ms here, so its ratios are
  // recomputed every ~4 s while /metrics is read; small steps every 1 s,
  // or as often as the step is old while it is younger).
  const TimeUs cost = ThreadCpuUs() - cpu0;
  if (large) next_large_ = now + 200 * cost;
  if (m.tasks == 0) return;  // nothing ran yet: still NaN
  r.computed = now;
  r.period = RatioPeriod(now - r.since, cost);
  r.masking = m.masking_ratio;
  r.bubble = m.bubble_ratio;
  r.utilisation = m.utilisation;
}

void LiveMetrics::TakeResults(TimeUs now) {
  std::map<JobId, Result> ready;
  {
    std::lock_guard<std::mutex> lock(results_->mu);
    ready.swap(results_->ready);
  }
  for (const auto& [id, res] : ready) {
    auto it = ratios_.find(id);
    if (it == ratios_.end()) continue;  // ended meanwhile
    StepRatios& r = it->second;
    if (res.step != r.step) continue;  // a step that is over
    r.pending = false;
    if (!res.known) continue;  // nothing ran yet: still NaN
    r.computed = now;
    // Off the loop the walk costs the loop only its copy, but the same 0.5%
    // rule keeps the helper thread's share as small (only large steps are
    // walked there, so they share the large steps' budget).
    r.period = RatioPeriod(now - r.since, res.cost_us);
    next_large_ = std::max(next_large_, now + 200 * res.cost_us);
    r.masking = res.masking;
    r.bubble = res.bubble;
    r.utilisation = res.utilisation;
  }
}

std::string LiveMetrics::PrometheusText(TimeUs now, const std::string& extra) {
  const Controller& c = *controller_;
  const ControllerCounters& k = c.counters();
  const Scheduler& s = c.scheduler();
  const ResourcePool& pool = s.pool();
  std::string out;
  auto metric = [&out](const char* name, const char* type, const char* help, double v) {
    Header(&out, name, type, help);
    out += std::string(name) + " " + Num(v) + "\n";
  };
  // Unix seconds, as Prometheus's process_start_time_seconds: a restart
  // shows as a step, and the other series line up with logs by it.
  {
    Header(&out, "hmpmd_controller_start_time_seconds", "gauge",
           "When this controller process started, in seconds since 1970 (wall clock).");
    char buf[64];  // %.9g would round to 10 s
    std::snprintf(buf, sizeof buf, "%.6f",
                  static_cast<double>(c.wall_clock().ToUnixUs(c.started_at())) / 1e6);
    out += std::string("hmpmd_controller_start_time_seconds ") + buf + "\n";
  }
  metric("hmpmd_tasks_dispatched_total", "counter", "Task runs sent to workers.",
         static_cast<double>(k.tasks_dispatched));
  metric("hmpmd_tasks_finished_total", "counter", "Task runs that finished.",
         static_cast<double>(k.tasks_finished));
  metric("hmpmd_tasks_failed_total", "counter", "Task runs that failed.",
         static_cast<double>(k.tasks_failed));
  metric("hmpmd_workers_alive", "gauge", "Registered live workers.",
         static_cast<double>(c.workers().alive_count()));
  metric("hmpmd_dropped_frames_total", "counter", "Malformed frames the controller dropped.",
         static_cast<double>(c.dropped_frames()));
  metric("hmpmd_stale_results_total", "counter", "Results of old attempts or ended jobs.",
         static_cast<double>(k.stale_results));
  metric("hmpmd_refused_tokens_total", "counter",
         "Connections, worker registrations and driver sessions refused for their credentials.",
         static_cast<double>(k.refused_tokens));
  metric("hmpmd_batches_sent_total", "counter", "AssignBatch messages sent.",
         static_cast<double>(k.batches_sent));
  metric("hmpmd_adopted_runs_total", "counter",
         "Task runs re-registering workers still held (after a restart).",
         static_cast<double>(k.adopted_runs));
  metric("hmpmd_adopted_outputs_total", "counter",
         "Stored outputs re-registering workers reported (after a restart).",
         static_cast<double>(k.adopted_outputs));
  metric("hmpmd_lost_inputs_total", "counter",
         "Task runs that could not read an input, which was then rebuilt.",
         static_cast<double>(k.lost_inputs));
  metric("hmpmd_early_dispatched_total", "counter",
         "Task runs dispatched behind a producer on the same core before it finished.",
         static_cast<double>(k.early_runs));
  metric("hmpmd_worker_restarts_total", "counter",
         "Workers lost because a new process registered under their name.",
         static_cast<double>(k.worker_restarts));
  metric("hmpmd_rebuilt_runs_total", "counter",
         "Done task runs run again at the end of a restart for outputs no worker held.",
         static_cast<double>(k.rebuilt_runs));
  {
    const RecoveryWindow& r = c.recovery();
    const char* state = r.open()                                       ? "waiting"
                        : r.how() == RecoveryWindow::End::kWorkersBack ? "workers_back"
                        : r.how() == RecoveryWindow::End::kDeadline    ? "grace_expired"
                                                                       : "none";
    Header(&out, "hmpmd_recovery", "gauge",
           "After a restart: 1 for the state of the wait for workers (none without one).");
    out += std::string("hmpmd_recovery{state=\"") + state + "\"} 1\n";
  }

  // Running (dispatched, not ended) and queued (ready, waiting for a core)
  // runs by core kind; O(cores), never O(tasks), since scrapes may be many.
  uint64_t by_state[5] = {};
  for (const auto& [id, job] : s.jobs()) ++by_state[static_cast<int>(job.state)];
  std::array<uint64_t, kNumCoreKinds> running{}, queued{};
  for (CoreId cid = 0; cid < pool.core_count(); ++cid) {
    running[static_cast<size_t>(pool.core(cid).kind)] += pool.core(cid).queued;
  }
  for (size_t i = 0; i < kNumCoreKinds; ++i) queued[i] = s.ready_count(static_cast<CoreKind>(i));
  Header(&out, "hmpmd_tasks_running", "gauge", "Task runs dispatched and not ended, by core kind.");
  for (size_t i = 0; i < kNumCoreKinds; ++i) {
    out += "hmpmd_tasks_running{core=\"" + std::string(CoreKindName(static_cast<CoreKind>(i))) +
           "\"} " + std::to_string(running[i]) + "\n";
  }
  Header(&out, "hmpmd_tasks_queued", "gauge",
         "Task runs ready and waiting for a core, by core kind.");
  for (size_t i = 0; i < kNumCoreKinds; ++i) {
    out += "hmpmd_tasks_queued{core=\"" + std::string(CoreKindName(static_cast<CoreKind>(i))) +
           "\"} " + std::to_string(queued[i]) + "\n";
  }
  Header(&out, "hmpmd_jobs", "gauge", "Jobs by state.");
  for (int st = 0; st < 5; ++st) {
    out += "hmpmd_jobs{state=\"" + std::string(JobStateName(static_cast<JobState>(st))) + "\"} " +
           std::to_string(by_state[st]) + "\n";
  }

  Header(&out, "hmpmd_dispatch_latency_seconds", "histogram",
         "From the controller sending a task to the worker starting it.");
  uint64_t cum = 0;
  for (size_t b = 0; b < kLatencyBuckets.size(); ++b) {
    cum += latency_counts_[b];
    out += "hmpmd_dispatch_latency_seconds_bucket{le=\"" + Num(kLatencyBuckets[b]) + "\"} " +
           std::to_string(cum) + "\n";
  }
  cum += latency_counts_.back();
  out += "hmpmd_dispatch_latency_seconds_bucket{le=\"+Inf\"} " + std::to_string(cum) + "\n";
  out += "hmpmd_dispatch_latency_seconds_sum " + Num(latency_sum_s_) + "\n";
  out += "hmpmd_dispatch_latency_seconds_count " + std::to_string(latency_count_) + "\n";

  // Per device: busy time (rate() of it over cores is utilisation) and the
  // share of its cores holding work now.
  Header(&out, "hmpmd_device_busy_seconds_total", "counter", "Measured task time run per device.");
  // The devices /pool lists: one series per worker, not per registration.
  const std::vector<bool> listed = c.workers().ListedDevices(pool.device_count());
  for (DeviceId d = 0; d < pool.device_count(); ++d) {
    if (!listed[d]) continue;
    double busy = d < device_busy_s_.size() ? device_busy_s_[d] : 0.0;
    out += "hmpmd_device_busy_seconds_total{device=\"" + std::to_string(d) + "\",name=\"" +
           Escape(pool.device(d).desc.name) + "\"} " + Num(busy) + "\n";
  }
  Header(&out, "hmpmd_device_utilisation", "gauge",
         "Share of a live device's cores holding dispatched work now.");
  for (DeviceId d = 0; d < pool.device_count(); ++d) {
    const auto& dev = pool.device(d);
    if (!dev.alive || dev.cores.empty()) continue;
    size_t busy = 0;
    for (CoreId cid : dev.cores) busy += pool.core(cid).queued > 0;
    out += "hmpmd_device_utilisation{device=\"" + std::to_string(d) + "\",name=\"" +
           Escape(dev.desc.name) + "\"} " + Num(double(busy) / dev.cores.size()) + "\n";
  }

  // Masking and bubble ratios of each running job's current step.
  TakeResults(now);
  std::string masking, bubble, util;
  for (const auto& [id, job] : s.jobs()) {
    if (job.state != JobState::kRunning) continue;
    StepRatios& r = ratios_[id];
    if (r.since == 0 || r.step != job.step) {  // a new step: nothing known yet
      r = StepRatios{};
      r.since = now;
      r.step = job.step;
    }
    // A large step's first figures wait a period (NaN until then): each
    // computation copies the job's runs, and a controller running one large
    // job after another would otherwise pay it for every job.
    // Large ones also share one budget: after one costs C, no large one
    // runs for 200 C, however many jobs start meanwhile.
    const bool large = job.runs.size() > kEagerRatioRuns;
    const bool due = (r.computed != 0 ? now - r.computed >= r.period
                                      : !large || now - r.since >= kRatioPeriodUs) &&
                     (!large || now >= next_large_);
    if (due && !r.pending) ComputeRatios(id, job, r, now, large);
    auto value = [&r](double v) { return r.computed != 0 ? Num(v) : std::string("NaN"); };
    std::string labels =
        "{job=\"" + std::to_string(id) + "\",step=\"" + std::to_string(r.step) + "\"} ";
    masking += "hmpmd_step_masking_ratio" + labels + value(r.masking) + "\n";
    bubble += "hmpmd_step_bubble_ratio" + labels + value(r.bubble) + "\n";
    util += "hmpmd_step_utilisation" + labels + value(r.utilisation) + "\n";
  }
  for (auto it = ratios_.begin(); it != ratios_.end();) {
    const JobRun* j = s.job(it->first);
    it = (j == nullptr || j->state != JobState::kRunning) ? ratios_.erase(it) : std::next(it);
  }
  Header(&out, "hmpmd_step_masking_ratio", "gauge",
         "Running step: communication time overlapping compute / communication time.");
  out += masking;
  Header(&out, "hmpmd_step_bubble_ratio", "gauge",
         "Running step: idle device-time / (devices x step span).");
  out += bubble;
  Header(&out, "hmpmd_step_utilisation", "gauge", "Running step: busy core-time / (cores x span).");
  out += util;
  if (const StoreWriter* w = c.store_writer()) {
    AppendStoreMetrics(&out, w->write_latency(), w->batches_written(), w->write_errors());
  }
  out += extra;
  return out;
}

}  // namespace hmpmd
