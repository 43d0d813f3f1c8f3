#include "hmpmd/api/rest_api.h"

#include <cctype>
#include <nlohmann/json.hpp>

#include "hmpmd/api/dashboard_assets.h"
#include "hmpmd/api/live_metrics.h"
#include "hmpmd/api/request_checks.h"
#include "hmpmd/api/task_table.h"
#include "hmpmd/controller/job_report.h"
#include "hmpmd/http/http_target.h"
#include "hmpmd/protocol/json_text.h"
#include "hmpmd/protocol/same_secret.h"
#include "rest_routes.h"

namespace hmpmd {
namespace {

using json = nlohmann::json;

// Routes a snapshot answers (a job's summary when rendered).
bool IsSnapshotRoute(const std::string& path) {
  if (path == "/api/v1/pool" || path == "/api/v1/jobs" || path == "/metrics") return true;
  uint64_t id = 0;
  std::string rest;
  return ParseJobPath(path, &id, &rest) && rest.empty();
}

bool IsRenderedOffLoop(const std::string& rest) {
  return rest == "tasks" || rest == "trace" || rest == "dag";
}

// Key of an ended job's rendered answer.
std::string RenderedKey(uint64_t id, const std::string& rest, const std::string& query) {
  return std::to_string(id) + "/" + rest + "?" + query;
}

}  // namespace

RestApi::RestApi(Controller* controller, std::string token, SpecLimits limits,
                 RestApiOptions options)
    : controller_(controller), token_(std::move(token)), limits_(limits), options_(options) {
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

bool RestApi::Authorised(const HttpRequest& req) const {
  if (token_.empty()) return true;
  auto it = req.headers.find("authorization");
  if (it == req.headers.end()) return false;
  // The scheme is case-insensitive (RFC 7235: "bearer" is "Bearer").
  constexpr std::string_view kScheme = "bearer ";
  const std::string_view got = it->second;
  if (got.size() < kScheme.size()) return false;
  for (size_t i = 0; i < kScheme.size(); ++i) {
    if (std::tolower(static_cast<unsigned char>(got[i])) != kScheme[i]) return false;
  }
  return SameSecret(token_, got.substr(kScheme.size()));
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
      reply(Allow(204, kAllServedMethods));
    }
    return;
  }
  const std::string_view allow = RouteMethods(req.path);
  if (allow.empty()) {
    reply(Error(404, "no route " + req.path));
    return;
  }
  if (!MethodAllowed(allow, req.method)) {
    HttpResponse r = Error(405, "method " + req.method + " not allowed on " + req.path +
                                    " (it takes " + std::string(allow) + ")");
    r.headers["Allow"] = std::string(allow);
    reply(std::move(r));
    return;
  }
  const bool mutating = req.method == "POST" || req.method == "DELETE";
  if (mutating && !Authorised(req)) {
    auto it = req.headers.find("authorization");
    reply(it == req.headers.end() ? Error(401, "missing Authorization: Bearer token")
                                  : Error(403, "wrong token"));
    return;
  }
  // API routes take no query parameters but a task table's and a job's
  // DELETE (checked where they are served): one given anyway is refused,
  // not silently ignored.
  if (!req.query.empty() && RouteTakesNoQuery(req.method, req.path)) {
    if (auto q = ParseQueryParams(req.query, req.method + " " + req.path, {}); !q.ok()) {
      reply(Error(400, q.status().message()));
      return;
    }
  }
  if (req.method == "OPTIONS") {
    reply(Allow(204, allow));
    return;
  }
  // HEAD is GET without the body (the server leaves the body out).
  if (req.method == "HEAD") req.method = "GET";
  if (const EmbeddedAsset* a = FindDashboardAsset(req.path == "/" ? "/index.html" : req.path)) {
    // Static files are compiled in; they never touch the loop.
    HttpResponse r;
    r.content_type = a->content_type;
    r.shared_body = AssetBody(*a);  // one copy of the file, shared by every answer
    r.headers["Cache-Control"] = "no-cache";
    reply(std::move(r));
    return;
  }
  if (req.method == "POST" && req.path == "/api/v1/jobs") {
    auto type = req.headers.find("content-type");
    if (Status st = CheckJsonContentType(type == req.headers.end() ? "" : type->second); !st.ok()) {
      reply(Error(415, st.message()));
      return;
    }
    // Parsed and checked off the loop and off this thread.
    parser_->Post([this, body = std::move(req.body), reply]() mutable {
      ParseAndSubmit(std::move(body), std::move(reply));
    });
    return;
  }
  if (req.method == "GET") {
    // Served without the loop when a fresh snapshot (and, for an ended
    // job's heavy routes, a copy of the job) is at hand.
    auto snap = snapshots_->Fresh();
    if (snap && FromSnapshot(snap, req, reply)) return;
    if (!snap && IsSnapshotRoute(req.path)) return Park(std::move(req), std::move(reply));
  }
  loop_requests_.fetch_add(1, std::memory_order_relaxed);
  controller_->Post([this, req = std::move(req), reply]() { OnLoop(req, reply); });
}

