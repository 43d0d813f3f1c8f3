#include "hmpmd/api/event_feed.h"

#include <pthread.h>

#include <algorithm>
#include <nlohmann/json.hpp>

#include "hmpmd/http/cpu_budget.h"
#include "hmpmd/http/thread_priority.h"
#include "hmpmd/protocol/json_text.h"

namespace hmpmd {
namespace {

using json = nlohmann::json;

std::string Chunk(const char* event, const std::string& data) {
  return std::string("event: ") + event + "\ndata: " + data + "\n\n";
}

}  // namespace

EventFeed::EventFeed(Controller* controller, EventFeedOptions options, BroadcastFn broadcast,
                     ClientCountFn clients)
    : controller_(controller),
      options_(options),
      broadcast_(std::move(broadcast)),
      clients_(std::move(clients)),
      metrics_(controller) {}

EventFeed::~EventFeed() { Stop(); }

void EventFeed::Start() {
  controller_->Post([this] {
    controller_->SetObserver(this);
    metrics_.SetOffload([this](std::function<void()> fn) {
      {
        std::lock_guard<std::mutex> lock(mu_);
        work_.push_back(std::move(fn));
      }
      cv_.notify_one();
    });
  });
  ticker_ = std::thread([this] { TickerLoop(); });
}

void EventFeed::Stop() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  if (ticker_.joinable()) ticker_.join();
}

std::string EventFeed::Hello() {
  controller_->Post([this] { active_ = true; });
  return Chunk("hello", JsonText(json{{"version", 1}, {"now_us", Controller::NowUs()}}));
}

void EventFeed::TickerLoop() {
  pthread_setname_np(pthread_self(), "hmpmd-feed");
  (void)SetThisThreadPriority(options_.nice, false);
  CpuBudget::Meter meter(options_.cpu_budget, std::chrono::microseconds(0));
  bool was_active = false;
  std::unique_lock<std::mutex> lock(mu_);
  auto next = std::chrono::steady_clock::now() + options_.flush_period;
  for (;;) {
    cv_.wait_until(lock, next, [this] { return stop_ || !pending_.empty() || !work_.empty(); });
    if (stop_) return;
    while (!work_.empty()) {
      auto fn = std::move(work_.front());
      work_.pop_front();
      lock.unlock();
      fn();
      (void)meter.MaybeCharge(true);
      lock.lock();
    }
    // Format and send what the loop gathered, outside the lock.
    while (!pending_.empty()) {
      Batch b = std::move(pending_.front());
      pending_.pop_front();
      lock.unlock();
      Send(std::move(b));
      (void)meter.MaybeCharge(true);  // over budget: the next batch waits
      lock.lock();
    }
    if (std::chrono::steady_clock::now() < next) continue;
    next += options_.flush_period;
    if (next < std::chrono::steady_clock::now()) next = std::chrono::steady_clock::now();
    bool active = clients_() > 0;
    // Post only while there are clients (and once more to switch off), so
    // an unwatched controller does no event work at all.
    if (active || was_active) {
      controller_->Post([this, active] {
        const int64_t cpu0 = CpuBudget::ThreadCpuUs();
        std::optional<Batch> b = Gather(active, Controller::NowUs());
        if (b) {
          std::lock_guard<std::mutex> guard(mu_);
          pending_.push_back(std::move(*b));
        }
        cv_.notify_one();
        flushes_.fetch_add(1, std::memory_order_relaxed);
        flush_cpu_us_.fetch_add(
            static_cast<uint64_t>(std::max<int64_t>(0, CpuBudget::ThreadCpuUs() - cpu0)),
            std::memory_order_relaxed);
      });
    }
    was_active = active;
  }
}

void EventFeed::Push(const Record& r) {
  if (buffer_.size() >= options_.max_buffered_records) {
    ++dropped_;
    return;
  }
  buffer_.push_back(r);
}

void EventFeed::OnDispatched(const Dispatch* d, size_t n, TimeUs now) {
  if (!active_) return;
  for (size_t i = 0; i < n; ++i) Push({d[i].job, d[i].run, 0, d[i].core, now, 0});
}

void EventFeed::OnTaskEnded(JobId job, uint32_t run, bool ok, TimeUs start, TimeUs end,
                            TimeUs now) {
  (void)now;
  metrics_.OnTaskEnded(job, run, start, end);
  if (!active_) return;
  const JobRun* j = controller_->scheduler().job(job);
  const bool known = j != nullptr && run < j->runs.size();
  // The scheduler has already decided: a failed run it did not end runs
  // again (its kernel's retry, or its gang's new attempt), with its core
  // released (so the core recorded is none).
  const TaskState s = known ? j->runs[run].state : TaskState::kFailed;
  const bool again =
      !ok && known && !IsTerminal(j->state) &&
      (s == TaskState::kReady || s == TaskState::kBlocked || s == TaskState::kRunning);
  CoreId core = known ? j->runs[run].core : kNoCore;
  Push({job, run, static_cast<uint8_t>(ok ? 1 : again ? 3 : 2), core, start, end});
}

std::string EventFeed::TasksEvent(const Batch& b) {
  std::string out = "{\"now_us\":" + std::to_string(b.now) + ",\"tasks\":[";
  bool comma = false;
  for (const Row& row : b.rows) {
    const Record& r = row.r;
    const JobGraph& g = *row.graph;
    uint32_t t = r.run % g.size();
    json e =
        json::array({r.job, r.run, r.phase, r.core == kNoCore ? -1L : long(r.core), row.device,
                     r.t0, r.t1, g.spec_task(t).id, g.spec().submodels[g.task(t).submodel].name});
    if (comma) out += ',';
    out += JsonText(e);
    comma = true;
  }
  out += "],\"dropped\":" + std::to_string(b.dropped) + "}";
  return Chunk("tasks", out);
}

