#include "hmpmd/worker/worker.h"

#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <stdexcept>
#include <string>
#include <thread>
#include <utility>

#include "hmpmd/protocol/address_list.h"
#include "hmpmd/protocol/labels.h"
#include "hmpmd/protocol/local_address.h"
#include "hmpmd/worker/builtin_kernels.h"
#include "logging.h"
#include "serve_loop.h"
#include "wakeup_fd.h"

namespace hmpmd::worker {
namespace {

// Lanes are threads; more than this per kind is a typo, not a device.
constexpr uint32_t kMaxCoresPerKind = 256;

// HOSTNAME:PID, and HOSTNAME:PID/N for the Nth Worker of one process: the
// controller takes another process (instance) under a known name for a
// restart of that worker, so two live workers must not share one.
std::string DefaultName() {
  static std::atomic<uint32_t> made{0};
  char host[256] = {};
  if (::gethostname(host, sizeof(host) - 1) != 0) host[0] = '\0';
  std::string name =
      std::string(host[0] != '\0' ? host : "worker") + ":" + std::to_string(::getpid());
  if (const uint32_t n = ++made; n > 1) name += "/" + std::to_string(n);
  return name;
}

Status Validate(const WorkerOptions& o) {
  if (o.controller_endpoint.empty()) {
    return Status::InvalidArgument("controller_endpoint: empty; expected tcp://HOST:PORT");
  }
  if (o.cube_cores > kMaxCoresPerKind || o.vector_cores > kMaxCoresPerKind) {
    return Status::InvalidArgument("cube_cores, vector_cores: at most " +
                                   std::to_string(kMaxCoresPerKind) + " of each kind");
  }
  if (o.labels.size() > kMaxLabels) {
    return Status::InvalidArgument("labels: more than " + std::to_string(kMaxLabels));
  }
  for (const auto& [key, value] : o.labels) RETURN_IF_ERROR(CheckLabel("labels", {key, value}));
  if (o.cube_cores + o.vector_cores == 0) {
    return Status::InvalidArgument("cube_cores, vector_cores: the worker needs at least one core");
  }
  if (o.reconnect_backoff_min_ms == 0 || o.reconnect_backoff_max_ms < o.reconnect_backoff_min_ms) {
    return Status::InvalidArgument(
        "reconnect_backoff_min_ms, reconnect_backoff_max_ms: need 0 < min <= max");
  }
  if (o.peer_timeout_ms == 0) return Status::InvalidArgument("peer_timeout_ms: must be positive");
  if (o.controller_timeout_ms == 0) {
    return Status::InvalidArgument("controller_timeout_ms: must be positive");
  }
  return Status::Ok();
}

}  // namespace

// Owns what outlives one Run(): options, kernels, logger and the eventfd
// that Stop() writes.
class Worker::Impl {
 public:
  explicit Impl(WorkerOptions options)
      : options_(std::move(options)), log_(MakeLogger(options_.log_level)) {
    if (options_.name.empty()) options_.name = DefaultName();
    for (NamedKernel& k : BuiltinKernels()) kernels_.insert_or_assign(k.name, std::move(k.kernel));
    // A driver's put: the lane runs it (DataPlane::FetchPut); listed here so
    // that the controller knows every worker takes it.
    kernels_.insert_or_assign(
        std::string(kPutKernel),
        [](const KernelArgs&, std::span<const Buffer>) -> std::vector<Buffer> {
          throw std::logic_error("hmpmd.put runs only in a Worker's lane");
        });
  }

  void RegisterKernel(std::string name, Kernel kernel) {
    if (running_.load()) {
      log_->error("RegisterKernel('{}') while Run() is active: ignored", name);
    } else if (name.empty() || !kernel) {
      log_->error("RegisterKernel('{}'): empty name or function: ignored", name);
    } else {
      kernels_.insert_or_assign(std::move(name), std::move(kernel));
    }
  }

  Status Run() {
    if (ran_) return Status::InvalidArgument("Worker::Run: called more than once");
    ran_ = true;
    RETURN_IF_ERROR(Validate(options_));
    RETURN_IF_ERROR(wake_.status());
    if (options_.parent_pid == 0) {
      if (const char* env = std::getenv("HMPMD_PARENT_PID")) {
        options_.parent_pid = std::strtoll(env, nullptr, 10);
      }
    }
    running_.store(true);
    Status status;
    // Stopped, or orphaned, before the controller was in reach: nothing ran.
    if (options_.data_host.empty() && !WaitForARoute()) {
      running_.store(false);
      return Status::Ok();
    }
    if (!stop_.load()) {
      ServeLoop loop(options_, &kernels_, &wake_, &stop_, log_.get());
      status = loop.Run();
    }
    running_.store(false);
    if (!status.ok()) log_->error("worker '{}' ends: {}", options_.name, status.ToString());
    return status;
  }

  void Stop() {
    stop_.store(true, std::memory_order_release);
    wake_.Signal();
  }

 private:
  // The data socket binds and advertises the address that reaches the
  // controller. A worker started while that host has no route (a link
  // down, a partition) waits for one: loopback would be advertised to
  // peers that cannot reach it, and the controller is out of reach anyway.
  bool WaitForARoute() {
    bool said = false;
    for (;;) {
      // The primary's (the first of several): a standby shares its network.
      if (auto a = RouteAddressFor(SplitAddresses(options_.controller_endpoint).front())) {
        options_.data_host = *a;
        if (said)
          log_->info("worker '{}': a route to the controller: data socket on {}", options_.name,
                     *a);
        return true;
      }
      if (stop_.load() || (options_.parent_pid > 0 && ::getppid() != options_.parent_pid)) {
        return false;
      }
      if (!said) {
        log_->warn("worker '{}': no route to the controller at {} yet; waiting for one",
                   options_.name, options_.controller_endpoint);
        said = true;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
  }

  WorkerOptions options_;
  std::shared_ptr<spdlog::logger> log_;
  KernelMap kernels_;  // frozen while running_
  WakeupFd wake_;
  std::atomic<bool> stop_{false};
  std::atomic<bool> running_{false};
  bool ran_ = false;
};

Worker::Worker(WorkerOptions options) : impl_(std::make_unique<Impl>(std::move(options))) {}
Worker::~Worker() = default;

void Worker::RegisterKernel(std::string name, Kernel kernel) {
  impl_->RegisterKernel(std::move(name), std::move(kernel));
}

Status Worker::Run() { return impl_->Run(); }

void Worker::Stop() { impl_->Stop(); }

}  // namespace hmpmd::worker
