// The job routes rendered from a copy of the job off the loop (tasks,
// trace, DAG), and the cache of ended jobs' answers and copies they are
// served from (rest_api.h).
#include <optional>

#include "hmpmd/api/rest_api.h"
#include "hmpmd/api/task_table.h"
#include "hmpmd/controller/job_report.h"
#include "hmpmd/protocol/json_text.h"

namespace hmpmd {
namespace {

std::string_view RenderedName(uint8_t what) {
  static constexpr std::string_view kNames[] = {"tasks", "trace", "dag"};
  return kNames[what];
}

// Key of an ended job's rendered answer.
std::string RenderedKey(uint64_t id, std::string_view what, const std::string& query) {
  return std::to_string(id) + "/" + std::string(what) + "?" + query;
}

}  // namespace

bool RestApi::ServeRendered(RouteCall& call, Rendered what) {
  const std::string_view name = RenderedName(static_cast<uint8_t>(what));
  if (call.snap) {
    if (SnapshotLacksJob(call)) return true;
    if (auto body = FindRendered(RenderedKey(call.id, name, call.req.query))) {
      call.reply(SharedJson(std::move(body)));
      return true;
    }
    auto copy = FindEndedCopy(static_cast<JobId>(call.id));
    if (!copy) return false;
    RenderOffLoop(std::move(*copy), true, what, call.req.query, std::move(call.reply));
    return true;
  }
  const JobRun* job = LoopJob(call);
  if (job == nullptr) return true;
  if (IsTerminal(job->state)) {
    RenderOffLoop(EndedCopy(*job), true, what, call.req.query, std::move(call.reply));
    return true;
  }
  const ResourcePool& pool = controller_->scheduler().pool();
  if (what == Rendered::kTasks) {
    // A page of a running job: copy the page only.
    auto q = ParseTaskQuery(call.req.query);
    if (!q.ok()) return call.reply(Error(400, q.status().message())), true;
    const JobClock clock = controller_->ClockOf(job->id);
    auto page = std::make_shared<TaskPage>(
        SnapshotTaskPage(*job, pool, *q, &clock, &controller_->scheduler().lane_order()));
    OffLoop([page, reply = std::move(call.reply)] { reply(Json(200, RenderTaskPage(*page))); });
    return true;
  }
  // The DAG walks the running step only: cheaper than copying the job.
  if (what == Rendered::kDag) {
    const LaneOrder& lanes = controller_->scheduler().lane_order();
    return call.reply(Json(200, JsonText(SubmodelDagJson(*job, &lanes)))), true;
  }
  JobCopy copy{std::make_shared<const JobRun>(*job), std::make_shared<const ResourcePool>(pool),
               controller_->ClockOf(job->id)};
  RenderOffLoop(std::move(copy), false, what, call.req.query, std::move(call.reply));
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
               std::make_shared<const ResourcePool>(controller_->scheduler().pool()),
               controller_->ClockOf(job.id)};
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

void RestApi::RenderOffLoop(JobCopy copy, bool ended, Rendered what, const std::string& query,
                            HttpReply reply) {
  OffLoop([this, copy = std::move(copy), ended, what, query, reply = std::move(reply)] {
    const std::string key =
        ended ? RenderedKey(copy.job->id, RenderedName(static_cast<uint8_t>(what)), query)
              : std::string();
    if (ended) {
      if (auto body = FindRendered(key)) return reply(SharedJson(std::move(body)));
    }
    std::string body;
    if (what == Rendered::kTrace) {
      body = TraceText(*copy.job, *copy.pool, nullptr, &copy.clock);
    } else if (what == Rendered::kDag) {
      body = JsonText(SubmodelDagJson(*copy.job));
    } else {
      auto q = ParseTaskQuery(query);
      if (!q.ok()) return reply(Error(400, q.status().message()));
      body = RenderTaskPage(SnapshotTaskPage(*copy.job, *copy.pool, *q, &copy.clock));
    }
    if (!ended) return reply(Json(200, body));
    auto kept = std::make_shared<const std::string>(std::move(body));
    KeepRendered(key, kept);
    reply(SharedJson(std::move(kept)));
  });
}

}  // namespace hmpmd
