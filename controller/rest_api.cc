#include "rest_api.h"

#include <nlohmann/json.hpp>

#include "dashboard_assets.h"
#include "job_report.h"
#include "live_metrics.h"
#include "task_table.h"

namespace hmpmd {
namespace {

using json = nlohmann::json;

// Parses "/api/v1/jobs/{id}[/{rest}]"; false when the path is not of that form.
bool ParseJobPath(const std::string& path, uint64_t* id, std::string* rest) {
  static const std::string kPrefix = "/api/v1/jobs/";
  if (path.compare(0, kPrefix.size(), kPrefix) != 0) return false;
  size_t i = kPrefix.size(), start = i;
  uint64_t v = 0;
  while (i < path.size() && isdigit(static_cast<unsigned char>(path[i])) && i - start < 10) {
    v = v * 10 + (path[i++] - '0');
  }
  if (i == start || (i < path.size() && path[i] != '/')) return false;
  *id = v;
  *rest = i < path.size() ? path.substr(i + 1) : "";
  return true;
}

json PoolJson(const Controller& c) {
  const ResourcePool& pool = c.scheduler().pool();
  json devices = json::array();
  for (DeviceId d = 0; d < pool.device_count(); ++d) {
    const auto& dev = pool.device(d);
    const WorkerInfo* w = c.WorkerOfDevice(d);
    json cores = json::array();
    for (CoreId cid : dev.cores) {
      const auto& core = pool.core(cid);
      cores.push_back({{"id", cid},
                       {"name", CoreName(core)},
                       {"kind", std::string(CoreKindName(core.kind))},
                       {"lane", core.lane},
                       {"queued", core.queued}});
    }
    json e = {{"id", d},
              {"name", dev.desc.name},
              {"alive", dev.alive},
              {"memory_mb", dev.desc.memory_mb},
              {"kernels", dev.desc.kernels},
              {"cores", std::move(cores)}};
    if (w) {
      e["worker"] = w->id;
      e["pid"] = w->pid;
      e["tasks_done"] = w->tasks_done;
      e["dropped_frames"] = w->dropped_frames;
      if (!w->alive) e["left_reason"] = w->left_reason;
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

}  // namespace

RestApi::RestApi(Controller* controller, std::string token, SpecLimits limits)
    : controller_(controller), token_(std::move(token)), limits_(limits) {
  formatter_ = std::thread([this] { FormatterLoop(); });
}

RestApi::~RestApi() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  formatter_.join();
}

void RestApi::OffLoop(std::function<void()> fn) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    queue_.push_back(std::move(fn));
  }
  cv_.notify_one();
}

void RestApi::FormatterLoop() {
  std::unique_lock<std::mutex> lock(mu_);
  for (;;) {
    cv_.wait(lock, [this] { return stop_ || !queue_.empty(); });
    if (queue_.empty()) return;  // stopping, and nothing left
    auto fn = std::move(queue_.front());
    queue_.pop_front();
    lock.unlock();
    fn();
    lock.lock();
  }
}

HttpResponse RestApi::Error(int status, const std::string& message) {
  return Json(status, json{{"error", message}}.dump());
}

HttpResponse RestApi::Json(int status, const std::string& body) {
  HttpResponse r;
  r.status = status;
  r.body = body;
  return r;
}

bool RestApi::Authorised(const HttpRequest& req) const {
  if (token_.empty()) return true;
  auto it = req.headers.find("authorization");
  if (it == req.headers.end()) return false;
  const std::string want = "Bearer " + token_;
  if (it->second.size() != want.size()) return false;
  unsigned char diff = 0;
  for (size_t i = 0; i < want.size(); ++i)
    diff |= static_cast<unsigned char>(want[i] ^ it->second[i]);
  return diff == 0;
}

void RestApi::Handle(HttpRequest req, HttpReply reply) {
  bool mutating = req.method == "POST" || req.method == "DELETE" || req.method == "PUT" ||
                  req.method == "PATCH";
  if (mutating && !Authorised(req)) {
    auto it = req.headers.find("authorization");
    reply(it == req.headers.end() ? Error(401, "missing Authorization: Bearer token")
                                  : Error(403, "wrong token"));
    return;
  }
  if (const EmbeddedAsset* a = FindDashboardAsset(req.path == "/" ? "/index.html" : req.path)) {
    // Static files are compiled in; they never touch the loop.
    if (req.method != "GET" && req.method != "HEAD") {
      reply(Error(405, "method " + req.method + " not allowed on " + req.path));
      return;
    }
    HttpResponse r;
    r.content_type = a->content_type;
    r.body.assign(reinterpret_cast<const char*>(a->data), a->size);
    r.headers["Cache-Control"] = "no-cache";
    reply(std::move(r));
    return;
  }
  if (req.method == "POST" && req.path == "/api/v1/jobs") {
    // Parse and check the spec here, off the loop.
    auto spec = ParseJobSpec(req.body, limits_);
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
    controller_->Post([c = controller_, g = std::move(graph).value(), body = std::move(req.body),
                       reply]() mutable {
      auto id = c->SubmitGraph(std::move(g), std::move(body));
      if (!id.ok()) {
        reply(Error(400, id.status().message()));
        return;
      }
      HttpResponse r = Json(201, json{{"id", *id}}.dump());
      r.headers["Location"] = "/api/v1/jobs/" + std::to_string(*id);
      reply(std::move(r));
    });
    return;
  }
  controller_->Post([this, req = std::move(req), reply]() { OnLoop(req, reply); });
}

void RestApi::OnLoop(const HttpRequest& req, HttpReply reply) {
  const Controller& c = *controller_;
  const std::string& m = req.method;
  if (req.path == "/api/v1/pool") {
    if (m != "GET") return reply(Error(405, "method " + m + " not allowed on " + req.path));
    return reply(Json(200, PoolJson(c).dump()));
  }
  if (req.path == "/api/v1/jobs") {
    if (m != "GET") return reply(Error(405, "method " + m + " not allowed on " + req.path));
    json jobs = json::array();
    for (const auto& [id, job] : c.scheduler().jobs()) {
      jobs.push_back(JobSummaryJson(job, c.scheduler().pool(), false));
    }
    return reply(Json(200, json{{"jobs", std::move(jobs)}}.dump()));
  }
  if (req.path == "/metrics") {
    if (m != "GET") return reply(Error(405, "method " + m + " not allowed on " + req.path));
    HttpResponse r;
    r.content_type = "text/plain; version=0.0.4";
    r.body = feed_ ? feed_->PrometheusText(Controller::NowUs())
                   : LiveMetrics(&c).PrometheusText(Controller::NowUs(), "");
    return reply(std::move(r));
  }
  uint64_t id = 0;
  std::string rest;
  if (!ParseJobPath(req.path, &id, &rest)) return reply(Error(404, "no route " + req.path));
  const JobRun* job = id <= UINT32_MAX ? c.scheduler().job(static_cast<JobId>(id)) : nullptr;
  if (job == nullptr) return reply(Error(404, "job " + std::to_string(id) + ": no such job"));
  const ResourcePool& pool = c.scheduler().pool();
  if (rest.empty() && m == "GET") {
    if (!IsTerminal(job->state)) return reply(Json(200, JobSummaryJson(*job, pool, false).dump()));
    auto it = ended_summaries_.find(job->id);
    if (it == ended_summaries_.end()) {
      if (ended_summaries_.size() >= 2 * c.options().keep_finished_jobs + 16) {
        std::erase_if(ended_summaries_,
                      [&c](const auto& e) { return !c.scheduler().job(e.first); });
      }
      it = ended_summaries_.emplace(job->id, JobSummaryJson(*job, pool, true).dump()).first;
    }
    return reply(Json(200, it->second));
  }
  if (rest.empty() && m == "DELETE") {
    Status st = controller_->Cancel(job->id);
    if (!st.ok()) return reply(Error(409, st.message()));
    return reply(Json(200, JobSummaryJson(*job, pool, false).dump()));
  }
  if (rest == "tasks" && m == "GET") {
    auto q = ParseTaskQuery(req.query);
    if (!q.ok()) return reply(Error(400, q.status().message()));
    auto page = std::make_shared<TaskPage>(SnapshotTaskPage(*job, pool, *q));
    OffLoop([page, reply] { reply(Json(200, RenderTaskPage(*page))); });
    return;
  }
  if (rest == "trace" && m == "GET") return reply(Json(200, TraceJson(*job, pool).dump()));
  if (rest == "dag" && m == "GET") return reply(Json(200, SubmodelDagJson(*job).dump()));
  if (rest == "outputs" && m == "GET") {
    // The job's final outputs (sinks of its last step): where each lives,
    // for a client to fetch peer to peer from that worker.
    const JobGraph& g = *job->graph;
    const uint32_t base = (g.steps() - 1) * g.size();
    json outputs = json::array();
    for (uint32_t i = 0; i < g.size(); ++i) {
      if (!g.task(i).consumers.empty()) continue;
      const OutputLocation* loc = c.OutputOf(job->id, base + i);
      if (loc == nullptr || loc->bytes == 0) continue;
      outputs.push_back({{"task", g.spec_task(i).id},
                         {"run", base + i},
                         {"endpoint", c.workers()[loc->worker].data_endpoint},
                         {"bytes", loc->bytes}});
    }
    return reply(Json(200, json{{"id", job->id}, {"outputs", std::move(outputs)}}.dump()));
  }
  if (rest.empty() || rest == "tasks" || rest == "trace" || rest == "dag" || rest == "outputs") {
    return reply(Error(405, "method " + m + " not allowed on " + req.path));
  }
  return reply(Error(404, "no route " + req.path));
}

}  // namespace hmpmd
