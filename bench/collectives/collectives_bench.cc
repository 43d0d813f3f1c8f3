// bench_collectives: bus bandwidth of all-reduce and all-to-all among 2 and
// 4 loopback worker processes (the worker's data sockets and Communicator),
// side by side with raw ZeroMQ point-to-point bandwidth measured in the
// same run (DEALER -> ROUTER, acknowledged; as one message and in 1 MiB
// messages; the ratio is against the faster).
//
// Bus bandwidth follows the NCCL convention: all-reduce moves
// 2(P-1)/P * S per rank, all-to-all (P-1)/P * S, for S bytes per rank.
// Each figure is rank 0's median over several repetitions, each started
// after a one-float all-reduce that lines the members up.
//
//   bench_collectives            1 KB .. 64 MB on 2 and 4 members
//   bench_collectives --smoke    1 KB and 1 MB only (CI)
#include <spdlog/logger.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "collective_kernels.h"
#include "communicator.h"
#include "data_server.h"

namespace hmpmd::worker {
namespace {

using Clock = std::chrono::steady_clock;

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

int Reps(size_t bytes) {
  return static_cast<int>(
      std::clamp<size_t>((size_t{256} << 20) / std::max<size_t>(bytes, 1), 3, 30));
}

// One member: bind, swap endpoints through the pipes, run `op` Reps()
// times; rank 0 writes the median seconds to `to_parent`.
int Member(const std::string& op, uint32_t rank, uint32_t p, size_t bytes, int to_parent,
           int from_parent) {
  spdlog::logger log("bench");
  zmq::context_t ctx(1);
  ObjectStore store(0);
  CollectiveInbox inbox;
  DataServer server(&ctx, &store, &inbox, &log);
  if (!server.Bind("127.0.0.1").ok()) return 10;
  std::string mine = server.endpoint() + "\n";
  if (::write(to_parent, mine.data(), mine.size()) < 0) return 11;
  std::string all;
  char buf[4096];
  for (ssize_t got; (got = ::read(from_parent, buf, sizeof(buf))) > 0;) all.append(buf, got);
  GangView gang{rank, {}, 1};
  for (size_t pos = 0; pos < all.size();) {
    size_t nl = all.find('\n', pos);
    gang.endpoints.push_back(all.substr(pos, nl - pos));
    pos = nl + 1;
  }
  Communicator comm(&ctx, &inbox, gang, 120'000'000);
  std::vector<float> data(bytes / sizeof(float), 1.0f);
  std::vector<double> times;
  std::vector<float> token(1, 1.0f);
  std::vector<std::byte> out;  // reused: a rep times the exchange, not page faults
  std::vector<size_t> sizes;
  for (int rep = -1; rep < Reps(bytes); ++rep) {
    // A one-float all-reduce lines the members up, so a rep does not time
    // a straggler still finishing the previous one.
    if (!comm.AllReduce(token).ok()) return 14;
    const auto start = Clock::now();
    Status s;
    if (op == "allreduce") {
      s = comm.AllReduce(data);
    } else {
      const auto whole = std::as_bytes(std::span<const float>(data));
      std::vector<std::span<const std::byte>> blocks;
      for (uint32_t d = 0; d < p; ++d) {
        const size_t b = bytes * d / p, e = bytes * (d + 1) / p;
        blocks.push_back(whole.subspan(b, e - b));
      }
      s = comm.AllToAll(blocks, &out, &sizes);
    }
    if (!s.ok()) {
      std::fprintf(stderr, "rank %u: %s\n", rank, s.ToString().c_str());
      return 12;
    }
    if (rep >= 0) times.push_back(std::chrono::duration<double>(Clock::now() - start).count());
  }
  if (rank == 0) {
    std::string m = std::to_string(Median(times)) + "\n";
    if (::write(to_parent, m.data(), m.size()) < 0) return 13;
  }
  ::usleep(100'000);  // let peers finish reading from our socket
  return 0;
}

// Forks `p` members and returns rank 0's median seconds (<0: failure).
double RunGang(const std::string& op, uint32_t p, size_t bytes) {
  std::vector<pid_t> pids;
  std::vector<int> up_r, down_w;
  for (uint32_t rank = 0; rank < p; ++rank) {
    int up[2], down[2];
    if (::pipe(up) != 0 || ::pipe(down) != 0) return -1;
    pid_t pid = ::fork();
    if (pid == 0) {
      ::close(up[0]);
      ::close(down[1]);
      for (int fd : down_w) ::close(fd);
      ::_exit(Member(op, rank, p, bytes, up[1], down[0]));
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
    if (::write(fd, eps.data(), eps.size()) < 0) return -1;
    ::close(fd);
  }
  std::string t = read_line(up_r[0]);
  for (int fd : up_r) ::close(fd);
  bool ok = true;
  for (pid_t pid : pids) {
    int status = 0;
    ::waitpid(pid, &status, 0);
    ok = ok && WIFEXITED(status) && WEXITSTATUS(status) == 0;
  }
  return ok && !t.empty() ? std::stod(t) : -1;
}

// Raw ZeroMQ: `bytes` from one process to another over DEALER -> ROUTER,
// acknowledged, as one message or (chunked) in messages of at most
// Communicator::kChunkBytes, which pipelines the copies.
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
    std::vector<std::byte> payload(bytes, std::byte{1});
    for (int rep = -1; rep < Reps(bytes); ++rep) {
      const auto start = Clock::now();
      for (size_t off = 0; off < bytes; off += chunk) {
        const size_t n = std::min(chunk, bytes - off);
        dealer.send(zmq::message_t(payload.data() + off, n), zmq::send_flags::none);
      }
      zmq::message_t ack;
      (void)dealer.recv(ack);
      if (rep >= 0) times.push_back(std::chrono::duration<double>(Clock::now() - start).count());
    }
    dealer.set(zmq::sockopt::linger, 0);
  }
  ::waitpid(pid, nullptr, 0);
  return Median(times);
}

std::string Size(size_t b) {
  if (b >= (1u << 20)) return std::to_string(b >> 20) + " MB";
  return std::to_string(b >> 10) + " KB";
}

}  // namespace
}  // namespace hmpmd::worker