void RestApi::ParseAndSubmit(std::string body, HttpReply reply) {
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
                     body = std::move(body), reply]() mutable {
    // Answered once final: a stored job's 201 once its record is written,
    // so a job a client was told about survives a crash of the controller.
    (void)c->Submit({std::move(body), std::move(g)}, [snaps, reply](Result<JobId> id) {
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

void RestApi::Park(HttpRequest req, HttpReply reply) {
  parked_total_.fetch_add(1, std::memory_order_relaxed);
  std::lock_guard<std::mutex> lock(parked_mu_);
  parked_.push_back(Parked{std::move(req), std::move(reply), parked_seq_++});
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
    if (snap && FromSnapshot(snap, p.req, p.reply)) continue;
    // Not in the snapshot (an ended job's summary not rendered yet; or
    // detached): the loop answers, as before snapshots.
    loop_requests_.fetch_add(1, std::memory_order_relaxed);
    controller_->Post(
        [this, req = std::move(p.req), reply = std::move(p.reply)]() { OnLoop(req, reply); });
  }
}

bool RestApi::FromSnapshot(const std::shared_ptr<const ApiSnapshot>& snap, const HttpRequest& req,
                           HttpReply& reply) {
  // The bodies are sent as they are in the snapshot, shared by every answer
  // (aliasing pointers keep the snapshot alive while they are written).
  const ApiSnapshot& s = *snap;
  if (req.path == "/api/v1/pool") return reply(SharedJson({snap, &s.pool})), true;
  if (req.path == "/api/v1/jobs") return reply(SharedJson({snap, &s.jobs})), true;
  if (req.path == "/metrics") {
    HttpResponse r = SharedJson({snap, &s.metrics});
    r.content_type = "text/plain; version=0.0.4";
    reply(std::move(r));
    return true;
  }
  uint64_t id = 0;
  std::string rest;
  if (!ParseJobPath(req.path, &id, &rest)) return false;
  const auto* entry = id <= UINT32_MAX ? s.Find(static_cast<JobId>(id)) : nullptr;
  if (entry == nullptr) {
    reply(Error(404, "job " + JobIdText(req.path) + ": no such job"));
    return true;
  }
  if (rest.empty()) {
    if (!*entry) return false;  // an ended job's summary, not rendered yet
    reply(SharedJson(*entry));
    return true;
  }
  if (!IsRenderedOffLoop(rest)) return false;
  if (auto body = FindRendered(RenderedKey(id, rest, req.query))) {
    reply(SharedJson(std::move(body)));
    return true;
  }
  auto copy = FindEndedCopy(static_cast<JobId>(id));
  if (!copy) return false;
  RenderOffLoop(std::move(*copy), true, rest, req.query, std::move(reply));
  return true;
}

std::shared_ptr<const std::string> RestApi::FindRendered(const std::string& key) {
  std::lock_guard<std::mutex> lock(rendered_mu_);
  for (auto it = rendered_.begin(); it != rendered_.end(); ++it) {
    if (it->first != key) continue;
    rendered_.splice(rendered_.begin(), rendered_, it);
    return rendered_.front().second;
  }
  return nullptr;
}

void RestApi::KeepRendered(const std::string& key, std::shared_ptr<const std::string> body) {
  if (body->size() > options_.rendered_cache_bytes / 4) return;
  std::lock_guard<std::mutex> lock(rendered_mu_);
  for (const auto& e : rendered_) {
    if (e.first == key) return;  // rendered twice meanwhile
  }
  rendered_bytes_ += body->size();
  rendered_.emplace_front(key, std::move(body));
  while (rendered_bytes_ > options_.rendered_cache_bytes) {
    rendered_bytes_ -= rendered_.back().second->size();
    rendered_.pop_back();
  }
}

std::optional<RestApi::JobCopy> RestApi::FindEndedCopy(JobId id) {
  std::lock_guard<std::mutex> lock(copies_mu_);
  for (auto it = ended_copies_.begin(); it != ended_copies_.end(); ++it) {
    if (it->first != id) continue;
    ended_copies_.splice(ended_copies_.begin(), ended_copies_, it);
    return ended_copies_.front().second;
  }
  return std::nullopt;
}

RestApi::JobCopy RestApi::EndedCopy(const JobRun& job) {
  if (auto copy = FindEndedCopy(job.id)) return *copy;
  // Copying costs a memcpy of the runs; formatting them is what is slow.
  JobCopy copy{std::make_shared<const JobRun>(job),
               std::make_shared<const ResourcePool>(controller_->scheduler().pool())};
  std::lock_guard<std::mutex> lock(copies_mu_);
  ended_copies_.emplace_front(job.id, copy);
  while (ended_copies_.size() > std::max<size_t>(1, options_.ended_job_copies)) {
    ended_copies_.pop_back();
  }
  return copy;
}

void RestApi::DropCached(JobId id) {
  {
    std::lock_guard<std::mutex> lock(copies_mu_);
    std::erase_if(ended_copies_, [id](const auto& e) { return e.first == id; });
  }
  const std::string prefix = std::to_string(id) + "/";  // as RenderedKey() begins
  std::lock_guard<std::mutex> lock(rendered_mu_);
  std::erase_if(rendered_, [&](const auto& e) {
    if (!e.first.starts_with(prefix)) return false;
    rendered_bytes_ -= e.second->size();
    return true;
  });
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

void RestApi::RenderOffLoop(JobCopy copy, bool ended, const std::string& rest,
                            const std::string& query, HttpReply reply) {
  OffLoop([this, copy = std::move(copy), ended, rest, query, reply = std::move(reply)] {
    const std::string key = ended ? RenderedKey(copy.job->id, rest, query) : std::string();
    if (ended) {
      if (auto body = FindRendered(key)) return reply(SharedJson(std::move(body)));
    }
    std::string body;
    if (rest == "trace") {
      body = TraceText(*copy.job, *copy.pool);
    } else if (rest == "dag") {
      body = JsonText(SubmodelDagJson(*copy.job));
    } else {
      auto q = ParseTaskQuery(query);
      if (!q.ok()) return reply(Error(400, q.status().message()));
      body = RenderTaskPage(SnapshotTaskPage(*copy.job, *copy.pool, *q));
    }
    if (!ended) return reply(Json(200, body));
    auto kept = std::make_shared<const std::string>(std::move(body));
    KeepRendered(key, kept);
    reply(SharedJson(std::move(kept)));
  });
}

void RestApi::OnLoop(const HttpRequest& req, HttpReply reply) {
  const Controller& c = *controller_;
  const std::string& m = req.method;
  // Handle() let through only the methods each route takes (RouteMethods).
  if (req.path == "/api/v1/pool" || req.path == "/api/v1/jobs" || req.path == "/metrics") {
    auto snap = snapshots_->RefreshOnLoop(Controller::NowUs());
    if (snap && FromSnapshot(snap, req, reply)) return;
    return reply(Error(503, "no snapshot of the controller's state"));  // only once detached
  }
  uint64_t id = 0;
  std::string rest;
  if (!ParseJobPath(req.path, &id, &rest)) return reply(Error(404, "no route " + req.path));
  const JobRun* job = id <= UINT32_MAX ? c.scheduler().job(static_cast<JobId>(id)) : nullptr;
  if (job == nullptr) return reply(Error(404, "job " + JobIdText(req.path) + ": no such job"));
  const ResourcePool& pool = c.scheduler().pool();
  if (rest.empty() && m == "GET") {
    if (!IsTerminal(job->state))
      return reply(Json(200, JsonText(JobSummaryJson(*job, pool, false))));
    return reply(SharedJson(snapshots_->EndedSummary(*job)));
  }
  if (rest.empty() && m == "DELETE") {
    auto q = ParseQueryParams(req.query, "DELETE /api/v1/jobs/{id}", {"forget"});
    if (!q.ok()) return reply(Error(400, q.status().message()));
    if (!q->empty()) {
      const std::string& v = q->front().second;
      if (v != "true" && v != "false") {
        return reply(Error(400, "query: forget is true or false, not '" + ShownInError(v) + "'"));
      }
      if (v == "true") return ForgetOnLoop(job->id, std::move(reply));
    }
    Status st = controller_->Cancel(job->id);
    if (!st.ok()) {
      return reply(Error(st.code() == StatusCode::kUnavailable ? 503 : 409, st.message()));
    }
    snapshots_->MarkChanged();  // a read after this answer sees the cancel
    HttpResponse r = Json(200, JsonText(JobSummaryJson(*job, pool, false)));
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
    return;
  }
  if (IsRenderedOffLoop(rest) && m == "GET") {
    if (IsTerminal(job->state)) {
      return RenderOffLoop(EndedCopy(*job), true, rest, req.query, reply);
    }
    if (rest == "tasks") {
      // A page of a running job: copy the page only.
      auto q = ParseTaskQuery(req.query);
      if (!q.ok()) return reply(Error(400, q.status().message()));
      auto page = std::make_shared<TaskPage>(SnapshotTaskPage(*job, pool, *q));
      OffLoop([page, reply] { reply(Json(200, RenderTaskPage(*page))); });
      return;
    }
    // The DAG walks the running step only: cheaper than copying the job.
    if (rest == "dag") return reply(Json(200, JsonText(SubmodelDagJson(*job))));
    JobCopy copy{std::make_shared<const JobRun>(*job), std::make_shared<const ResourcePool>(pool)};
    return RenderOffLoop(std::move(copy), false, rest, req.query, reply);
  }
  if (rest == "outputs" && m == "GET") {
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
          return reply(Error(503, "job " + std::to_string(job->id) +
                                      ": workers are still reporting the outputs they hold "
                                      "after a controller restart; try again"));
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
    // The token a fetch from those workers must carry: to whoever may
    // change things here (the Bearer token, or anyone without one), never
    // to a reader the controller would refuse a POST.
    if (Authorised(req)) body["data_token"] = DataTokenHex(c.data_token());
    return reply(Json(200, JsonText(body)));
  }
  return reply(Error(404, "no route " + req.path));
}

}  // namespace hmpmd
