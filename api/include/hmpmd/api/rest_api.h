// RestApi: the HTTP routes of docs/rest-api.md, over the controller,
// plus the dashboard's static files (/, /dashboard/*) and the OpenAPI
// document (/api/v1/openapi.json), which are compiled into the binary and
// served without touching the loop.
//
// Every route is one row of Routes() (rest_routes.h), which says where its
// answer is made. Handle() is called on the HTTP server's thread. A
// submitted spec is parsed and checked on a thread of its own, so a large
// spec never stalls the scheduler or other requests. The read routes the
// dashboard and scrapers hammer (pool, jobs, a job's summary, /metrics) are
// served from ApiSnapshots, which the loop renders at a bounded rate,
// without posting to the loop at all. Whatever changes controller state, or
// reads a running job's tasks, is posted to the loop, which answers through
// `reply`. Heavy bodies (task pages, traces; an ended job's DAG) are copied
// out on the loop (an ended job once: it never changes) and formatted on the
// RestApi's own formatting thread; a running job's DAG covers one step and
// is rendered on the loop.
// Thread-safety: Handle() may be called from any thread.
#pragma once

#include <atomic>
#include <deque>
#include <functional>
#include <list>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>

#include "hmpmd/api/api_snapshot.h"
#include "hmpmd/api/dashboard_assets.h"
#include "hmpmd/api/event_feed.h"
#include "hmpmd/api/rest_routes.h"
#include "hmpmd/api/task_thread.h"
#include "hmpmd/controller/controller.h"
#include "hmpmd/http/cpu_budget.h"
#include "hmpmd/http/http_types.h"

namespace hmpmd {

// The header every answer carries: Controller::epoch(), in decimal.
inline constexpr std::string_view kStoreHeader = "Hmpmd-Store";

struct RestApiOptions {
  ApiSnapshotOptions snapshots;
  // Nice value of the formatting thread (Linux: per thread), so rendering
  // big answers takes CPU the loop and workers leave over. Default: 10.
  int formatter_nice = 10;
  // SCHED_IDLE for the formatting thread instead (see
  // HttpServerOptions::idle_priority). Default: false.
  bool formatter_idle = false;
  // CPU budget the formatting thread charges each rendering to (share it
  // with the HTTP server: HttpServerOptions::cpu_budget); over budget it
  // pauses before the next one. Null: no cap. Default: null.
  std::shared_ptr<CpuBudget> cpu_budget;
  // CPU budget of the thread that parses submitted specs (at the
  // formatter's priority), charged per spec. Its own, not cpu_budget: a
  // large spec's parse (seconds of CPU) would put the shared one in debt
  // and pause every read for ten times as long. Null: no cap.
  // Default: null.
  std::shared_ptr<CpuBudget> parse_budget;
  // Ended jobs whose copy is kept for their task pages, trace and DAG (each
  // costs about 80 bytes per task run). Default: 4.
  size_t ended_job_copies = 4;
  // Answers rendered from ended jobs (task pages, traces, DAGs) kept to be
  // sent again, by route and query; they never change. Bodies over a
  // quarter of this are not kept. Default: 8 MiB.
  size_t rendered_cache_bytes = size_t{8} << 20;
  // With a token, reads (every GET but the dashboard's files) open to
  // anyone who reaches the HTTP port; writes still need it. Default: false.
  bool public_read = false;
  // With a token, /metrics open to anyone (Prometheus scrapes without
  // one). Default: false.
  bool public_metrics = false;
};

// Counts of the work requests made for the loop (for tests and benchmarks).
struct RestApiStats {
  // Requests the loop answered itself (mutations, running jobs' pages,
  // an ended job's first summary).
  uint64_t loop_requests = 0;
  // Snapshot reads that found the snapshot out of date and waited for the
  // next one.
  uint64_t parked = 0;
  // Refreshes asked of the loop for them: one per wave of waiting reads,
  // however many reads wait.
  uint64_t refreshes = 0;
};

class RestApi {
 public:
  // `controller` outlives this object and its loop is running (or will
  // run): the snapshot publisher hooks into it. `tokens` (which outlives
  // this object) says who may read and who may write; null or a book
  // without tokens: no auth.
  RestApi(Controller* controller, const TokenBook* tokens, SpecLimits limits,
          RestApiOptions options = {});
  // Detaches from the loop, finishes queued formatting work and joins the
  // formatting thread.
  ~RestApi();
  RestApi(const RestApi&) = delete;
  RestApi& operator=(const RestApi&) = delete;

