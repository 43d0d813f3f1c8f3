#include "fake_fleet.h"

#include <sys/epoll.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <queue>
#include <random>
#include <sstream>
#include <vector>
#include <zmq.hpp>

#include "hmpmd/protocol/codec.h"
#include "hmpmd/protocol/control_auth.h"

namespace hmpmd::bench {
namespace {

int64_t NowUs() {
  return std::chrono::duration_cast<std::chrono::microseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

struct FakeWorker {
  zmq::socket_t socket;
  WorkerId id = 0;
  bool registered = false;
  bool silent = false;
  uint32_t heartbeat_ms = 500;
  int64_t next_heartbeat_us = 0;
  std::vector<int64_t> lane_free_us;  // when each lane's last queued task ends
};

// A result that is due at `due_us` from worker `worker`.
struct Pending {
  int64_t due_us;
  uint32_t worker;
  TaskResult result;
  bool operator>(const Pending& o) const { return due_us > o.due_us; }
};

class Fleet {
 public:
  explicit Fleet(const FakeFleetOptions& o) : o_(o), ctx_(1) {
    // libzmq's default is 1023 sockets per context.
    ctx_.set(zmq::ctxopt::max_sockets, static_cast<int>(o.workers) + 16);
    std::mt19937_64 rng(std::random_device{}());
    workers_.resize(o.workers);
    checked_.assign(o.workers, false);
    instances_.resize(o.workers);
    for (uint32_t i = 0; i < o.workers; ++i) {
      FakeWorker& w = workers_[i];
      w.socket = zmq::socket_t(ctx_, zmq::socket_type::dealer);
      w.socket.set(zmq::sockopt::linger, 0);
      SetControlCredentials(w.socket, "");  // a controller with no token
      w.socket.connect(o.controller);
      w.lane_free_us.assign(o.cube_cores, 0);
      instances_[i] = rng() | 1;  // never 0: a real worker's instance
      Watch(w.socket.get(zmq::sockopt::fd), i);
      Register(i);
    }
    Watch(STDIN_FILENO, kStdin);
  }
  ~Fleet() { ::close(epoll_); }

  int Run() {
    const int64_t start = NowUs();
    const int64_t end = start + static_cast<int64_t>(o_.max_seconds * 1e6);
    std::vector<epoll_event> events(256);
    while (NowUs() < end) {
      const int ready =
          ::epoll_wait(epoll_, events.data(), static_cast<int>(events.size()), PollMs());
      bool command = false;
      for (int e = 0; e < ready; ++e) {
        if (events[e].data.u32 == kStdin) {
          command = true;
        } else {
          Touch(events[e].data.u32);
        }
      }
      // ZMQ_FD only says that something changed: each touched socket is
      // drained until ZMQ_EVENTS has no POLLIN, after sends too.
      for (size_t k = 0; k < touched_.size(); ++k) Read(touched_[k]);
      for (uint32_t i : touched_) checked_[i] = false;
      touched_.clear();
      if (!registered_reported_ && registered_ == workers_.size()) {
        registered_reported_ = true;
        std::printf("registered %.6f\n", (NowUs() - start) / 1e6);
        std::fflush(stdout);
      }
      if (command && !Command()) return 0;
      FlushDue();
      Heartbeats();
    }
    std::fprintf(stderr, "fake fleet: ran for %.0f s without being stopped; exiting\n",
                 o_.max_seconds);
    return 1;
  }

 private:
  static constexpr uint32_t kStdin = UINT32_MAX;

  void Watch(int fd, uint32_t tag) {
    epoll_event ev{};
    ev.events = EPOLLIN;
    ev.data.u32 = tag;
    ::epoll_ctl(epoll_, EPOLL_CTL_ADD, fd, &ev);
  }

  void Touch(uint32_t i) {
    if (checked_[i]) return;
    checked_[i] = true;
    touched_.push_back(i);
  }

  int PollMs() const {
    if (!touched_.empty()) return 0;
    if (!pending_.empty() && pending_.top().due_us - NowUs() < 5000) return 0;
    return 5;
  }

  void Send(uint32_t i, const Message& m) {
    const EncodedFrames f = Encode(m);
    workers_[i].socket.send(zmq::buffer(f.header), zmq::send_flags::sndmore);
    workers_[i].socket.send(zmq::buffer(f.body), zmq::send_flags::none);
    Touch(i);  // a send can consume the ZMQ_FD edge of a pending receive
  }

  void Register(uint32_t i) {
    RegisterMsg r;
    r.name = "fake-" + std::to_string(i);
    r.pid = static_cast<uint32_t>(::getpid());
    r.cores = {{CoreKind::kCube, o_.cube_cores}};
    r.memory_mb = 64 << 10;
    for (std::string_view k : kBuiltinKernels) r.kernels.emplace_back(k);
    r.sent_us = NowUs();
    r.instance = instances_[i];
    Send(i, r);
  }

  void Read(uint32_t i) {
    FakeWorker& w = workers_[i];
    while (!w.silent) {
      zmq::message_t header, body;
      if (!w.socket.recv(header, zmq::recv_flags::dontwait)) return;
      if (!header.more() || !w.socket.recv(body)) continue;
      Result<Message> m = Decode(header.to_string_view(), body.to_string_view());
      if (!m.ok()) continue;
      if (auto* ack = std::get_if<RegisterAck>(&*m)) {
        if (!w.registered) ++registered_;
        w.registered = true;
        w.id = ack->worker_id;
        w.heartbeat_ms = std::max<uint32_t>(ack->heartbeat_ms, 1);
        w.next_heartbeat_us = NowUs() + w.heartbeat_ms * 1000;
      } else if (auto* reject = std::get_if<Reject>(&*m)) {
        if (reject->reregister) Register(i);
      } else if (auto* batch = std::get_if<AssignBatch>(&*m)) {
        Take(i, *batch);
      }
    }
  }

  void Take(uint32_t i, const AssignBatch& batch) {
    DoneBatch now;
    now.worker_id = workers_[i].id;
    const int64_t t = NowUs();
    for (const TaskAssign& a : batch.tasks) {
      TaskResult r;
      r.job = a.job;
      r.task = a.task;
      r.attempt = a.attempt;
      if (o_.task_us <= 0) {
        r.start_us = r.end_us = t;
        now.results.push_back(std::move(r));
        continue;
      }
      int64_t& free = workers_[i].lane_free_us[a.lane % o_.cube_cores];
      r.start_us = std::max(free, t);
      r.end_us = r.start_us + static_cast<int64_t>(o_.task_us);
      free = r.end_us;
      pending_.push({r.end_us, i, std::move(r)});
    }
    if (!now.results.empty()) Done(i, std::move(now));
  }

  void Done(uint32_t i, DoneBatch batch) {
    results_ += batch.results.size();
    batch.sent_us = NowUs();
    Send(i, batch);
  }

  void FlushDue() {
    const int64_t t = NowUs();
    std::vector<DoneBatch> due(workers_.size());
    std::vector<uint32_t> touched;
    while (!pending_.empty() && pending_.top().due_us <= t) {
      Pending p = pending_.top();
      pending_.pop();
      if (workers_[p.worker].silent) continue;
      if (due[p.worker].results.empty()) touched.push_back(p.worker);
      due[p.worker].worker_id = workers_[p.worker].id;
      due[p.worker].results.push_back(std::move(p.result));
    }
    for (uint32_t i : touched) Done(i, std::move(due[i]));
  }

  void Heartbeats() {
    const int64_t t = NowUs();
    for (uint32_t i = 0; i < workers_.size(); ++i) {
      FakeWorker& w = workers_[i];
      if (!w.registered || w.silent || t < w.next_heartbeat_us) continue;
      Heartbeat hb;
      hb.worker_id = w.id;
      hb.sent_us = t;
      Send(i, hb);
      ++heartbeats_;
      w.next_heartbeat_us = t + w.heartbeat_ms * 1000;
    }
  }

  // One line from stdin; false at its end.
  bool Command() {
    char buf[256];
    const ssize_t n = ::read(STDIN_FILENO, buf, sizeof buf - 1);
    if (n <= 0) return false;
    line_.append(buf, static_cast<size_t>(n));
    for (size_t nl; (nl = line_.find('\n')) != std::string::npos;) {
      std::istringstream in(line_.substr(0, nl));
      line_.erase(0, nl + 1);
      std::string verb;
      in >> verb;
      if (verb == "silence") {
        uint32_t k = 0;
        in >> k;
        if (k < workers_.size() && !workers_[k].silent) {
          workers_[k].silent = true;
          ::epoll_ctl(epoll_, EPOLL_CTL_DEL, workers_[k].socket.get(zmq::sockopt::fd), nullptr);
          workers_[k].socket.close();
        }
        std::printf("ok\n");
      } else if (verb == "stats") {
        std::printf("heartbeats %llu results %llu\n", static_cast<unsigned long long>(heartbeats_),
                    static_cast<unsigned long long>(results_));
      } else {
        std::printf("error unknown command '%s'\n", verb.c_str());
      }
      std::fflush(stdout);
    }
    return true;
  }

  FakeFleetOptions o_;
  zmq::context_t ctx_;
  std::vector<FakeWorker> workers_;
  std::vector<uint64_t> instances_;
  int epoll_ = ::epoll_create1(EPOLL_CLOEXEC);
  std::vector<bool> checked_;      // in touched_ already
  std::vector<uint32_t> touched_;  // sockets to drain this turn
  std::priority_queue<Pending, std::vector<Pending>, std::greater<>> pending_;
  size_t registered_ = 0;
  bool registered_reported_ = false;
  uint64_t heartbeats_ = 0;
  uint64_t results_ = 0;
  std::string line_;
};

}  // namespace

int RunFakeFleet(const FakeFleetOptions& options) {
  if (options.workers == 0 || options.cube_cores == 0) {
    std::fprintf(stderr, "fake fleet: --fake-workers and --cores must be at least 1\n");
    return 2;
  }
  return Fleet(options).Run();
}

}  // namespace hmpmd::bench
