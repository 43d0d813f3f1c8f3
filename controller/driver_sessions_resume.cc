// DriverSessions after a restart: a session restored from the store waits
// for its driver (Restore), which takes it up on a new connection (Resume)
// and hears what it missed. Sessions that live on are in driver_sessions.cc.
#include <spdlog/spdlog.h>

#include <algorithm>

#include "hmpmd/controller/driver_sessions.h"
#include "hmpmd/protocol/codec.h"

namespace hmpmd {

TimeUs DriverSessions::ResumeWindowUs(TimeUs timeout_us) {
  // Long enough for a driver to notice the silence (its own 10 periods) and
  // try each controller it knows; a driver that died does not hold its
  // session for much longer than a silent one would.
  constexpr TimeUs kAtLeast = 30'000'000;
  return std::max(2 * timeout_us, kAtLeast);
}

void DriverSessions::Restore(JobId job, Replayed replayed, uint32_t heartbeat_ms, TimeUs now) {
  Session& s = sessions_[job];
  s.timeout_us = TimeUs{std::clamp(heartbeat_ms, 100u, 60'000u)} * 10'000;
  s.resume_window_us = ResumeWindowUs(s.timeout_us);
  s.last_seen = now;
  s.update.job = job;
  s.groups = static_cast<uint32_t>(replayed.acks.size());
  s.stored_seq = s.told_stored = replayed.acks.empty() ? 0 : replayed.acks.back().seq;
  s.acks = std::move(replayed.acks);
  s.refused = std::move(replayed.refused);
  s.refused_actors = std::move(replayed.refused_actors);
  if (replayed.rejected > 0) jobs_->CountRejected(job, replayed.rejected, replayed.first_rejection);
}

void DriverSessions::RestartWaits(TimeUs now) {
  for (auto& [job, s] : sessions_) {
    if (s.identity.empty()) s.last_seen = now;
  }
}

void DriverSessions::Resume(const std::string& identity, const SessionOpen& m,
                            const std::string& who, const std::string& role,
                            const std::optional<TokenHolder>& holder, TimeUs now) {
  const JobId job = m.resume;
  const std::string name = "session job " + std::to_string(job);
  const auto refuse = [&](const Status& why) {
    host_->Audit(identity, who, role, "session resume, job " + std::to_string(job),
                 "refused: " + why.message());
    host_->SendTo(identity, Refused(why));
  };
  const JobRun* run = jobs_->job(job);
  // Its data token proves the driver was given the session: a job id alone
  // is in every listing.
  if (run == nullptr || !run->open || m.resume_token != JobDataToken(data_token_, job)) {
    refuse(Status::NotFound(name + ": no such session to resume here"));
    return;
  }
  if (holder && holder->role != TokenRole::kAdmin && holder->tenant != run->tenant.name) {
    refuse(Status::PermissionDenied(name + " belongs to another tenant"));
    return;
  }
  auto it = sessions_.find(job);
  if (it == sessions_.end() || IsTerminal(run->state)) {
    refuse(Status::Aborted(name + " ended " + std::string(JobStateName(run->state)) +
                           (run->error.empty() ? "" : ": " + run->error)));
    return;
  }
  if (auto other = session_of_.find(identity); other != session_of_.end() && other->second != job) {
    refuse(Status::AlreadyExists("this connection already has a session"));
    return;
  }
  Session& s = it->second;
  // The old connection (a link that broke, a driver that reconnected) is
  // forgotten: only the newest speaks for the session.
  if (!s.identity.empty()) session_of_.erase(s.identity);
  s.identity = identity;
  s.who = who;
  s.role = role;
  s.last_seen = now;
  session_of_[identity] = job;
  const uint64_t held = s.acks.empty() ? 0 : s.acks.back().seq;
  host_->Audit(identity, who, role, "session resume, job " + std::to_string(job), "resumed");
  spdlog::info("driver session {} resumed ({} groups held, the driver had acks to {})", job,
               s.acks.size(), m.acked_seq);
  host_->SendTo(identity, SessionAck{job, "", 0, JobDataToken(data_token_, job), held});
  // Everything the driver may have missed: the acks after its last, and
  // every run that ended (it ignores those it knew).
  SessionUpdate& u = s.update;
  u.acks.clear();
  u.ended.clear();
  auto first = std::upper_bound(s.acks.begin(), s.acks.end(), m.acked_seq,
                                [](uint64_t seq, const GroupAck& a) { return seq < a.seq; });
  u.acks.assign(first, s.acks.end());
  for (uint32_t i = 0; i < run->runs.size(); ++i) {
    const TaskRecord& rec = run->runs[i];
    if (rec.state == TaskState::kDone) {
      u.ended.push_back({i, TaskEnded::kDone, "", host_->EndpointOf(job, i), rec.output_bytes,
                         rec.output_buffers});
    } else if (rec.state == TaskState::kFailed || rec.state == TaskState::kCancelled) {
      auto why = s.ends.find(i);
      u.ended.push_back(
          {i, rec.state == TaskState::kFailed ? TaskEnded::kFailed : TaskEnded::kCancelled,
           why == s.ends.end() ? "ended before the controller restarted" : why->second, "", 0});
    }
  }
  u.stored_seq = s.told_stored = s.stored_seq;
  Send(identity, u);
}

void DriverSessions::Send(const std::string& identity, SessionUpdate& u) {
  // The driver's decoder drops a message with more than this many entries
  // in one list (DecodeLimits::max_batch): a resume of a large session, or
  // a burst of ends, goes in parts.
  constexpr size_t kMost = DecodeLimits{}.max_batch;
  if (u.acks.size() <= kMost && u.ended.size() <= kMost) {
    host_->SendTo(identity, u);
  } else {
    SessionUpdate part;
    part.job = u.job;
    part.stored_seq = u.stored_seq;
    for (size_t a = 0, e = 0; a < u.acks.size() || e < u.ended.size();) {
      const size_t na = std::min(kMost, u.acks.size() - a),
                   ne = std::min(kMost, u.ended.size() - e);
      part.acks.assign(std::make_move_iterator(u.acks.begin() + static_cast<ptrdiff_t>(a)),
                       std::make_move_iterator(u.acks.begin() + static_cast<ptrdiff_t>(a + na)));
      part.ended.assign(std::make_move_iterator(u.ended.begin() + static_cast<ptrdiff_t>(e)),
                        std::make_move_iterator(u.ended.begin() + static_cast<ptrdiff_t>(e + ne)));
      a += na;
      e += ne;
      // The end goes with the last part, after every ack and run it covers.
      const bool last = a == u.acks.size() && e == u.ended.size();
      part.closed = last && u.closed;
      if (part.closed) {
        part.job_state = u.job_state;
        part.job_error = u.job_error;
      }
      host_->SendTo(identity, part);
    }
  }
  u.acks.clear();
  u.ended.clear();
}

}  // namespace hmpmd