  // Serves /metrics from `feed` (live metrics) instead of the basic
  // counters, and publishes a fresh snapshot before each of its broadcasts.
  // Call before serving and before feed->Start(); `feed` outlives this object.
  void SetEventFeed(EventFeed* feed);

  // Answers `req` as its route in Routes() says.
  void Handle(HttpRequest req, HttpReply reply);
  // The answer that refuses `req` a route of `access` (401 with no token,
  // 403 with a wrong one, or one of role read for a write), or nullopt
  // when it may go on. Thread-safe.
  std::optional<HttpResponse> Refusal(RouteAccess access, const HttpRequest& req) const;
  // Whose jobs `req`, let through a route of `access`, may see and change:
  // its token's tenant, or nullopt for every job (RouteCall::tenant).
  // Thread-safe.
  std::optional<std::string> TenantOf(RouteAccess access, const HttpRequest& req) const;
  // The answer that refuses `req` the event stream, or nullopt: a read
  // (Refusal) that may see every job, as the stream shows them all.
  std::optional<HttpResponse> EventsRefusal(const HttpRequest& req) const;
  // The routes this API serves (rest_routes.h).
  static const RouteTable& Routes();
  // What rendering the snapshots has cost the loop. Thread-safe.
  ApiSnapshotStats snapshot_stats() const { return snapshots_->stats(); }
  // What serving has cost the loop, in counts. Thread-safe.
  RestApiStats stats() const {
    return {loop_requests_.load(std::memory_order_relaxed),
            parked_total_.load(std::memory_order_relaxed),
            refreshes_.load(std::memory_order_relaxed)};
  }

  // One-line JSON error body: {"error": "..."}.
  static HttpResponse Error(int status, const std::string& message);
  static HttpResponse Json(int status, const std::string& body);
  // `status` (204 for OPTIONS) with no body and the header Allow: `allow`.
  static HttpResponse Allow(int status, std::string_view allow);
  // 200 with `body` shared, not copied (a snapshot's or a kept rendering).
  static HttpResponse SharedJson(std::shared_ptr<const std::string> body);

 private:
  struct JobCopy {
    std::shared_ptr<const JobRun> job;
    std::shared_ptr<const ResourcePool> pool;
    JobClock clock;  // its wall clock and history (Controller::ClockOf)
  };
  // The bodies RenderOffLoop formats.
  enum class Rendered : uint8_t { kTasks, kTrace, kDag };

  // The route table (rest_routes.cc).
  static const Route kRoutes[];

  // --- route handlers (see Route::handler) ---
  bool GetAsset(RouteCall& call);    // HTTP thread
  bool GetPool(RouteCall& call);     // snapshot, or loop
  bool GetJobs(RouteCall& call);     // snapshot, or loop
  bool GetMetrics(RouteCall& call);  // snapshot, or loop
  bool PostJob(RouteCall& call);     // parser thread
  bool GetJob(RouteCall& call);      // snapshot, or loop
  bool DeleteJob(RouteCall& call);   // loop
  bool GetTasks(RouteCall& call);    // snapshot, or loop
  bool GetTrace(RouteCall& call);    // snapshot, or loop
  bool GetDag(RouteCall& call);      // snapshot, or loop
  bool GetOutputs(RouteCall& call);  // snapshot, or loop
  bool GetLogs(RouteCall& call);     // loop: one task's log lines and errors

