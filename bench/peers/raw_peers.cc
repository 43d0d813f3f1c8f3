#include "raw_peers.h"

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <zmq.hpp>

namespace hmpmd {
namespace {

constexpr int kTimeoutMs = 5000;

// A peer: reads the endpoint from `fd`, connects a DEALER, says hello, and
// sends every message straight back. Ends on an empty message, a 5 s silence
// or SIGTERM.
[[noreturn]] void PeerMain(int fd) {
  char buf[256];
  ssize_t n = read(fd, buf, sizeof buf);
  close(fd);
  if (n <= 0) _exit(1);
  try {
    zmq::context_t ctx(1);
    zmq::socket_t dealer(ctx, zmq::socket_type::dealer);
    dealer.set(zmq::sockopt::linger, 0);
    dealer.set(zmq::sockopt::rcvtimeo, kTimeoutMs);
    dealer.connect(std::string(buf, static_cast<size_t>(n)));
    dealer.send(zmq::str_buffer("hello"), zmq::send_flags::none);
    while (true) {
      zmq::message_t msg;
      if (!dealer.recv(msg) || msg.size() == 0) break;
      dealer.send(msg, zmq::send_flags::none);
    }
  } catch (const zmq::error_t&) {
    _exit(1);
  }
  _exit(0);
}

}  // namespace

struct RawPeers::Zmq {
  zmq::context_t ctx{1};
  zmq::socket_t router{ctx, zmq::socket_type::router};
};

RawPeers::RawPeers() = default;
RawPeers::~RawPeers() { Stop(); }

bool RawPeers::Start(int peers) {
  std::vector<int> write_fds;
  for (int i = 0; i < peers; ++i) {
    int fds[2];
    if (pipe(fds) != 0) break;
    pid_t pid = fork();  // before this process has a ZeroMQ context
    if (pid == 0) {
      close(fds[1]);
      for (int fd : write_fds) close(fd);
      PeerMain(fds[0]);
    }
    close(fds[0]);
    if (pid < 0) {
      close(fds[1]);
      break;
    }
    children_.push_back(pid);
    write_fds.push_back(fds[1]);
  }
  bool ok = static_cast<int>(children_.size()) == peers;
  try {
    zmq_ = std::make_unique<Zmq>();
    zmq_->router.set(zmq::sockopt::linger, 0);
    zmq_->router.set(zmq::sockopt::rcvtimeo, kTimeoutMs);
    zmq_->router.bind("tcp://127.0.0.1:*");
    std::string ep = zmq_->router.get(zmq::sockopt::last_endpoint);
    for (int fd : write_fds) {
      ok = ok && write(fd, ep.data(), ep.size()) == static_cast<ssize_t>(ep.size());
    }
  } catch (const zmq::error_t&) {
    ok = false;
  }
  for (int fd : write_fds) close(fd);
  while (ok && static_cast<int>(identities_.size()) < peers) {
    zmq::message_t id, hello;
    if (!zmq_->router.recv(id) || !zmq_->router.recv(hello))
      ok = false;
    else
      identities_.push_back(id.to_string());
  }
  if (!ok) Stop();
  return ok;
}

void RawPeers::Stop() {
  for (pid_t pid : children_) kill(pid, SIGTERM);
  for (pid_t pid : children_) waitpid(pid, nullptr, 0);
  children_.clear();
  identities_.clear();
  zmq_.reset();
}

double RawPeers::Independent(int n, int batch, int window) {
  using Clock = std::chrono::steady_clock;
  const size_t peers = identities_.size();
  std::vector<int> outstanding(peers, 0);
  std::vector<uint64_t> ids(static_cast<size_t>(batch));
  int next = 0, done = 0;
  auto send_batch = [&](size_t p) {
    int k = std::min(batch, n - next);
    for (int i = 0; i < k; ++i) ids[static_cast<size_t>(i)] = static_cast<uint64_t>(next + i);
    zmq_->router.send(zmq::buffer(identities_[p]), zmq::send_flags::sndmore);
    zmq_->router.send(zmq::buffer(ids.data(), static_cast<size_t>(k) * sizeof(uint64_t)),
                      zmq::send_flags::none);
    next += k;
    ++outstanding[p];
  };
  auto t0 = Clock::now();
  for (int w = 0; w < window; ++w) {
    for (size_t p = 0; p < peers && next < n; ++p) send_batch(p);
  }
  while (done < n) {
    zmq::message_t id, body;
    if (!zmq_->router.recv(id) || !zmq_->router.recv(body)) return -1;
    done += static_cast<int>(body.size() / sizeof(uint64_t));
    auto it = std::find(identities_.begin(), identities_.end(), id.to_string());
    if (it == identities_.end()) return -1;
    size_t p = static_cast<size_t>(it - identities_.begin());
    --outstanding[p];
    while (outstanding[p] < window && next < n) send_batch(p);
  }
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

double RawPeers::Chain(int n) {
  using Clock = std::chrono::steady_clock;
  std::string payload(64, 'x');  // about the size of a one-task batch
  auto t0 = Clock::now();
  for (int i = 0; i < n; ++i) {
    zmq_->router.send(zmq::buffer(identities_[0]), zmq::send_flags::sndmore);
    zmq_->router.send(zmq::buffer(payload), zmq::send_flags::none);
    zmq::message_t id, body;
    if (!zmq_->router.recv(id) || !zmq_->router.recv(body)) return -1;
  }
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

}  // namespace hmpmd
