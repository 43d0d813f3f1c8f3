// Controller: worker membership. Registration (token, sizes, restart
// detection by RegisterMsg::instance, the device it becomes), liveness by
// heartbeat, and declaring a worker dead. The loop in controller.cc calls
// these; what a worker reports back after a controller restart is in
// controller_recovery.cc.
#include <spdlog/spdlog.h>

#include <algorithm>
#include <string_view>
#include <unordered_set>

#include "hmpmd/controller/controller.h"
#include "hmpmd/protocol/job_spec.h"
#include "hmpmd/protocol/one_line.h"
#include "hmpmd/protocol/same_secret.h"

// See controller.cc: GCC 12's false -Wmaybe-uninitialized when a vector of
// StoreRecord grows.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif

namespace hmpmd {

void Controller::LogRefusedToken(const char* what, const std::string& name) {
  const uint64_t n = ++counters_.refused_tokens;
  if ((n & (n - 1)) != 0) return;
  spdlog::warn(
      "refused {} '{}': wrong or missing token ({} refused so far; logged at the 1st, "
      "2nd, 4th, ...)",
      what, OneLine(name, 64), n);
}

void Controller::OnRegister(const std::string& identity, const RegisterMsg& m, TimeUs now) {
  if (!options_.token.empty() && !SameSecret(options_.token, m.token)) {
    LogRefusedToken("worker", m.name);
    transport_.Send(identity, Reject{"wrong or missing token", false});
    return;
  }
  // Printed in logs and `hmpmd status` lines: bounded and on one line, as a
  // job spec's names are (a newline in it forged log lines).
  if (m.name.size() > SpecLimits{}.max_string) {
    transport_.Send(identity, Reject{"worker name: " + std::to_string(m.name.size()) +
                                         " bytes, longer than the limit of " +
                                         std::to_string(SpecLimits{}.max_string),
                                     false});
    return;
  }
  if (std::string ch = FirstControlChar(m.name); !ch.empty()) {
    transport_.Send(identity, Reject{"worker name: contains the control character " + ch, false});
    return;
  }
  DeviceDesc desc;
  desc.name = m.name;
  desc.memory_mb = m.memory_mb;
  desc.kernels = m.kernels;
  uint32_t total = 0;
  for (const CoreGroup& g : m.cores) {
    desc.cores[static_cast<size_t>(g.kind)] += g.count;
    total += g.count;
  }
  if (total == 0 || total > 4096 || m.kernels.empty()) {
    transport_.Send(identity,
                    Reject{"a worker needs 1 to 4096 cores and at least one kernel", false});
    return;
  }
  if (!CheckInstance(identity, m, now)) return;
  // Not a death: the same process, whose runs are not to blame.
  if (WorkerInfo* old = FindByIdentity(identity)) MarkDead(*old, "re-registered", now, false);
  // The same process on a new socket (it reconnects when a register goes
  // unanswered, e.g. while this loop was slow): its old entry is gone too.
  // Its data endpoint, a socket it bound, tells it apart from another
  // worker of the same name and pid (embedded workers without one may
  // share both).
  if (auto k = m.data_endpoint.empty() ? by_key_.end() : by_key_.find(WorkerKey(m));
      k != by_key_.end()) {
    MarkDead(workers_[k->second], "re-registered on a new connection", now, false);
  }

  WorkerInfo w;
  w.id = static_cast<WorkerId>(workers_.size());
  desc.worker = w.id;
  w.identity = identity;
  w.key = WorkerKey(m);
  w.name = m.name;
  w.data_endpoint = m.data_endpoint;
  w.pid = m.pid;
  w.instance = m.instance;
  w.last_seen = w.joined = now;
  w.clock.Observe(m.sent_us, now);
  w.device = scheduler_->AddDevice(std::move(desc));
  if (device_worker_.size() <= w.device) device_worker_.resize(w.device + 1);
  device_worker_[w.device] = w.id;
  by_identity_[identity] = w.id;
  if (!m.data_endpoint.empty()) by_key_[w.key] = w.id;
  if (m.instance != 0) by_name_[m.name] = w.id;
  workers_.push_back(w);
  outbox_.resize(workers_.size());
  ++alive_workers_;
  ++pool_changes_;
  recovery_.OnRegistered(w.key);
  if (writer_) store_pending_.push_back(WorkerRecord{w.key, true});
  // Tasks it still holds run (or ran) there: do not start them again. Held
  // for another controller (another store, or none), they belong to other
  // jobs, whatever their ids: the worker drops them on our epoch.
  if (m.epoch == epoch_) {
    AdoptReported(workers_.back(), m, now);
    ReportStarted(workers_.back(), m.started);  // which of them run now
  } else if (!m.held.empty() || !m.outputs.empty()) {
    spdlog::warn("worker '{}' holds {} task(s) and {} output(s) of another controller: dropped",
                 m.name, m.held.size(), m.outputs.size());
  }
  transport_.Send(identity, RegisterAck{w.id, options_.heartbeat_ms, epoch_, data_token_});
  spdlog::info("worker {} '{}' joined: {} cube, {} vector cores, {} kernels", w.id, m.name,
               scheduler_->pool().device(w.device).desc.cores[0],
               scheduler_->pool().device(w.device).desc.cores[1], m.kernels.size());
  // Wake whoever waits for enough workers.
  for (auto it = worker_waiters_.begin(); it != worker_waiters_.end();) {
    if (alive_workers_ >= it->first) {
      auto cb = std::move(it->second);
      it = worker_waiters_.erase(it);
      cb();
    } else {
      ++it;
    }
  }
}

bool Controller::CheckInstance(const std::string& identity, const RegisterMsg& m, TimeUs now) {
  if (m.instance == 0) return true;
  if (retired_.count(m.instance) > 0) {
    // Two live processes under one name would replace each other forever:
    // the older one leaves (Reject without reregister ends its Run()).
    spdlog::warn("refused worker '{}' (pid {}): a newer process registered under its name", m.name,
                 m.pid);
    transport_.Send(identity, Reject{"a newer process registered as worker '" + m.name +
                                         "'; worker names must be unique",
                                     false});
    return false;
  }
  auto known = by_name_.find(m.name);
  if (known == by_name_.end()) return true;
  WorkerInfo& old = workers_[known->second];
  if (old.instance == m.instance) return true;  // the same process reconnecting
  // A new process under this name (the old one crashed and was restarted):
  // it holds none of the old one's tasks or outputs. The old one is lost,
  // as when it misses its heartbeats: its running tasks run again and the
  // outputs only it held are rebuilt (lineage).
  // One already declared dead (missed heartbeats) lost nothing to it.
  if (old.alive) ++counters_.worker_restarts;
  if (retired_.insert(old.instance).second) {
    retired_order_.push_back(old.instance);
    if (retired_order_.size() > kRetiredKept) {
      retired_.erase(retired_order_.front());
      retired_order_.pop_front();
    }
  }
  MarkDead(old, "restarted: a new process registered under its name", now);
  return true;
}

std::vector<bool> Controller::ListedDevices() const {
  const ResourcePool& pool = scheduler_->pool();
  std::vector<bool> listed(pool.device_count(), true);  // devices of no worker too
  // Newest registration first: a dead device whose name registered again
  // later is that worker's past row (each controller stall added one).
  std::unordered_set<std::string_view> seen;
  size_t dead = 0;
  for (auto w = workers_.rbegin(); w != workers_.rend(); ++w) {
    const bool again = !seen.insert(w->name).second;
    if (w->device >= listed.size() || w->alive) continue;
    listed[w->device] = !again && dead < kDeadDevicesListed;
    dead += listed[w->device] ? 1 : 0;
  }
  return listed;
}

void Controller::CheckLiveness(TimeUs now) {
  TimeUs limit = static_cast<TimeUs>(options_.worker_timeout_ms) * 1000;
  for (WorkerInfo& w : workers_) {
    if (w.alive && now - w.last_seen > limit) {
      MarkDead(w, "missed heartbeats for " + std::to_string(options_.worker_timeout_ms) + " ms",
               now);
    }
  }
}

void Controller::WorkerProcessExited(uint32_t pid, const std::string& why) {
  for (WorkerInfo& w : workers_) {
    if (w.alive && w.pid == pid) MarkDead(w, why, NowUs());
  }
}

void Controller::ReportStarted(const WorkerInfo& w, const std::vector<HeldTask>& started) {
  std::vector<StartedRun>& runs = started_scratch_;
  runs.clear();
  for (const HeldTask& h : started) runs.push_back({h.job, h.task, h.attempt, h.core, h.lane});
  scheduler_->ReportStarted(w.device, runs);
}

void Controller::MarkDead(WorkerInfo& w, std::string why, TimeUs now, bool died) {
  if (!w.alive) return;
  w.alive = false;
  w.left_reason = why;
  if (writer_) store_pending_.push_back(WorkerRecord{w.key, false});
  --alive_workers_;
  ++pool_changes_;
  by_identity_.erase(w.identity);
  if (auto k = by_key_.find(w.key); k != by_key_.end() && k->second == w.id) by_key_.erase(k);
  spdlog::warn("worker {} '{}' declared dead: {}", w.id, w.name, why);
  scheduler_->RemoveDevice(w.device, now, died);
}

}  // namespace hmpmd