  // Runs `call`'s handler on the loop.
  void ToLoop(RouteCall call);
  // Answers `call` with the snapshot's body `body` (the loop refreshes the
  // snapshot first), or, for a call limited to one tenant, with what
  // `of_tenant` makes of the snapshot for it (null: the same body).
  bool ServeSnapshotBody(RouteCall& call, std::string ApiSnapshot::*body,
                         std::string (ApiSnapshot::*of_tenant)(std::string_view) const,
                         const char* content_type);
  // With a snapshot: answers 404 for a job the snapshot does not hold (true).
  bool SnapshotLacksJob(RouteCall& call);
  // On the loop: the call's job, or null after answering 404.
  const JobRun* LoopJob(RouteCall& call);
  // Tasks, trace or DAG: from the kept renderings and ended jobs' copies
  // off the loop; on the loop, from a copy (or, for a running job's DAG,
  // at once).
  bool ServeRendered(RouteCall& call, Rendered what);
  // The holder of `Authorization: Bearer TOKEN`; nullopt for none.
  std::optional<TokenHolder> Holder(const HttpRequest& req) const;
  // A holder of any role, or no token set.
  bool Authorised(const HttpRequest& req) const;
  // One copy of a compiled-in file's bytes, made on first use. Any thread.
  std::shared_ptr<const std::string> AssetBody(const EmbeddedAsset& a);
  // A read of a kSnapshot route while the snapshot may not be served: waits
  // for the loop's next refresh, which serves every read waiting by then.
  // Any thread.
  void Park(RouteCall call);
  // Posts the one refresh for the reads parked so far. REQUIRES parked_mu_.
  void PostRefreshLocked();
  // Answering thread: answers the reads parked before the refresh that
  // published `snap` (sequence numbers below `upto`).
  void ServeParked(std::shared_ptr<const ApiSnapshot> snap, uint64_t upto);
  // Renders `what` of `copy` on the formatting thread; keeps the answer
  // when `ended`. Any thread.
  void RenderOffLoop(JobCopy copy, bool ended, Rendered what, const std::string& query,
                     HttpReply reply);
  std::shared_ptr<const std::string> FindRendered(const std::string& key);  // any thread
  void KeepRendered(const std::string& key, std::shared_ptr<const std::string> body);
  std::optional<JobCopy> FindEndedCopy(JobId id);  // any thread
  JobCopy EndedCopy(const JobRun& job);            // loop: finds or makes
  void DropCached(JobId id);                       // any thread: a forgotten job
  // Loop: DELETE /api/v1/jobs/{id}?forget=true.
  void ForgetOnLoop(JobId id, HttpReply reply);
  // Runs `fn` on the formatting thread: large answers are copied out on the
  // loop and turned into JSON there, so they cost the loop a copy only.
  void OffLoop(std::function<void()> fn);
  // Parsing thread: checks a submitted spec and hands the job to the loop.
  void ParseAndSubmit(std::string body, JobTenant tenant, HttpReply reply);

  Controller* controller_;
  const TokenBook* const tokens_;
  SpecLimits limits_;
  RestApiOptions options_;
  EventFeed* feed_ = nullptr;
  std::shared_ptr<ApiSnapshots> snapshots_;
  std::atomic<uint64_t> loop_requests_{0}, parked_total_{0}, refreshes_{0};

  struct Parked {
    RouteCall call;
    uint64_t seq;
  };
  std::mutex parked_mu_;
  std::deque<Parked> parked_;    // oldest first; guarded by parked_mu_
  uint64_t parked_seq_ = 0;      // guarded by parked_mu_
  bool refresh_posted_ = false;  // guarded by parked_mu_

  std::mutex assets_mu_;
  std::map<std::string, std::shared_ptr<const std::string>> assets_;  // guarded by assets_mu_

  std::mutex copies_mu_;
  std::list<std::pair<JobId, JobCopy>> ended_copies_;  // most recent first; guarded by copies_mu_
  std::mutex rendered_mu_;
  // Most recent first; guarded by rendered_mu_, as is rendered_bytes_.
  std::list<std::pair<std::string, std::shared_ptr<const std::string>>> rendered_;
  size_t rendered_bytes_ = 0;

  std::unique_ptr<TaskThread> formatter_;
  std::unique_ptr<TaskThread> parser_;  // submitted specs, in arrival order
  // Answers reads parked for a fresh snapshot: bodies already rendered, so
  // no budget. On the formatter they would wait behind a trace and the
  // pause its CPU costs (13 s for a 200,000-run trace at the default 10%).
  std::unique_ptr<TaskThread> answerer_;
};

}  // namespace hmpmd