std::string EventFeed::JobsEvent(TimeUs now) {
  json jobs = json::array();
  const Scheduler& sched = controller_->scheduler();
  const auto& all = sched.jobs();
  for (const auto& [id, job] : all) {
    // O(cores): only while it has runs out.
    const uint64_t queued =
        job.running > 0 ? std::min<uint64_t>(sched.QueuedRuns(id), job.running) : 0;
    auto it = jobs_seen_.find(id);
    if (it != jobs_seen_.end() && it->second.state == job.state && it->second.done == job.done &&
        it->second.running == job.running && it->second.queued == queued) {
      continue;
    }
    jobs_seen_[id] = JobSeen{job.state, job.done, job.running, queued};
    uint64_t total = job.graph->total_runs();
    json e = {{"id", id},
              {"name", job.graph->spec().name},
              {"state", std::string(JobStateName(job.state))},
              {"done", job.done},
              {"running", job.running - queued},
              {"queued", queued},
              {"tasks", total},
              {"progress", total ? double(job.done) / total : 0.0}};
    if (!job.error.empty()) e["error"] = job.error;
    jobs.push_back(std::move(e));
  }
  // Forget jobs the controller forgot.
  for (auto it = jobs_seen_.begin(); it != jobs_seen_.end();) {
    it = all.count(it->first) ? std::next(it) : jobs_seen_.erase(it);
  }
  if (jobs.empty()) return {};
  return Chunk("jobs", JsonText(json{{"now_us", now}, {"jobs", std::move(jobs)}}));
}

void EventFeed::Flush(bool active, TimeUs now) {
  const int64_t cpu0 = CpuBudget::ThreadCpuUs();
  std::optional<Batch> b = Gather(active, now);
  if (b) Send(std::move(*b));
  flushes_.fetch_add(1, std::memory_order_relaxed);
  flush_cpu_us_.fetch_add(
      static_cast<uint64_t>(std::max<int64_t>(0, CpuBudget::ThreadCpuUs() - cpu0)),
      std::memory_order_relaxed);
}

std::optional<EventFeed::Batch> EventFeed::Gather(bool active, TimeUs now) {
  if (before_flush_) before_flush_(now);
  if (!active) {
    active_ = false;
    buffer_.clear();
    dropped_ = 0;
    jobs_seen_.clear();
    pool_seen_ = 0;
    return std::nullopt;
  }
  active_ = true;
  Batch b;
  b.now = now;
  if (!buffer_.empty() || dropped_ > 0) {
    b.has_tasks = true;
    const Scheduler& s = controller_->scheduler();
    const ResourcePool& pool = s.pool();
    size_t n = std::min(buffer_.size(), options_.max_records_per_flush);
    // Keep the newest records: the page shows the present.
    size_t first = buffer_.size() - n;
    dropped_ += first;
    b.rows.reserve(n);
    JobId last_job = 0;
    const JobRun* job = nullptr;
    for (size_t i = first; i < buffer_.size(); ++i) {
      const Record& r = buffer_[i];
      if (job == nullptr || r.job != last_job) {
        job = s.job(r.job);
        last_job = r.job;
        if (job && (b.graphs.empty() || b.graphs.back() != job->graph)) {
          b.graphs.push_back(job->graph);
        }
      }
      if (job == nullptr || r.run >= job->runs.size()) continue;
      long device = r.core == kNoCore ? -1 : static_cast<long>(pool.core(r.core).device);
      b.rows.push_back(Row{r, device, job->graph.get()});
    }
    b.dropped = dropped_;
    dropped_total_ += dropped_;
    dropped_ = 0;
    buffer_.clear();
  }
  b.after_tasks = JobsEvent(now);
  if (controller_->workers().pool_changes() != pool_seen_) {
    pool_seen_ = controller_->workers().pool_changes();
    uint64_t stored = 0;
    for (const WorkerInfo& w : controller_->workers()) stored += w.alive ? w.store_bytes : 0;
    b.after_tasks += Chunk("pool", JsonText(json{{"now_us", now},
                                                 {"workers", controller_->workers().size()},
                                                 {"alive", controller_->workers().alive_count()},
                                                 {"store_bytes", stored}}));
  }
  if (!b.has_tasks && b.after_tasks.empty()) return std::nullopt;
  ++events_sent_;
  return b;
}

void EventFeed::Send(Batch b) {
  std::string batch;
  if (b.has_tasks) batch = TasksEvent(b);
  batch += b.after_tasks;
  broadcast_(std::move(batch));
}

std::string EventFeed::PrometheusText(TimeUs now) {
  std::string extra =
      "# HELP hmpmd_event_records_dropped_total Task records left out of the live event "
      "stream.\n# TYPE hmpmd_event_records_dropped_total counter\n"
      "hmpmd_event_records_dropped_total " +
      std::to_string(dropped_total_) +
      "\n"
      "# HELP hmpmd_event_batches_total Batched event chunks broadcast.\n"
      "# TYPE hmpmd_event_batches_total counter\n"
      "hmpmd_event_batches_total " +
      std::to_string(events_sent_) + "\n";
  return metrics_.PrometheusText(now, extra);
}

}  // namespace hmpmd
