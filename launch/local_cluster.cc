#include "hmpmd/launch/local_cluster.h"

#include <spdlog/spdlog.h>

#include <atomic>

namespace hmpmd {

LocalCluster::LocalCluster(LocalClusterOptions options) : options_(std::move(options)) {
  if (options_.worker_binary.empty()) options_.worker_binary = WorkerBinary();
  service_ = std::make_unique<Service>(options_.service);
}

LocalCluster::~LocalCluster() { Stop(); }

Status LocalCluster::Start(std::chrono::milliseconds timeout) {
  RETURN_IF_ERROR(service_->Start());
  loop_ = std::thread([this] { service_->Run(); });
  running_ = true;
  if (!options_.per_worker_args.empty() &&
      options_.per_worker_args.size() != static_cast<size_t>(options_.workers)) {
    return Status::InvalidArgument(
        "per_worker_args: " + std::to_string(options_.per_worker_args.size()) + " entries for " +
        std::to_string(options_.workers) + " workers");
  }
  for (int i = 0; i < options_.workers; ++i) {
    std::vector<std::string> args = {"--controller", controller().endpoint(),
                                     "--name",       "local-" + std::to_string(i),
                                     "--log-level",  options_.log_level};
    if (!options_.cores.empty()) args.insert(args.end(), {"--cores", options_.cores});
    args.insert(args.end(), options_.extra_worker_args.begin(), options_.extra_worker_args.end());
    if (!options_.per_worker_args.empty()) {
      const auto& own = options_.per_worker_args[static_cast<size_t>(i)];
      args.insert(args.end(), own.begin(), own.end());
    }
    RETURN_IF_ERROR(workers_.Start(options_.worker_binary, args));
  }
  auto ready = std::make_shared<std::promise<void>>();
  auto fut = ready->get_future();
  size_t n = static_cast<size_t>(options_.workers);
  controller().Post(
      [this, ready, n] { controller().WhenWorkers(n, [ready] { ready->set_value(); }); });
  auto deadline = std::chrono::steady_clock::now() + timeout;
  while (fut.wait_for(std::chrono::milliseconds(20)) != std::future_status::ready) {
    if (std::string exited = workers_.Exited(); !exited.empty()) {
      return Status::Unavailable(exited + " before registering");
    }
    if (std::chrono::steady_clock::now() > deadline) {
      return Status::Unavailable("workers did not all register within " +
                                 std::to_string(timeout.count()) + " ms");
    }
    if (options_.interrupted) {
      if (std::string why = options_.interrupted(); !why.empty()) return Status::Cancelled(why);
    }
  }
  return Status::Ok();
}

void LocalCluster::Stop() {
  if (!running_) {
    workers_.StopAll(std::chrono::milliseconds(1000));
    return;
  }
  controller().Post([this] { controller().ShutdownWorkers("the local cluster is stopping"); });
  workers_.StopAll(std::chrono::milliseconds(3000));
  service_->Stop();
  loop_.join();
  running_ = false;
}

Status LocalCluster::RunJob(std::shared_ptr<const JobGraph> graph,
                            std::chrono::milliseconds timeout,
                            std::function<void(const JobRun&, const Controller&)> on_end,
                            std::string spec_json) {
  auto done = std::make_shared<std::promise<Status>>();
  auto fut = done->get_future();
  auto job_id = std::make_shared<std::atomic<JobId>>(0);
  controller().Post([this, graph = std::move(graph), done, job_id, on_end = std::move(on_end),
                     spec_json = std::move(spec_json)]() mutable {
    auto id = controller().Submit({std::move(spec_json), std::move(graph)});
    if (!id.ok()) {
      done->set_value(id.status());
      return;
    }
    *job_id = *id;
    controller().WatchJob(*id, [this, done, on_end](const JobRun& job) {
      on_end(job, controller());
      done->set_value(Status::Ok());
    });
  });
  auto deadline = std::chrono::steady_clock::now() + timeout;
  Status failure;
  // No worker joins a local cluster but its own: once one has exited, a job
  // that waits for workers (a gang larger than the devices left, a core
  // kind or kernel only the lost one had) would wait until `timeout`. It
  // fails once it has waited 2 s on end (a live worker declared dead for a
  // late heartbeat registers again within that).
  std::string lost;
  auto next_check = std::chrono::steady_clock::time_point::min();
  // When the job began waiting on end; max(): it is not waiting. (Not a
  // std::optional: GCC 12 warns it may be read uninitialized.)
  constexpr auto kNotWaiting = std::chrono::steady_clock::time_point::max();
  auto waiting_since = kNotWaiting;
  while (fut.wait_for(std::chrono::milliseconds(20)) != std::future_status::ready) {
    pid_t pid = 0;
    if (std::string exited = workers_.Exited(&pid); !exited.empty()) {
      spdlog::warn("{}", exited);
      // Its tasks go back to the queue now, not after missed heartbeats.
      controller().Post([this, pid, exited] {
        controller().WorkerProcessExited(static_cast<uint32_t>(pid), exited);
      });
      if (workers_.pids().empty()) {
        failure = Status::Unavailable(exited + "; no worker is left");
        break;
      }
      lost = exited;
    }
    if (!lost.empty() && std::chrono::steady_clock::now() >= next_check) {
      next_check = std::chrono::steady_clock::now() + std::chrono::milliseconds(100);
      const JobId id = *job_id;
      std::string waiting = Call([this, id]() -> std::string {
        const JobRun* job = id == 0 ? nullptr : controller().scheduler().job(id);
        return job == nullptr || IsTerminal(job->state) ? "" : job->waiting;
      });
      if (waiting.empty()) {
        waiting_since = kNotWaiting;
      } else if (waiting_since == kNotWaiting) {
        waiting_since = std::chrono::steady_clock::now();
      } else if (std::chrono::steady_clock::now() - waiting_since >= std::chrono::seconds(2)) {
        failure = Status::Unavailable(lost + "; the workers left cannot run the job: " + waiting);
        break;
      }
    }
    if (std::chrono::steady_clock::now() > deadline) {
      failure = Status::Unavailable("the job did not end within " +
                                    std::to_string(timeout.count()) + " ms");
      break;
    }
    if (options_.interrupted) {
      if (std::string why = options_.interrupted(); !why.empty()) {
        failure = Status::Cancelled(why);
        break;
      }
    }
  }
  if (failure.ok()) return fut.get();
  // Cancel the job and let its callback run now, while the caller's state
  // that `on_end` may use still exists.
  controller().Post([this, job_id, why = failure.message()] {
    if (*job_id != 0) (void)controller().Cancel(*job_id, why);
  });
  fut.wait_for(std::chrono::seconds(5));
  return failure;
}

}  // namespace hmpmd
