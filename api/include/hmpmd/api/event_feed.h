// EventFeed: live updates for GET /api/v1/events and the numbers /metrics
// adds to the controller's counters.
//
// The controller loop calls it (as its ControllerObserver) for every batch
// of dispatches and every ended run. At 100k+ tasks/s nothing may be
// formatted per task on the loop, so:
//  1. While no SSE client is connected it records nothing but metrics;
//     a new client's hello switches recording on.
//  2. With clients, the loop appends compact records to a bounded buffer
//     (a few words per run); runs beyond the buffer are counted as dropped.
//  3. A ticker thread posts a flush to the loop every flush period. On the
//     loop it only takes the buffer (at most max_records_per_flush records,
//     the rest counted as dropped) with what formatting them needs (each
//     record's device and job graph, which is immutable), and formats the
//     small "jobs" event (the jobs whose state or progress changed) and a
//     "pool" event when workers joined or left or their stores changed. The ticker thread then
//     formats the records into one batched "tasks" event and hands it all
//     to the broadcast function (which returns at once: HttpServer fans it
//     out on its own thread). So the loop's share of a flush is a copy of
//     a few words per record, never JSON per task.
// Job progress and state always come from the "jobs" event, so a page that
// lost task records is still right about jobs.
//
// Event data (JSON):
//  hello: {"version": 1, "now_us"}            (sent by the server itself)
//  tasks: {"now_us", "dropped", "tasks": [[job, run, phase, core, device,
//          t0_us, t1_us, task_id, submodel], ...]}; phase 0 = dispatched
//          (t0 = dispatch time), 1 = finished, 2 = failed (t0..t1 = the
//          measured run); times on the controller's clock.
//  jobs:  {"now_us", "jobs": [{id, name, state, done, running, tasks,
//          progress, error?}]}
//  pool:  {"now_us", "workers", "alive", "store_bytes"}: a worker joined or
//          died, or one's object store changed size (re-read /api/v1/pool);
//          store_bytes sums the live workers'.
//
// Thread-safety: Start() and Stop() on one owner thread; the observer
// methods, Flush() and PrometheusText() on the loop thread only; flushes()
// and flush_cpu_us() anywhere.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "hmpmd/api/live_metrics.h"
#include "hmpmd/controller/controller.h"
#include "hmpmd/http/cpu_budget.h"

namespace hmpmd {

struct EventFeedOptions {
  // How often buffered records are flushed. Lower: livelier page, more
  // events. Default: 100 ms.
  std::chrono::milliseconds flush_period{100};
  // Task records per "tasks" event; the rest of a flush is counted as
  // dropped. Bounds what one flush costs the loop and the page.
  // Default: 2000.
  size_t max_records_per_flush = 2000;
  // Task records kept between flushes; beyond this they are dropped (and
  // counted). Default: 20000.
  size_t max_buffered_records = 20000;
  // Nice value of the ticker thread, which formats the task records (see
  // HttpServerOptions::nice). Default: 10.
  int nice = 10;
  // CPU budget the ticker thread charges its formatting to (share the HTTP
  // side's: HttpServerOptions::cpu_budget). Null: no cap. Default: null.
  std::shared_ptr<CpuBudget> cpu_budget;
};

class EventFeed : public ControllerObserver {
 public:
  using BroadcastFn = std::function<void(std::string)>;
  using ClientCountFn = std::function<size_t()>;

  // `controller` outlives the feed; `broadcast` and `clients` are
  // thread-safe (HttpServer::Broadcast and sse_client_count).
  EventFeed(Controller* controller, EventFeedOptions options, BroadcastFn broadcast,
            ClientCountFn clients);
  ~EventFeed() override;
  EventFeed(const EventFeed&) = delete;
  EventFeed& operator=(const EventFeed&) = delete;

  // Sets a function Flush() calls first, on the loop (e.g. to publish what
  // readers see before they hear of it). Call before Start().
  void SetBeforeFlush(std::function<void(TimeUs now)> fn) { before_flush_ = std::move(fn); }
  // Installs the feed as the controller's observer (posted to the loop) and
  // starts the ticker, which from then on also walks the step ratios for
  // /metrics (LiveMetrics::SetOffload) off the loop.
  void Start();
  // Stops the ticker. Call before the controller is destroyed; after the
  // loop has ended, or the loop may still call the feed until it is gone.
  void Stop();

  // The SSE hello chunk for a new client; also switches recording on at
  // once (posted to the loop), so the client misses no task after its
  // hello. Thread-safe.
  std::string Hello();

  // --- loop thread only ---
  void OnDispatched(const Dispatch* d, size_t n, TimeUs now) override;
  void OnTaskEnded(JobId job, uint32_t run, bool ok, TimeUs start, TimeUs end, TimeUs now) override;
  // Formats and broadcasts what changed since the last flush, all on the
  // calling thread (the ticker splits this: the gathering on the loop, the
  // formatting on its own thread). `active`: whether SSE clients are
  // connected (when not, the buffer is cleared and recording stops).
  void Flush(bool active, TimeUs now);
  std::string PrometheusText(TimeUs now);
  uint64_t dropped_records() const { return dropped_total_; }
  // Flushes run so far and the loop CPU time they took. Thread-safe.
  uint64_t flushes() const { return flushes_.load(std::memory_order_relaxed); }
  uint64_t flush_cpu_us() const { return flush_cpu_us_.load(std::memory_order_relaxed); }

 private:
  struct Record {
    JobId job;
    uint32_t run;
    uint8_t phase;  // 0 dispatched, 1 finished, 2 failed
    CoreId core;
    TimeUs t0, t1;
  };
  struct JobSeen {
    JobState state;
    uint64_t done;
    uint64_t running;
    uint64_t queued;
  };
  // A record with what formatting it needs, so that it can be formatted
  // off the loop.
  struct Row {
    Record r;
    long device;
    const JobGraph* graph;  // kept alive by Batch::graphs
  };
  // What one flush sends, gathered on the loop.
  struct Batch {
    TimeUs now = 0;
    bool has_tasks = false;
    uint64_t dropped = 0;
    std::vector<Row> rows;
    std::vector<std::shared_ptr<const JobGraph>> graphs;
    std::string after_tasks;  // the jobs and pool events, formatted
  };
  void Push(const Record& r);
  // Loop: takes what changed since the last flush; nullopt: nothing to send.
  std::optional<Batch> Gather(bool active, TimeUs now);
  // Any thread: formats the tasks event and broadcasts the batch.
  void Send(Batch b);
  static std::string TasksEvent(const Batch& b);
  std::string JobsEvent(TimeUs now);
  void TickerLoop();

  Controller* controller_;
  EventFeedOptions options_;
  BroadcastFn broadcast_;
  ClientCountFn clients_;
  LiveMetrics metrics_;
  std::function<void(TimeUs)> before_flush_;

  // Loop thread state.
  bool active_ = false;
  std::vector<Record> buffer_;
  uint64_t dropped_ = 0;        // since the last flush
  uint64_t dropped_total_ = 0;  // for /metrics
  uint64_t events_sent_ = 0;
  std::map<JobId, JobSeen> jobs_seen_;
  uint64_t pool_seen_ = 0;  // WorkerRegistry::pool_changes() at the last pool event
  std::atomic<uint64_t> flushes_{0}, flush_cpu_us_{0};

  // Ticker.
  std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false;          // guarded by mu_
  std::deque<Batch> pending_;  // gathered, to format; guarded by mu_
  // Work the metrics hand off the loop (step ratio walks); guarded by mu_.
  std::deque<std::function<void()>> work_;
  std::thread ticker_;
};

}  // namespace hmpmd
