#include "member_processes.h"

#include <spdlog/logger.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <exception>
#include <span>

#include "collective_kernels.h"
#include "communicator.h"
#include "data_server.h"
#include "hmpmd/protocol/tensor_bytes.h"

namespace hmpmd::worker {
namespace {

using Clock = std::chrono::steady_clock;

int Reps(size_t bytes) {
  return static_cast<int>(
      std::clamp<size_t>((size_t{256} << 20) / std::max<size_t>(bytes, 1), 3, 30));
}

double Seconds(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

// A zero-copy frame over `data`, which outlives the send (no free function).
zmq::message_t View(const void* data, size_t n) {
  return zmq::message_t(const_cast<void*>(data), n, nullptr, nullptr);
}

// Writes `mine` to the parent and reads every member's endpoint back.
std::vector<std::string> SwapEndpoints(const std::string& mine, int to_parent, int from_parent) {
  const std::string line = mine + "\n";
  if (::write(to_parent, line.data(), line.size()) < 0) return {};
  std::string all;
  char buf[4096];
  for (ssize_t got; (got = ::read(from_parent, buf, sizeof(buf))) > 0;) all.append(buf, got);
  std::vector<std::string> eps;
  for (size_t pos = 0; pos < all.size();) {
    const size_t nl = all.find('\n', pos);
    eps.push_back(all.substr(pos, nl - pos));
    pos = nl + 1;
  }
  return eps;
}

// CPU seconds of this process, all threads (ZeroMQ's I/O thread included).
double CpuSeconds() {
  timespec ts{};
  ::clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + ts.tv_nsec * 1e-9;
}

// "median-wall-seconds cpu-seconds-per-rep" to the parent.
int Report(int to_parent, const std::vector<double>& times, double cpu) {
  const std::string m = std::to_string(Median(times)) + " " +
                        std::to_string(cpu / static_cast<double>(times.size())) + "\n";
  return ::write(to_parent, m.data(), m.size()) < 0 ? 13 : 0;
}

// A raw-ring member: `bytes` to the next rank, `bytes` from the previous.
int RingMember(uint32_t rank, uint32_t p, size_t bytes, int to_parent, int from_parent) {
  zmq::context_t ctx(1);
  zmq::socket_t router(ctx, zmq::socket_type::router);
  router.set(zmq::sockopt::rcvhwm, 0);
  router.bind("tcp://127.0.0.1:*");
  const std::vector<std::string> eps =
      SwapEndpoints(router.get(zmq::sockopt::last_endpoint), to_parent, from_parent);
  if (eps.size() != p) return 11;
  zmq::socket_t next(ctx, zmq::socket_type::dealer);
  next.set(zmq::sockopt::sndhwm, 0);
  next.set(zmq::sockopt::linger, 1000);
  next.connect(eps[(rank + 1) % p]);
  const std::vector<std::byte> payload(bytes, std::byte{1});
  std::vector<double> times;
  zmq::message_t id, body;
  double cpu = 0;
  for (int rep = -1; rep < Reps(bytes); ++rep) {
    next.send(zmq::str_buffer("t"), zmq::send_flags::none);
    (void)router.recv(id);
    (void)router.recv(body);
    const auto start = Clock::now();
    const double cpu_start = CpuSeconds();
    for (size_t off = 0; off < bytes; off += Communicator::kChunkBytes) {
      next.send(View(payload.data() + off, std::min(Communicator::kChunkBytes, bytes - off)),
                zmq::send_flags::none);
    }
    for (size_t got = 0; got < bytes; got += body.size()) {
      (void)router.recv(id);
      (void)router.recv(body);
    }
    if (rep >= 0) times.push_back(Seconds(start));
    if (rep >= 0) cpu += CpuSeconds() - cpu_start;
  }
  // Tell the previous rank we have all of its bytes, and wait for the next
  // rank to say the same: exiting earlier would drop bytes still queued.
  router.send(id, zmq::send_flags::sndmore);
  router.send(zmq::str_buffer("done"), zmq::send_flags::none);
  (void)next.recv(body);
  const int rc = Report(to_parent, times, cpu);
  ::usleep(100'000);  // let the previous rank read our "done"
  return rc;
}

// A collective member: bind, swap endpoints, run `op` Reps() times.
int Member(const std::string& op, uint32_t rank, uint32_t p, size_t bytes, bool as_task,
           int to_parent, int from_parent) {
  if (op == "ring") return RingMember(rank, p, bytes, to_parent, from_parent);
  spdlog::logger log("bench");
  zmq::context_t ctx(1);
  ObjectStore store(0);
  ActorStates states;
  CollectiveInbox inbox;
  // Every member process uses this fixed token: a benchmark's, not a secret.
  const DataToken token_of_bench{0x62656e6368, 1};
  DataTokens tokens(token_of_bench);
  DataServer server(&store, &states, &inbox, &tokens, &log);
  if (!server.Bind("127.0.0.1").ok()) return 10;
  GangView gang{rank, SwapEndpoints(server.endpoint(), to_parent, from_parent), 1, token_of_bench};
  if (gang.endpoints.size() != p) return 11;
  Communicator comm(&ctx, &inbox, gang, 120'000'000);
  std::vector<float> data(bytes / sizeof(float), 1.0f);
  std::vector<double> times;
  std::vector<float> token(1, 1.0f);
  std::vector<std::byte> out;  // reused: a rep times the exchange, not page faults
  std::vector<size_t> sizes;
  const auto whole = std::as_bytes(std::span<const float>(data));
  std::vector<std::span<const std::byte>> blocks;
  for (uint32_t d = 0; d < p; ++d) {
    const size_t b = bytes * d / p, e = bytes * (d + 1) / p;
    blocks.push_back(whole.subspan(b, e - b));
  }
  // The task path: one input buffer as a lane passes it to the kernel.
  BufferList inputs(1);
  inputs[0].shape = {static_cast<int64_t>(data.size())};
  inputs[0].data.resize(data.size() * sizeof(float));
  if (!data.empty()) std::memcpy(inputs[0].data.data(), data.data(), inputs[0].data.size());
  const Args no_args;
  double cpu = 0;
  for (int rep = -1; rep < Reps(bytes); ++rep) {
    // A one-float all-reduce lines the members up, so a rep does not time
    // a straggler still finishing the previous one.
    if (!comm.AllReduce(token).ok()) return 14;
    const auto start = Clock::now();
    const double cpu_start = CpuSeconds();
    Status s;
    if (as_task) {
      try {
        // Its output goes to the store in a worker, whose last reader
        // hands its bytes back to the tensor pool; here that happens now.
        BufferList got = RunCollective(op, KernelArgs(no_args), inputs, comm);
        RecycleTensorBytes(std::span<Buffer>(got));
      } catch (const std::exception& e) {
        s = Status::Unavailable(e.what());
      }
    } else {
      s = op == "allreduce" ? comm.AllReduce(data) : comm.AllToAll(blocks, &out, &sizes);
    }
    if (!s.ok()) {
      std::fprintf(stderr, "rank %u: %s\n", rank, s.ToString().c_str());
      return 12;
    }
    if (rep >= 0) times.push_back(Seconds(start));
    if (rep >= 0) cpu += CpuSeconds() - cpu_start;
  }
  // Every member is past its last rep once this returns.
  if (!comm.AllReduce(token).ok()) return 14;
  const int rc = Report(to_parent, times, cpu);
  ::usleep(100'000);  // let peers read the last of the token from our socket
  return rc;
}

}  // namespace

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? -1 : v[v.size() / 2];
}

GangTime RunGang(const std::string& op, uint32_t p, size_t bytes, bool as_task) {
  std::vector<pid_t> pids;
  std::vector<int> up_r, down_w;
  for (uint32_t rank = 0; rank < p; ++rank) {
    int up[2], down[2];
    if (::pipe(up) != 0 || ::pipe(down) != 0) return {};
    pid_t pid = ::fork();
    if (pid == 0) {
      ::close(up[0]);
      ::close(down[1]);
      for (int fd : down_w) ::close(fd);
      ::_exit(Member(op, rank, p, bytes, as_task, up[1], down[0]));
    }
    ::close(up[1]);
    ::close(down[0]);
    pids.push_back(pid);
    up_r.push_back(up[0]);
    down_w.push_back(down[1]);
  }
  auto read_line = [](int fd) {
    std::string line;
    char ch;
    while (::read(fd, &ch, 1) == 1 && ch != '\n') line += ch;
    return line;
  };
  std::string eps;
  for (int fd : up_r) eps += read_line(fd) + "\n";
  for (int fd : down_w) {
    if (::write(fd, eps.data(), eps.size()) < 0) return {};
    ::close(fd);
  }
  GangTime t;
  bool ok = true;
  for (uint32_t rank = 0; rank < p; ++rank) {
    double wall = -1, cpu = 0;
    ok = std::sscanf(read_line(up_r[rank]).c_str(), "%lf %lf", &wall, &cpu) == 2 && ok;
    if (rank == 0) t.wall = wall;
    t.cpu += cpu;
  }
  for (int fd : up_r) ::close(fd);
  for (pid_t pid : pids) {
    int status = 0;
    ::waitpid(pid, &status, 0);
    ok = ok && WIFEXITED(status) && WEXITSTATUS(status) == 0;
  }
  return ok ? t : GangTime{};
}

double RawPointToPoint(size_t bytes, bool chunked) {
  const size_t chunk = chunked ? Communicator::kChunkBytes : std::max<size_t>(bytes, 1);
  int up[2];
  if (::pipe(up) != 0) return -1;
  pid_t pid = ::fork();
  if (pid == 0) {
    ::close(up[0]);
    zmq::context_t ctx(1);
    zmq::socket_t router(ctx, zmq::socket_type::router);
    router.set(zmq::sockopt::rcvhwm, 0);
    router.bind("tcp://127.0.0.1:*");
    std::string ep = router.get(zmq::sockopt::last_endpoint) + "\n";
    if (::write(up[1], ep.data(), ep.size()) < 0) ::_exit(1);
    for (int rep = -1; rep < Reps(bytes); ++rep) {
      size_t got = 0;
      zmq::message_t id;
      do {
        zmq::message_t body;
        (void)router.recv(id);
        (void)router.recv(body);
        got += body.size();
      } while (got < bytes);
      router.send(id, zmq::send_flags::sndmore);
      router.send(zmq::str_buffer("k"), zmq::send_flags::none);
    }
    ::usleep(100'000);
    ::_exit(0);
  }
  ::close(up[1]);
  std::string ep;
  char ch;
  while (::read(up[0], &ch, 1) == 1 && ch != '\n') ep += ch;
  ::close(up[0]);
  std::vector<double> times;
  {
    zmq::context_t ctx(1);
    zmq::socket_t dealer(ctx, zmq::socket_type::dealer);
    dealer.set(zmq::sockopt::sndhwm, 0);
    dealer.connect(ep);
    const std::vector<std::byte> payload(bytes, std::byte{1});
    for (int rep = -1; rep < Reps(bytes); ++rep) {
      const auto start = Clock::now();
      for (size_t off = 0; off < bytes; off += chunk) {
        dealer.send(View(payload.data() + off, std::min(chunk, bytes - off)),
                    zmq::send_flags::none);
      }
      zmq::message_t ack;
      (void)dealer.recv(ack);
      if (rep >= 0) times.push_back(Seconds(start));
    }
    dealer.set(zmq::sockopt::linger, 0);
  }
  ::waitpid(pid, nullptr, 0);
  return Median(times);
}

}  // namespace hmpmd::worker
