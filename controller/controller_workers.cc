// Controller: worker membership. Registration (token, sizes, restart
// detection by RegisterMsg::instance, the device it becomes), liveness by
// heartbeat, and declaring a worker dead. The loop in controller.cc calls
// these; what a worker reports back after a controller restart is in
// controller_recovery.cc.
#include <spdlog/spdlog.h>

#include <limits>

#include "hmpmd/controller/controller.h"
#include "hmpmd/protocol/job_spec.h"
#include "hmpmd/protocol/one_line.h"
#include "hmpmd/protocol/same_secret.h"
#include "hmpmd/protocol/stall_clock.h"

// See controller.cc: GCC 12's false -Wmaybe-uninitialized when a vector of
// StoreRecord grows.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif

namespace hmpmd {

void Controller::LogRefusedToken(const char* what, const std::string& name, const char* why) {
  const uint64_t n = ++counters_.refused_tokens;
  if ((n & (n - 1)) != 0) return;
  spdlog::warn("refused {}{}: {} ({} refused so far; logged at the 1st, 2nd, 4th, ...)", what,
               name.empty() ? std::string() : " '" + OneLine(name, 64) + "'", why, n);
}

WorkerInfo* Controller::KnownWorker(const std::string& identity, TimeUs now) {
  WorkerInfo* w = workers_.FindByIdentity(identity);
  if (w == nullptr) {
    // A worker we do not know (we restarted, or it was declared dead).
    ++counters_.unknown_peers;
    transport_.Send(identity, Reject{"unknown worker; register again", true});
    return nullptr;
  }
  w->last_seen = now;
  w->disconnected_at = 0;
  return w;
}

void Controller::OnHeartbeat(WorkerInfo& w, const Heartbeat& m, TimeUs now) {
  w.clock.Observe(m.sent_us, now);  // corrects a register that waited in a queue
  w.dropped_frames = m.dropped_frames;
  w.in_flight = m.running;
  workers_.SetStoreBytes(w, m.store_bytes, m.state_bytes);
  scheduler_->SetStateBytes(w.device, m.state_bytes);
  ReportStarted(w, m.started);
  transport_.Send(w.identity, HeartbeatAck{});
}

void Controller::OnRegister(const std::string& identity, const RegisterMsg& m, TimeUs now) {
  // A worker receives every job's inputs: only an admin token serves.
  if (tokens_.enabled()) {
    const std::optional<TokenHolder> who = tokens_.Find(m.token);
    if (!who) {
      LogRefusedToken("worker", m.name);
      transport_.Send(identity, Reject{"wrong or missing token", false});
      return;
    }
    if (who->role != TokenRole::kAdmin) {
      const std::string why = "the token of '" + who->name + "' (role " +
                              std::string(TokenRoleName(who->role)) +
                              ") may not serve as a worker; that takes an admin token";
      LogRefusedToken("worker", m.name, why.c_str());
      transport_.Send(identity, Reject{why, false});
      return;
    }
  }
  // Printed in logs and `hmpmd status` lines: bounded and on one line, as a
  // job spec's names are (a newline in it would forge log lines).
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
  // From the wire: checked as the worker's --label is, kept sorted.
  for (const Label& l : m.labels) {
    Status st = CheckLabel("labels", l);
    if (st.ok()) st = AddLabel("labels", l, &desc.labels);
    if (!st.ok()) {
      transport_.Send(identity, Reject{st.message(), false});
      return;
    }
  }
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
  if (WorkerInfo* same = workers_.FindLiveInstance(m)) {
    Rejoin(*same, identity, m, now);
    return;
  }
  // Not a death: the same process, whose runs are not to blame.
  if (WorkerInfo* old = workers_.FindByIdentity(identity)) {
    MarkDead(*old, "re-registered", now, false);
  }
  // The same process on a new socket, without an instance to tell it by:
  // its old entry is gone too. Its data endpoint, a socket it bound, tells
  // it apart from another worker of the same name and pid (embedded
  // workers without one may share both).
  if (!m.data_endpoint.empty()) {
    if (WorkerInfo* old = workers_.FindByKey(WorkerKey(m))) {
      MarkDead(*old, "re-registered on a new connection", now, false);
    }
  }

  WorkerInfo w;
  w.id = workers_.next_id();
  desc.worker = w.id;
  w.identity = identity;
  w.key = WorkerKey(m);
  w.name = m.name;
  w.data_endpoint = m.data_endpoint;
  w.pid = m.pid;
  w.instance = m.instance;
  w.last_seen = w.joined = now;
  w.register_sent_us = m.sent_us;
  w.clock.Observe(m.sent_us, now);
  w.device = scheduler_->AddDevice(std::move(desc));
  const WorkerInfo& added = workers_.Add(std::move(w));
  outbox_.resize(workers_.size());
  recovery_.OnRegistered(added.key);
  if (writer_) store_pending_.push_back(WorkerRecord{added.key, true});
  // Tasks it still holds run (or ran) there: do not start them again. Held
  // for another controller (another store, or none), they belong to other
  // jobs, whatever their ids: the worker drops them on our epoch.
  if (m.epoch == epoch_) {
    AdoptReported(added, m, now);
    ReportStarted(added, m.started);  // which of them run now
  } else if (!m.held.empty() || !m.outputs.empty()) {
    spdlog::warn("worker '{}' holds {} task(s) and {} output(s) of another controller: dropped",
                 m.name, m.held.size(), m.outputs.size());
  }
  transport_.Send(identity, RegisterAck{added.id, options_.heartbeat_ms, epoch_, data_token_});
  const DeviceDesc& joined = scheduler_->pool().device(added.device).desc;
  spdlog::info("worker {} '{}' joined: {} cube, {} vector cores, {} kernels{}{}", added.id, m.name,
               joined.cores[0], joined.cores[1], m.kernels.size(),
               joined.labels.empty() ? "" : ", labels ", LabelsText(joined.labels));
  workers_.WakeWaiters();
}

void Controller::Rejoin(WorkerInfo& w, const std::string& identity, const RegisterMsg& m,
                        TimeUs now) {
  // An older register, from a socket the process has closed since (the
  // socket queue is fair between connections, not ordered): moving there
  // would lose the live connection, and the closed one would then be taken
  // for a death.
  if (m.sent_us < w.register_sent_us) return;
  w.register_sent_us = m.sent_us;
  workers_.Rebind(w, identity);
  w.last_seen = now;
  w.disconnected_at = 0;
  w.clock.Observe(m.sent_us, now);
  // Held for another controller (another store, or none), its tasks are
  // not ours: what we sent it is lost, whatever the ids say.
  const bool ours = m.epoch == epoch_;
  std::vector<StartedRun>& held = started_scratch_;
  held.clear();
  if (ours) {
    for (const HeldTask& h : m.held) held.push_back({h.job, h.task, h.attempt, h.core, h.lane});
  }
  const size_t recalled = scheduler_->RecallUnheld(w.device, held, now);
  if (ours) {
    AdoptReported(w, m, now);
    ReportStarted(w, m.started);
  }
  recovery_.OnRegistered(w.key);
  transport_.Send(identity, RegisterAck{w.id, options_.heartbeat_ms, epoch_, data_token_});
  spdlog::info("worker {} '{}' is back on a new connection; {} run(s) it did not get run again",
               w.id, w.name, recalled);
}

bool Controller::CheckInstance(const std::string& identity, const RegisterMsg& m, TimeUs now) {
  const WorkerRegistry::InstanceCheck check = workers_.CheckInstance(m);
  if (check.retired) {
    // The older one leaves (Reject without reregister ends its Run()).
    spdlog::warn("refused worker '{}' (pid {}): a newer process registered under its name", m.name,
                 m.pid);
    transport_.Send(identity, Reject{"a newer process registered as worker '" + m.name +
                                         "'; worker names must be unique",
                                     false});
    return false;
  }
  if (check.replaced != nullptr) {
    // Lost as when it misses its heartbeats: its running tasks run again
    // and the outputs only it held are rebuilt (lineage). One already
    // declared dead (missed heartbeats) lost nothing to the restart.
    if (check.replaced->alive) ++counters_.worker_restarts;
    MarkDead(*check.replaced, "restarted: a new process registered under its name", now);
  }
  return true;
}

void Controller::CreditStall(TimeUs stall, TimeUs now) {
  // The heartbeats of that time may still wait in the kernel, unread by
  // ZeroMQ's I/O thread: judged now, every worker would look dead.
  spdlog::warn(
      "the controller's loop was away {} ms longer than it meant to be (stopped, starved or "
      "busy); workers and drivers get their timeouts again",
      stall / 1000);
  for (WorkerInfo& w : workers_) {
    if (w.alive) w.last_seen = StallClock::Credit(w.last_seen, stall, now);
  }
  sessions_.CreditStall(stall, now);
  // The recovery grace, likewise, counts only time the loop ran: judged
  // now, it would end before the re-registrations waiting in the kernel
  // were read, and rebuild outputs the workers still hold.
  if (recovery_.open()) recovery_.set_deadline(recovery_.deadline() + stall);
}

TimeUs Controller::DisconnectGraceUs() const {
  // A live worker whose connection broke reconnects (libzmq retries after
  // 100 ms), and its next heartbeat gets it registered again: one period
  // and a half covers that, and keeps a killed worker's detection under 1 s
  // at the default period.
  return std::min<TimeUs>(TimeUs{options_.heartbeat_ms} * 1500,
                          TimeUs{options_.worker_timeout_ms} * 1000);
}

void Controller::OnDisconnected(const std::vector<std::string>& identities, TimeUs now) {
  for (const std::string& identity : identities) {
    WorkerInfo* w = workers_.FindByIdentity(identity);
    if (w == nullptr || !w->alive || w->disconnected_at != 0) continue;
    spdlog::info(
        "worker {} '{}': its connection closed; declared dead in {} ms unless it "
        "comes back",
        w->id, w->name, DisconnectGraceUs() / 1000);
    w->disconnected_at = now;
    next_liveness_check_ = std::min(next_liveness_check_, now + DisconnectGraceUs());
  }
}

void Controller::CheckLiveness(TimeUs now) {
  TimeUs limit = static_cast<TimeUs>(options_.worker_timeout_ms) * 1000;
  const TimeUs grace = DisconnectGraceUs();
  TimeUs next_suspect = std::numeric_limits<TimeUs>::max();
  for (WorkerInfo& w : workers_) {
    if (!w.alive) continue;
    if (read_at_ - w.last_seen > limit) {
      MarkDead(w, "missed heartbeats for " + std::to_string(options_.worker_timeout_ms) + " ms",
               now);
    } else if (w.disconnected_at != 0 && now - w.disconnected_at >= grace) {
      if (transport_.Reachable(w.identity)) {
        w.disconnected_at = 0;  // the descriptor was another peer's
      } else {
        MarkDead(w,
                 "its connection closed and it did not come back within " +
                     std::to_string(grace / 1000) + " ms",
                 now);
      }
    } else if (w.disconnected_at != 0) {
      next_suspect = std::min(next_suspect, w.disconnected_at + grace);
    }
  }
  next_suspect_check_ = next_suspect;
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
  if (writer_) store_pending_.push_back(WorkerRecord{w.key, false});
  spdlog::warn("worker {} '{}' (pid {}) declared dead: {}", w.id, w.name, w.pid, why);
  workers_.MarkGone(w, std::move(why));
  state_holders_.ForgetWorker(w.id);
  scheduler_->RemoveDevice(w.device, now, died);
}

void Controller::SendTo(const std::string& identity, const Message& m) {
  transport_.Send(identity, m);
}

void Controller::SendToLiveWorkers(const Message& m) {
  for (const WorkerInfo& w : workers_) {
    if (w.alive) transport_.Send(w.identity, m);
  }
}

Result<JobId> Controller::SubmitOpenJob(JobSubmission job, SubmitDone done) {
  return Submit(std::move(job), std::move(done));
}

void Controller::RefusedToken(const std::string& name) { LogRefusedToken("driver session", name); }

void Controller::Audit(const std::string& identity, std::string_view who, std::string_view role,
                       const std::string& call, const std::string& outcome) {
  if (audit_) audit_->Append(who, role, transport_.PeerAddress(identity), call, outcome);
}

void Controller::UnknownPeer() { ++counters_.unknown_peers; }

void Controller::AfterStored(std::function<void()> fn) {
  WhenDurable([fn = std::move(fn)](const Status&) { fn(); });
}

void Controller::WhenStored(std::function<void(bool)> fn) {
  WhenDurable([fn = std::move(fn)](const Status& st) { fn(st.ok()); });
}

std::string Controller::EndpointOf(JobId job, uint32_t run) const {
  const OutputLocation* at = OutputOf(job, run);
  return at != nullptr && at->worker < workers_.size() && workers_[at->worker].alive
             ? workers_[at->worker].data_endpoint
             : std::string();
}

}  // namespace hmpmd