int main(int argc, char** argv) {
  using namespace hmpmd::worker;
  const bool smoke = argc > 1 && std::strcmp(argv[1], "--smoke") == 0;
  std::vector<size_t> sizes;
  if (smoke) {
    sizes = {1 << 10, 1 << 20};
  } else {
    for (size_t s = 1 << 10; s <= (size_t{64} << 20); s *= 8) sizes.push_back(s);
    if (sizes.back() != (size_t{64} << 20)) sizes.push_back(size_t{64} << 20);
  }
  std::printf("%-10s %3s %8s %11s %10s %12s %12s %7s\n", "op", "P", "size", "median ms", "bus GB/s",
              "raw 1msg", "raw chunked", "ratio");
  int failures = 0;
  for (size_t bytes : sizes) {
    // The ratio is against the faster of the two raw figures.
    const double raw_one = bytes / RawPointToPoint(bytes, false) / 1e9;
    const double raw_chunked = bytes / RawPointToPoint(bytes, true) / 1e9;
    const double raw_gbs = std::max(raw_one, raw_chunked);
    for (const char* op : {"allreduce", "alltoall"}) {
      for (uint32_t p : {2u, 4u}) {
        const double t = RunGang(op, p, bytes);
        if (t <= 0) {
          std::printf("%-10s %3u %8s  FAILED\n", op, p, Size(bytes).c_str());
          ++failures;
          continue;
        }
        const double factor =
            std::string(op) == "allreduce" ? 2.0 * (p - 1) / p : static_cast<double>(p - 1) / p;
        const double bus = bytes * factor / t / 1e9;
        std::printf("%-10s %3u %8s %11.3f %10.3f %12.3f %12.3f %6.0f%%\n", op, p,
                    Size(bytes).c_str(), t * 1e3, bus, raw_one, raw_chunked, 100 * bus / raw_gbs);
        std::fflush(stdout);
      }
    }
  }
  return failures == 0 ? 0 : 1;
}
