#include "driver_notifier.h"

#include <algorithm>

#include "hmpmd/protocol/data_auth.h"

namespace hmpmd::worker {
namespace {

// Notices queued for a driver not reading (stopped, or gone): past these,
// new ones are dropped.
constexpr int kQueuedNotices = 1024;

}  // namespace

zmq::socket_t* DriverNotifier::LinkTo(const std::string& endpoint, JobId job) {
  auto key = std::make_pair(endpoint, job);
  if (auto it = links_.find(key); it != links_.end()) {
    it->second.used = ++uses_;
    return &it->second.socket;
  }
  if (links_.size() >= kMaxLinks) {
    links_.erase(std::min_element(links_.begin(), links_.end(), [](const auto& a, const auto& b) {
      return a.second.used < b.second.used;
    }));
  }
  zmq::socket_t s(*ctx_, zmq::socket_type::dealer);
  s.set(zmq::sockopt::linger, 0);
  s.set(zmq::sockopt::sndhwm, kQueuedNotices);
  SetDataCredentials(s, JobDataToken(tokens_->current(), job), job);
  s.connect(endpoint);
  Link& link = links_[std::move(key)];
  link.socket = std::move(s);
  link.used = ++uses_;
  return &link.socket;
}

void DriverNotifier::Notify(const std::string& endpoint, JobId job, const RunDoneNotice& notice) {
  try {
    zmq::socket_t* s = LinkTo(endpoint, job);
    DataHeader h;
    h.op = static_cast<uint8_t>(DataOp::kRunDone);
    h.key = job;
    h.token = JobDataToken(tokens_->current(), job);
    const std::string body = EncodeRunDone(notice);
    if (!s->send(zmq::buffer(&h, sizeof(h)),
                 zmq::send_flags::sndmore | zmq::send_flags::dontwait)) {
      return;  // its queue is full: the controller's update still comes
    }
    (void)s->send(zmq::buffer(body), zmq::send_flags::dontwait);
  } catch (const zmq::error_t& e) {
    log_->debug("job {}: telling the driver at {} of {} run(s) done failed: {}", job, endpoint,
                notice.runs.size(), e.what());
    links_.erase({endpoint, job});
  }
}

void DriverNotifier::Forget(JobId job) {
  std::erase_if(links_, [job](const auto& entry) { return entry.first.second == job; });
}

}  // namespace hmpmd::worker
