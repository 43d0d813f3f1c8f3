#include "hmpmd/api/service.h"

#include <spdlog/spdlog.h>
#include <sys/resource.h>

#include <algorithm>
#include <string>
#include <utility>

namespace hmpmd {
namespace {

// Open files kept for what is not an HTTP client: ZeroMQ (a socket per
// worker), SQLite, logs.
constexpr rlim_t kFilesKeptBack = 256;

// HTTP clients' sockets come out of the open-file limit. Raises the soft
// limit to the hard one, and returns `wanted` connections or fewer, so that
// the "too many connections" 503 comes before accept() fails: under the
// usual soft limit of 1024, new clients would hang unanswered instead.
size_t ConnectionsTheFileLimitAllows(size_t wanted) {
  rlimit r{};
  if (::getrlimit(RLIMIT_NOFILE, &r) != 0) return wanted;
  if (r.rlim_cur < r.rlim_max) {
    rlimit raised = r;
    raised.rlim_cur = r.rlim_max;
    if (::setrlimit(RLIMIT_NOFILE, &raised) == 0) r = raised;
  }
  if (r.rlim_cur == RLIM_INFINITY) return wanted;
  const rlim_t room =
      r.rlim_cur > 2 * kFilesKeptBack ? r.rlim_cur - kFilesKeptBack : r.rlim_cur / 2;
  return std::max<size_t>(1, std::min<size_t>(wanted, room));
}

}  // namespace

Service::Service(ServiceOptions options)
    : options_(std::move(options)),
      controller_(std::make_unique<Controller>(options_.controller)) {}

Service::~Service() { StopHttp(); }

Status Service::Start() {
  RETURN_IF_ERROR(controller_->Start());
  if (!options_.serve_http) return Status::Ok();
  const HttpServerOptions& http = options_.http;
  // One CPU budget for the HTTP side's server, formatting and feed threads,
  // and one as large for parsing submitted specs (a large one takes
  // seconds, and would otherwise pause every read).
  std::shared_ptr<CpuBudget> parse_budget;
  if (options_.http_cpu_percent > 0) {
    CpuBudgetOptions bo;
    bo.percent = options_.http_cpu_percent;
    http_budget_ = std::make_shared<CpuBudget>(bo);
    parse_budget = std::make_shared<CpuBudget>(bo);
  }
  const std::shared_ptr<CpuBudget>& http_budget = http_budget_;
  RestApiOptions api = options_.api;
  api.formatter_nice = http.nice;
  api.formatter_idle = http.idle_priority;
  api.cpu_budget = http_budget;
  api.parse_budget = parse_budget;
  api_ = std::make_unique<RestApi>(controller_.get(), &controller_->tokens(),
                                   options_.controller.spec_limits, api);
  // Live events (SSE) and the /metrics additions, batched off the task
  // path. Its callbacks run only after feed_->Start(), once http_ is set.
  EventFeedOptions feed = options_.feed;
  feed.nice = http.idle_priority ? 19 : http.nice;
  feed.cpu_budget = http_budget;
  feed_ = std::make_unique<EventFeed>(
      controller_.get(), feed, [this](std::string chunk) { http_->Broadcast(std::move(chunk)); },
      [this] { return http_->sse_client_count(); });
  api_->SetEventFeed(feed_.get());

  HttpServerOptions server = http;
  server.cpu_budget = http_budget;
  // A spec is the largest body the API takes: the HTTP parser refuses a
  // larger one (413) before buffering it, at the same limit.
  server.max_body_bytes = options_.controller.spec_limits.max_bytes;
  if (options_.fit_connections_to_file_limit) {
    server.max_connections = ConnectionsTheFileLimitAllows(server.max_connections);
    if (server.max_connections < http.max_connections) {
      spdlog::warn("http: at most {} connections (the open-file limit, ulimit -n, is low)",
                   server.max_connections);
    }
  }
  server.events_gate = [api = api_.get()](const HttpRequest& req) {
    return api->EventsRefusal(req);
  };
  http_ =
      std::make_unique<HttpServer>(server, [api = api_.get()](HttpRequest req, HttpReply reply) {
        api->Handle(std::move(req), std::move(reply));
      });
  http_->SetSseHello([feed = feed_.get()] { return feed->Hello(); });
  RETURN_IF_ERROR(http_->Start());
  // The port bound, not the one asked for (0 picks a free one).
  const std::string host = http.bind.substr(0, http.bind.rfind(':'));
  spdlog::info("REST API and dashboard on http://{}:{}", host, http_->port());
  feed_->Start();
  return Status::Ok();
}

void Service::Run() {
  controller_->Run();
  StopHttp();
}

void Service::StopHttp() {
  if (http_) http_->Stop();
  if (feed_) feed_->Stop();
}

}  // namespace hmpmd
