#include "hmpmd/api/rest_api.h"

#include <cctype>
#include <charconv>
#include <nlohmann/json.hpp>
#include <optional>

#include "hmpmd/api/dashboard_assets.h"
#include "hmpmd/api/live_metrics.h"
#include "hmpmd/api/request_checks.h"
#include "hmpmd/api/task_table.h"
#include "hmpmd/controller/job_report.h"
#include "hmpmd/http/http_target.h"
#include "hmpmd/protocol/json_text.h"

namespace hmpmd {
namespace {

using json = nlohmann::json;

}  // namespace

RestApi::RestApi(Controller* controller, const TokenBook* tokens, SpecLimits limits,
                 RestApiOptions options)
    : controller_(controller), tokens_(tokens), limits_(limits), options_(options) {
  snapshots_ = std::make_shared<ApiSnapshots>(controller_, options_.snapshots, [this](TimeUs now) {
    return feed_ ? feed_->PrometheusText(now) : LiveMetrics(controller_).PrometheusText(now, "");
  });
  controller_->Post([c = controller_, snaps = snapshots_] {
    c->SetIterationHook([snaps](TimeUs now) { snaps->Tick(now); });
  });
  formatter_ = std::make_unique<TaskThread>(TaskThreadOptions{
      "hmpmd-format", options_.formatter_nice, options_.formatter_idle, options_.cpu_budget});
  parser_ = std::make_unique<TaskThread>(TaskThreadOptions{
      "hmpmd-parse", options_.formatter_nice, options_.formatter_idle, options_.parse_budget});
  answerer_ = std::make_unique<TaskThread>(
      TaskThreadOptions{"hmpmd-answer", options_.formatter_nice, options_.formatter_idle, nullptr});
}

RestApi::~RestApi() {
  snapshots_->Detach();
  parser_.reset();  // finishes the specs queued, which post to the loop only
  answerer_.reset();
  formatter_.reset();
}

void RestApi::SetEventFeed(EventFeed* feed) {
  feed_ = feed;
  feed_->SetBeforeFlush([snaps = snapshots_](TimeUs now) { snaps->Tick(now); });
}

void RestApi::OffLoop(std::function<void()> fn) { formatter_->Post(std::move(fn)); }

HttpResponse RestApi::Error(int status, const std::string& message) {
  return Json(status, JsonText(json{{"error", message}}));
}

HttpResponse RestApi::Allow(int status, std::string_view allow) {
  HttpResponse r;
  r.status = status;
  r.content_type.clear();  // no body
  r.headers["Allow"] = std::string(allow);
  return r;
}

HttpResponse RestApi::Json(int status, const std::string& body) {
  HttpResponse r;
  r.status = status;
  r.body = body;
  return r;
}

HttpResponse RestApi::SharedJson(std::shared_ptr<const std::string> body) {
  HttpResponse r;
  r.shared_body = std::move(body);
  return r;
}

std::shared_ptr<const std::string> RestApi::AssetBody(const EmbeddedAsset& a) {
  std::lock_guard<std::mutex> lock(assets_mu_);
  auto& body = assets_[a.path];
  if (!body) {
    body = std::make_shared<const std::string>(reinterpret_cast<const char*>(a.data), a.size);
  }
  return body;
}

std::optional<TokenHolder> RestApi::Holder(const HttpRequest& req) const {
  if (tokens_ == nullptr) return std::nullopt;
  auto it = req.headers.find("authorization");
  if (it == req.headers.end()) return std::nullopt;
  // The scheme is case-insensitive (RFC 7235: "bearer" is "Bearer").
  constexpr std::string_view kScheme = "bearer ";
  const std::string_view got = it->second;
  if (got.size() < kScheme.size()) return std::nullopt;
  for (size_t i = 0; i < kScheme.size(); ++i) {
    if (std::tolower(static_cast<unsigned char>(got[i])) != kScheme[i]) return std::nullopt;
  }
  return tokens_->Find(got.substr(kScheme.size()));
}

bool RestApi::Authorised(const HttpRequest& req) const {
  return tokens_ == nullptr || !tokens_->enabled() || Holder(req).has_value();
}

std::optional<HttpResponse> RestApi::Refusal(RouteAccess access, const HttpRequest& req) const {
  if (tokens_ == nullptr || !tokens_->enabled() || access == RouteAccess::kOpen) {
    return std::nullopt;
  }
  if (access == RouteAccess::kRead && options_.public_read) return std::nullopt;
  if (access == RouteAccess::kMetrics && (options_.public_read || options_.public_metrics)) {
    return std::nullopt;
  }
  const std::optional<TokenHolder> who = Holder(req);
  if (!who) {
    return req.headers.contains("authorization")
               ? Error(403, "wrong token")
               : Error(401, "missing Authorization: Bearer token");
  }
  if (access == RouteAccess::kWrite && who->role == TokenRole::kRead) {
    return Error(
        403, "the token of '" + who->name + "' (role read) may not " + req.method + " " + req.path);
  }
  return std::nullopt;
}

std::optional<std::string> RestApi::TenantOf(RouteAccess access, const HttpRequest& req) const {
  if (tokens_ == nullptr || !tokens_->enabled()) return std::nullopt;
  // What is open to everyone is open whole, token or not.
  if (access == RouteAccess::kRead && options_.public_read) return std::nullopt;
  if (access == RouteAccess::kMetrics && (options_.public_read || options_.public_metrics)) {
    return std::nullopt;
  }
  const std::optional<TokenHolder> who = Holder(req);
  if (!who || who->role == TokenRole::kAdmin) return std::nullopt;
  return who->tenant;
}

std::optional<HttpResponse> RestApi::EventsRefusal(const HttpRequest& req) const {
  if (std::optional<HttpResponse> refused = Refusal(RouteAccess::kRead, req)) return refused;
  if (std::optional<std::string> tenant = TenantOf(RouteAccess::kRead, req)) {
    return Error(403,
                 "the event stream shows every tenant's jobs: it takes an admin's token "
                 "(tenant '" +
                     *tenant + "' reads its own jobs at /api/v1/jobs)");
  }
  return std::nullopt;
}

void RestApi::Handle(HttpRequest req, HttpReply reply) {
  // Every answer names the job store: job ids restart at 1 on a fresh one,
  // and `submit --wait` must not follow another job under its job's id.
  if (const uint64_t epoch = controller_->epoch(); epoch != 0) {
    reply = [inner = std::move(reply), store = std::to_string(epoch)](HttpResponse r) {
      r.headers.emplace(std::string(kStoreHeader), store);
      inner(std::move(r));
    };
  }
  // The route and its methods are judged first, token or not: what they
  // tell (404, 405 and Allow) is in the OpenAPI document anyway.
  if (req.path == "*") {  // asterisk-form: the server as a whole
    if (req.method != "OPTIONS") {
      reply(Error(400, "request target '*': only for OPTIONS"));
    } else {
      reply(Allow(204, Routes().all_methods()));
    }
    return;
  }
  const RouteTable::Match match = Routes().Find(req.path);
  if (match.rows.empty()) return reply(Error(404, "no route " + req.path));
  const Route* route = RouteTable::Row(match, req.method);
  if (route == nullptr && req.method != "OPTIONS") {
    HttpResponse r = Error(405, "method " + req.method + " not allowed on " + req.path +
                                    " (it takes " + std::string(match.allow) + ")");
    r.headers["Allow"] = std::string(match.allow);
    return reply(std::move(r));
  }
  // A mutating call is recorded with its outcome, refused or not.
  if (route != nullptr && route->access == RouteAccess::kWrite && controller_->audit() != nullptr) {
    const std::optional<TokenHolder> who = Holder(req);
    reply = [inner = std::move(reply), log = controller_->audit(),
             who = who ? who->name : std::string(),
             role = who ? std::string(TokenRoleName(who->role)) : std::string(), from = req.peer,
             call = req.method + " " + req.path](HttpResponse r) {
      log->Append(who, role, from, call, std::to_string(r.status));
      inner(std::move(r));
    };
  }
  if (route != nullptr) {
    if (std::optional<HttpResponse> refused = Refusal(route->access, req)) {
      return reply(std::move(*refused));
    }
  }
  // A parameter a route does not take is refused, not silently ignored.
  if (!req.query.empty() && RouteTable::RefusesQuery(match, req.method)) {
    if (auto q = ParseQueryParams(req.query, req.method + " " + req.path, {}); !q.ok()) {
      return reply(Error(400, q.status().message()));
    }
  }
  if (req.method == "OPTIONS") return reply(Allow(204, match.allow));
  // HEAD is GET without the body (the server leaves the body out).
  if (req.method == "HEAD") req.method = "GET";
  std::optional<std::string> tenant = TenantOf(route->access, req);
  RouteCall call{std::move(req), std::move(reply), route, match.id, std::move(tenant), nullptr};
  switch (route->runs) {
    case RouteRuns::kHttpThread:
      (this->*route->handler)(call);
      return;
    case RouteRuns::kParser: {
      auto type = call.req.headers.find("content-type");
      std::string_view given;  // "" when absent
      if (type != call.req.headers.end()) given = type->second;
      if (Status st = CheckJsonContentType(given); !st.ok()) {
        return call.reply(Error(415, st.message()));
      }
      // Parsed and checked off the loop and off this thread.
      parser_->Post(
          [this, call = std::move(call)]() mutable { (this->*call.route->handler)(call); });
      return;
    }
    case RouteRuns::kSnapshot:
    case RouteRuns::kSnapshotOrLoop:
      // Served without the loop when a fresh snapshot (and, for an ended
      // job's heavy routes, a copy of the job) is at hand.
      call.snap = snapshots_->Fresh();
      if (call.snap && (this->*route->handler)(call)) return;
      if (!call.snap && route->runs == RouteRuns::kSnapshot) return Park(std::move(call));
      call.snap = nullptr;
      return ToLoop(std::move(call));
    case RouteRuns::kLoop:
      return ToLoop(std::move(call));
    case RouteRuns::kServer:
      // HttpServer streams these itself; one that reaches here is no route.
      return call.reply(Error(404, "no route " + call.req.path));
  }
}

void RestApi::ToLoop(RouteCall call) {
  loop_requests_.fetch_add(1, std::memory_order_relaxed);
  controller_->Post(
      [this, call = std::move(call)]() mutable { (this->*call.route->handler)(call); });
}

bool RestApi::GetAsset(RouteCall& call) {
  const std::string& path = call.req.path;
  const EmbeddedAsset* a = FindDashboardAsset(path == "/" ? "/index.html" : path);
  // Static files are compiled in; they never touch the loop.
  HttpResponse r;
  r.content_type = a->content_type;
  r.shared_body = AssetBody(*a);  // one copy of the file, shared by every answer
  r.headers["Cache-Control"] = "no-cache";
  call.reply(std::move(r));
  return true;
}

bool RestApi::PostJob(RouteCall& call) {
  // The job is the submitting token's tenant's.
  JobTenant tenant;
  if (std::optional<TokenHolder> who = Holder(call.req)) tenant = {who->tenant, who->share};
  ParseAndSubmit(std::move(call.req.body), std::move(tenant), std::move(call.reply));
  return true;
}

bool RestApi::GetPool(RouteCall& call) {
  return ServeSnapshotBody(call, &ApiSnapshot::pool, nullptr, "application/json");
}

bool RestApi::GetJobs(RouteCall& call) {
  return ServeSnapshotBody(call, &ApiSnapshot::jobs, &ApiSnapshot::JobsOf, "application/json");
}

bool RestApi::GetMetrics(RouteCall& call) {
  return ServeSnapshotBody(call, &ApiSnapshot::metrics, &ApiSnapshot::MetricsOf,
                           "text/plain; version=0.0.4");
}

bool RestApi::ServeSnapshotBody(RouteCall& call, std::string ApiSnapshot::*body,
                                std::string (ApiSnapshot::*of_tenant)(std::string_view) const,
                                const char* content_type) {
  // On the loop: a snapshot as fresh as a read there would see.
  std::shared_ptr<const ApiSnapshot> snap =
      call.snap ? call.snap : snapshots_->RefreshOnLoop(Controller::NowUs());
  if (!snap) {
    call.reply(Error(503, "no snapshot of the controller's state"));  // only once detached
    return true;
  }
  HttpResponse r;
  if (call.tenant && of_tenant != nullptr) {
    r = Json(200, ((*snap).*of_tenant)(*call.tenant));  // one tenant's part, made per call
  } else {
    // The body is sent as it is in the snapshot, shared by every answer (an
    // aliasing pointer keeps the snapshot alive while it is written).
    r = SharedJson({snap, &((*snap).*body)});
  }
  r.content_type = content_type;
  call.reply(std::move(r));
  return true;
}

bool RestApi::SnapshotLacksJob(RouteCall& call) {
  const ApiSnapshot::Job* entry =
      call.id <= UINT32_MAX ? call.snap->Find(static_cast<JobId>(call.id)) : nullptr;
  if (entry != nullptr && (!call.tenant || *call.tenant == entry->tenant)) return false;
  // Another tenant's job is not there for this caller, as in the list.
  call.reply(Error(404, "job " + JobIdText(call.req.path) + ": no such job"));
  return true;
}

const JobRun* RestApi::LoopJob(RouteCall& call) {
  const JobRun* job =
      call.id <= UINT32_MAX ? controller_->scheduler().job(static_cast<JobId>(call.id)) : nullptr;
  if (job != nullptr && call.tenant && *call.tenant != job->tenant.name) {
    // Listed to every reader (--public-read), yet changed by its own.
    if (call.route->access == RouteAccess::kWrite && options_.public_read) {
      call.reply(Error(403, "job " + std::to_string(job->id) + " belongs to tenant '" +
                                job->tenant.name + "', not '" + *call.tenant + "'"));
      return nullptr;
    }
    job = nullptr;
  }
  if (job == nullptr) call.reply(Error(404, "job " + JobIdText(call.req.path) + ": no such job"));
  return job;
}

bool RestApi::GetJob(RouteCall& call) {
  if (call.snap) {
    if (SnapshotLacksJob(call)) return true;
    const auto& body = call.snap->Find(static_cast<JobId>(call.id))->full;
    if (!body) return false;  // an ended job's summary, not rendered yet
    call.reply(SharedJson(body));
    return true;
  }
  const JobRun* job = LoopJob(call);
  if (job == nullptr) return true;
  if (!IsTerminal(job->state)) {
    const JobClock clock = controller_->ClockOf(job->id);
    const Scheduler& sched = controller_->scheduler();
    call.reply(Json(200, JsonText(JobSummaryJson(*job, sched.pool(), false, nullptr, &clock,
                                                 sched.QueuedRuns(job->id)))));
  } else if (controller_->EndDurable(job->id)) {
    call.reply(SharedJson(snapshots_->EndedSummary(*job)));
  } else {
    // Answered once its end is stored, as a submit is: a client told a
    // job ended (`submit --wait`) must not see it run again after a crash.
    controller_->WhenDurable(
        [reply = call.reply, body = snapshots_->EndedSummary(*job), id = job->id,
         state = std::string(JobStateName(job->state))](const Status& w) mutable {
          if (w.ok()) return reply(SharedJson(body));
          reply(Error(503, "job " + std::to_string(id) + " " + state +
                               ", but the job store cannot be written (" + w.message() +
                               "): a controller restart before it can would run the job again"));
        });
  }
  return true;
}

bool RestApi::DeleteJob(RouteCall& call) {
  const JobRun* job = LoopJob(call);
  if (job == nullptr) return true;
  HttpReply& reply = call.reply;
  auto q = ParseQueryParams(call.req.query, "DELETE /api/v1/jobs/{id}", {"forget"});
  if (!q.ok()) return reply(Error(400, q.status().message())), true;
  if (!q->empty()) {
    const std::string& v = q->front().second;
    if (v != "true" && v != "false") {
      reply(Error(400, "query: forget is true or false, not '" + ShownInError(v) + "'"));
      return true;
    }
    if (v == "true") return ForgetOnLoop(job->id, std::move(reply)), true;
  }
  Status st = controller_->Cancel(job->id);
  if (!st.ok()) {
    reply(Error(st.code() == StatusCode::kUnavailable ? 503 : 409, st.message()));
    return true;
  }
  snapshots_->MarkChanged();  // a read after this answer sees the cancel
  const JobClock clock = controller_->ClockOf(job->id);
  HttpResponse r = Json(
      200, JsonText(JobSummaryJson(*job, controller_->scheduler().pool(), false, nullptr, &clock)));
  // Answered once stored, as a submit is: a controller killed after the
  // answer must not run the job to its end after its restart. The cancel
  // stands if its write fails (its runs were stopped), and is retried;
  // the client hears that it is not stored yet.
  controller_->WhenDurable([reply, r = std::move(r), id = job->id](const Status& w) mutable {
    if (w.ok()) return reply(std::move(r));
    reply(Error(503, "job " + std::to_string(id) +
                         " cancelled, but the job store cannot be written (" + w.message() +
                         "): a controller restart before it can would run the job again"));
  });
  return true;
}

bool RestApi::GetTasks(RouteCall& call) { return ServeRendered(call, Rendered::kTasks); }
bool RestApi::GetTrace(RouteCall& call) { return ServeRendered(call, Rendered::kTrace); }
bool RestApi::GetDag(RouteCall& call) { return ServeRendered(call, Rendered::kDag); }

bool RestApi::GetOutputs(RouteCall& call) {
  if (call.snap) return SnapshotLacksJob(call);  // else the loop knows where outputs are
  const JobRun* job = LoopJob(call);
  if (job == nullptr) return true;
  const Controller& c = *controller_;
  // The job's final outputs (sinks of its last step): where each lives,
  // for a client to fetch peer to peer from that worker.
  const JobGraph& g = *job->graph;
  const uint32_t base = (g.steps() - 1) * g.size();
  // Those on a worker declared dead are listed as lost, not pointed at.
  json outputs = json::array();
  json lost = json::array();
  for (uint32_t i = 0; i < g.size(); ++i) {
    if (!g.task(i).consumers.empty()) continue;
    const OutputLocation* loc = c.OutputOf(job->id, base + i);
    if (loc == nullptr) {
      // Made before a restart and held by no worker that came back (a
      // session's are freed when it ends, not lost).
      const TaskRecord& rec = job->runs[base + i];
      if (rec.state != TaskState::kDone || !rec.kept() || job->open) continue;
      const TimeUs grace_end = c.started_at() + TimeUs{c.options().recovery_grace_ms} * 1000;
      if (c.recovery().open() || Controller::NowUs() < grace_end) {
        // Not known yet: a worker may still report it (those of ended
        // jobs too, for which no recovery window opens). A partial list
        // would read as the whole result.
        call.reply(Error(503, "job " + std::to_string(job->id) +
                                  ": workers are still reporting the outputs they hold "
                                  "after a controller restart; try again"));
        return true;
      }
      lost.push_back({{"task", g.spec_task(i).id},
                      {"run", base + i},
                      {"bytes", rec.output_bytes},
                      {"buffers", rec.output_buffers}});
      continue;
    }
    if (!loc->kept()) continue;
    const WorkerInfo& w = c.workers()[loc->worker];
    json o = {{"task", g.spec_task(i).id}, {"run", base + i}};
    if (!w.alive) {
      o["worker"] = w.name;
      o["bytes"] = loc->bytes;
      o["buffers"] = loc->buffers;
      lost.push_back(std::move(o));
      continue;
    }
    o["endpoint"] = w.data_endpoint;
    o["bytes"] = loc->bytes;
    o["buffers"] = loc->buffers;
    outputs.push_back(std::move(o));
  }
  json body = {{"id", job->id}, {"outputs", std::move(outputs)}, {"lost", std::move(lost)}};
  // The token a fetch from those workers must carry: to a holder of a
  // token (of any role: reading outputs is a read), or to anyone where
  // there are no tokens; never to an anonymous reader (--public-read).
  // The job's own: it opens no other job's outputs.
  if (Authorised(call.req))
    body["data_token"] = DataTokenHex(JobDataToken(c.data_token(), job->id));
  call.reply(Json(200, JsonText(body)));
  return true;
}

bool RestApi::GetLogs(RouteCall& call) {
  constexpr std::string_view kRoute = "GET /api/v1/jobs/{id}/logs";
  auto q = ParseQueryParams(call.req.query, kRoute, {"task", "step"});
  if (!q.ok()) return call.reply(Error(400, q.status().message())), true;
  std::optional<std::string> task;
  uint64_t step = 0;
  for (const auto& [name, value] : *q) {
    if (name == "task") {
      task = value;
    } else if (auto [end, ec] = std::from_chars(value.data(), value.data() + value.size(), step);
               value.empty() || ec != std::errc() || end != value.data() + value.size()) {
      call.reply(Error(400, "query: step is a whole number, not '" + ShownInError(value) + "'"));
      return true;
    }
  }
  if (!task) {
    call.reply(Error(400, "query: task is required: " + std::string(kRoute) + "?task=ID"));
    return true;
  }
  const JobRun* job = LoopJob(call);
  if (job == nullptr) return true;
  const JobGraph& g = *job->graph;
  uint32_t index = 0;
  while (index < g.size() && g.spec_task(index).id != *task) ++index;
  if (index == g.size()) {
    call.reply(
        Error(404, "job " + std::to_string(job->id) + ": no task '" + ShownInError(*task) + "'"));
    return true;
  }
  if (step >= g.steps()) {
    call.reply(Error(400, "query: step " + std::to_string(step) + " is past the job's " +
                              std::to_string(g.steps()) + " step(s)"));
    return true;
  }
  const auto run = static_cast<uint32_t>(step * g.size() + index);
  const TaskRecord& rec = job->runs[run];
  const TaskSpec& t = g.spec_task(index);
  json attempts = json::array();
  uint64_t dropped = 0;
  if (const TaskLogs::Run* logs = controller_->task_logs().Find(job->id, run)) {
    for (const TaskLogs::Attempt& a : logs->attempts) {
      json e = {{"attempt", a.attempt}, {"ok", a.ok}, {"lines", a.lines}};
      if (!a.ok) e["error"] = a.error;
      attempts.push_back(std::move(e));
    }
    dropped = logs->dropped;
  }
  json body = {{"job", job->id},
               {"task", t.id},
               {"step", step},
               {"run", run},
               {"state", std::string(TaskStateName(rec.state))},
               {"attempt", rec.attempt},
               {"max_retries", t.max_retries},
               {"retries", rec.retries},
               {"attempts", std::move(attempts)},
               {"dropped", dropped}};
  call.reply(Json(200, JsonText(body)));
  return true;
}

void RestApi::ParseAndSubmit(std::string body, JobTenant tenant, HttpReply reply) {
  auto spec = ParseJobSpec(body, limits_);
  if (!spec.ok()) {
    int code = spec.status().code() == StatusCode::kResourceExhausted ? 413 : 400;
    reply(Error(code, spec.status().message()));
    return;
  }
  auto graph = JobGraph::Build(std::move(spec).value());
  if (!graph.ok()) {
    reply(Error(400, graph.status().message()));
    return;
  }
  controller_->Post([c = controller_, snaps = snapshots_, g = std::move(graph).value(),
                     body = std::move(body), tenant = std::move(tenant), reply]() mutable {
    // Answered once final: a stored job's 201 once its record is written,
    // so a job a client was told about survives a crash of the controller.
    (void)c->Submit({std::move(body), std::move(g), std::move(tenant)},
                    [snaps, reply](Result<JobId> id) {
                      snaps->MarkChanged();  // a read after this answer sees the job, or its end
                      if (!id.ok()) {
                        // 503: the store, try later; 413: the job is too large for this
                        // controller (--max-runs, or its runs did not fit in memory).
                        const StatusCode code = id.status().code();
                        reply(Error(code == StatusCode::kUnavailable         ? 503
                                    : code == StatusCode::kResourceExhausted ? 413
                                                                             : 400,
                                    id.status().message()));
                        return;
                      }
                      HttpResponse r = Json(201, JsonText(json{{"id", *id}}));
                      r.headers["Location"] = "/api/v1/jobs/" + std::to_string(*id);
                      reply(std::move(r));
                    });
  });
}

void RestApi::Park(RouteCall call) {
  parked_total_.fetch_add(1, std::memory_order_relaxed);
  std::lock_guard<std::mutex> lock(parked_mu_);
  parked_.push_back(Parked{std::move(call), parked_seq_++});
  if (!refresh_posted_) PostRefreshLocked();
}

void RestApi::PostRefreshLocked() {
  refresh_posted_ = true;
  refreshes_.fetch_add(1, std::memory_order_relaxed);
  // The loop's part is the same however many reads wait: note how many
  // there are, render a snapshot if the published one is out of date, and
  // hand the answering to its thread.
  controller_->Post([this] {
    uint64_t upto = 0;
    {
      std::lock_guard<std::mutex> lock(parked_mu_);
      upto = parked_seq_;
    }
    auto snap = snapshots_->RefreshOnLoop(Controller::NowUs());
    answerer_->Post([this, snap = std::move(snap), upto] { ServeParked(snap, upto); });
  });
}

void RestApi::ServeParked(std::shared_ptr<const ApiSnapshot> snap, uint64_t upto) {
  std::deque<Parked> ready;
  {
    std::lock_guard<std::mutex> lock(parked_mu_);
    while (!parked_.empty() && parked_.front().seq < upto) {
      ready.push_back(std::move(parked_.front()));
      parked_.pop_front();
    }
    refresh_posted_ = false;
    // Reads that came after the loop looked wait for a refresh of their own:
    // the snapshot above may predate what they saw.
    if (!parked_.empty()) PostRefreshLocked();
  }
  // `snap` was published after each of these reads arrived, so it holds
  // every change its client could have seen.
  for (Parked& p : ready) {
    p.call.snap = snap;
    if (snap && (this->*p.call.route->handler)(p.call)) continue;
    // Not in the snapshot (an ended job's summary not rendered yet; or
    // detached): the loop answers.
    p.call.snap = nullptr;
    ToLoop(std::move(p.call));
  }
}

void RestApi::ForgetOnLoop(JobId id, HttpReply reply) {
  auto freed = controller_->Forget(id);
  if (!freed.ok()) {
    const Status& st = freed.status();
    return reply(Error(st.code() == StatusCode::kUnavailable ? 503 : 409, st.message()));
  }
  DropCached(id);
  snapshots_->MarkChanged();  // a read after this answer no longer finds the job
  // Answered once stored, as a cancel is: a restart must not list it again.
  controller_->WhenDurable([reply, id, bytes = *freed](const Status& w) {
    if (!w.ok()) {
      return reply(Error(503, "job " + std::to_string(id) +
                                  " forgotten, but the job store cannot be written (" +
                                  w.message() +
                                  "): a controller restart before it can would list it again, "
                                  "its outputs gone"));
    }
    nlohmann::json body = {{"id", id}, {"forgotten", true}, {"freed_bytes", bytes}};
    reply(Json(200, JsonText(body)));
  });
}

}  // namespace hmpmd
