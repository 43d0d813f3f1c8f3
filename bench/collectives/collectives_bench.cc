// bench_collectives: bus bandwidth of all-reduce and all-to-all among 2 and
// 4 loopback worker processes (the worker's data sockets and Communicator),
// side by side with raw ZeroMQ bandwidth measured in the same run:
//
//   raw p2p   one DEALER -> ROUTER pair, acknowledged, zero-copy sends, as
//             one message and in 1 MiB messages; the faster of the two.
//   raw ring  the same P processes, each sending the collective's per-rank
//             volume to its ring neighbour at once (zero-copy 1 MiB
//             messages): what plain ZeroMQ moves when P senders share the
//             host's cores, as a collective's members do.
//
// Bus bandwidth follows the NCCL convention: all-reduce moves
// 2(P-1)/P * S per rank, all-to-all (P-1)/P * S, for S bytes per rank; the
// raw ring moves that same volume. Each figure is rank 0's median over
// several repetitions, each started after the members line up (a one-float
// all-reduce; a token round for the raw ring). With --runs N the whole
// sweep runs N times and every column is the median of the N runs.
//
//   bench_collectives [--runs N] [--sizes 1K,64M] [--members 2,4]
//                     [--ops allreduce,alltoall]
//   bench_collectives --smoke    1 KB and 1 MB only, one run (CI)
//   ... --default-malloc         (last) without hmpmd-worker's malloc settings
#include <spdlog/logger.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <string>
#include <tuple>
#include <vector>

#include "collective_kernels.h"
#include "communicator.h"
#include "data_server.h"
#include "tune_allocator.h"

namespace hmpmd::worker {
namespace {

using Clock = std::chrono::steady_clock;

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? -1 : v[v.size() / 2];
}

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
int Member(const std::string& op, uint32_t rank, uint32_t p, size_t bytes, int to_parent,
           int from_parent) {
  if (op == "ring") return RingMember(rank, p, bytes, to_parent, from_parent);
  spdlog::logger log("bench");
  zmq::context_t ctx(1);
  ObjectStore store(0);
  CollectiveInbox inbox;
  DataServer server(&ctx, &store, &inbox, &log);
  if (!server.Bind("127.0.0.1").ok()) return 10;
  GangView gang{rank, SwapEndpoints(server.endpoint(), to_parent, from_parent), 1};
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
  double cpu = 0;
  for (int rep = -1; rep < Reps(bytes); ++rep) {
    // A one-float all-reduce lines the members up, so a rep does not time
    // a straggler still finishing the previous one.
    if (!comm.AllReduce(token).ok()) return 14;
    const auto start = Clock::now();
    const double cpu_start = CpuSeconds();
    Status s = op == "allreduce" ? comm.AllReduce(data) : comm.AllToAll(blocks, &out, &sizes);
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

struct GangTime {
  double wall = -1;  // rank 0's median seconds; <0: a member failed
  double cpu = 0;    // CPU seconds per repetition, all members together
};

// Forks `p` members and collects their reports.
GangTime RunGang(const std::string& op, uint32_t p, size_t bytes) {
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

// Raw ZeroMQ: `bytes` from one process to another over DEALER -> ROUTER,
// acknowledged, as one message or (chunked) in messages of at most
// Communicator::kChunkBytes, which pipelines the two ends. Sends are
// zero-copy, so this is ZeroMQ and the kernel's loopback alone.
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

// Bytes each rank moves per byte of its buffer (NCCL bus bandwidth).
double Factor(const std::string& op, uint32_t p) {
  return op == "allreduce" ? 2.0 * (p - 1) / p : (p - 1.0) / p;
}

std::string Size(size_t b) {
  if (b >= (1u << 20)) return std::to_string(b >> 20) + " MB";
  return std::to_string(b >> 10) + " KB";
}

// "1K,64M" -> bytes; 0 entries on a bad token.
std::vector<size_t> ParseList(const char* text) {
  std::vector<size_t> out;
  for (const char* c = text; *c != '\0';) {
    char* end = nullptr;
    size_t v = std::strtoull(c, &end, 10);
    if (end == c) return {};
    if (*end == 'K' || *end == 'k') v <<= 10, ++end;
    if (*end == 'M' || *end == 'm') v <<= 20, ++end;
    out.push_back(v);
    c = *end == ',' ? end + 1 : end;
    if (*end != ',' && *end != '\0') return {};
  }
  return out;
}

struct Options {
  int runs = 1;
  std::vector<size_t> sizes;
  std::vector<uint32_t> members = {2, 4};
  std::vector<std::string> ops = {"allreduce", "alltoall"};
};

bool ParseOptions(int argc, char** argv, Options* o) {
  for (size_t s = 1 << 10; s <= (size_t{64} << 20); s *= 8) o->sizes.push_back(s);
  o->sizes.push_back(size_t{64} << 20);
  for (int i = 1; i < argc; ++i) {
    const std::string flag = argv[i];
    if (flag == "--smoke") {
      o->sizes = {1 << 10, 1 << 20};
      continue;
    }
    if (i + 1 >= argc) return false;
    const char* value = argv[++i];
    if (flag == "--runs") {
      o->runs = std::max(1, std::atoi(value));
    } else if (flag == "--sizes") {
      o->sizes = ParseList(value);
      if (o->sizes.empty()) return false;
    } else if (flag == "--members") {
      o->members.clear();
      for (size_t m : ParseList(value)) {
        if (m < 2 || m > 16) return false;
        o->members.push_back(static_cast<uint32_t>(m));
      }
      if (o->members.empty()) return false;
    } else if (flag == "--ops") {
      o->ops.clear();
      for (std::string rest = value; !rest.empty();) {
        const size_t comma = rest.find(',');
        o->ops.push_back(rest.substr(0, comma));
        rest = comma == std::string::npos ? "" : rest.substr(comma + 1);
        if (o->ops.back() != "allreduce" && o->ops.back() != "alltoall") return false;
      }
    } else {
      return false;
    }
  }
  return true;
}

}  // namespace
}  // namespace hmpmd::worker

int main(int argc, char** argv) {
  using namespace hmpmd::worker;
  // Every process of the bench (forked from here) runs with hmpmd-worker's
  // allocator settings, the raw baselines included; --default-malloc: not.
  if (!(argc > 1 && std::strcmp(argv[argc - 1], "--default-malloc") == 0)) {
    TuneAllocatorForTensors();
  } else {
    --argc;
  }
  Options o;
  if (!ParseOptions(argc, argv, &o)) {
    std::fprintf(stderr,
                 "usage: bench_collectives [--smoke] [--runs N] [--sizes 1K,64M] "
                 "[--members 2,4] [--ops allreduce,alltoall]\n");
    return 2;
  }
  // Per (op, P, size), one entry per run: the collective's and the raw
  // ring's times, and the raw p2p GB/s.
  using Key = std::tuple<std::string, uint32_t, size_t>;
  std::map<Key, std::vector<GangTime>> coll, ring;
  std::map<Key, std::vector<double>> p2p;
  int failures = 0;
  for (int run = 0; run < o.runs; ++run) {
    for (size_t bytes : o.sizes) {
      // The p2p figure is the faster of one message and 1 MiB messages.
      const double raw =
          std::max(bytes / RawPointToPoint(bytes, false), bytes / RawPointToPoint(bytes, true)) /
          1e9;
      for (const std::string& op : o.ops) {
        for (uint32_t p : o.members) {
          const size_t volume = static_cast<size_t>(bytes * Factor(op, p)) / 4 * 4;
          const GangTime r = RunGang("ring", p, std::max<size_t>(volume, 4));
          const GangTime c = RunGang(op, p, bytes);
          if (c.wall <= 0 || r.wall <= 0) {
            std::fprintf(stderr, "%s P=%u %s: a member failed\n", op.c_str(), p,
                         Size(bytes).c_str());
            ++failures;
            continue;
          }
          coll[{op, p, bytes}].push_back(c);
          ring[{op, p, bytes}].push_back(r);
          p2p[{op, p, bytes}].push_back(raw);
        }
      }
    }
  }
  // "cpu ms": CPU time of all members (all their threads) per collective;
  // "cpu x": that over the raw ring's for the same bytes (1.0: no CPU
  // beyond plain ZeroMQ's). CPU time, unlike wall time, hardly depends on
  // what else runs on the host.
  std::printf("%-10s %2s %6s %10s %9s %9s %9s %7s %7s %7s %6s\n", "op", "P", "size", "median ms",
              "bus GB/s", "p2p GB/s", "ring GB/s", "vs p2p", "vs ring", "cpu ms", "cpu x");
  for (size_t bytes : o.sizes) {
    for (const std::string& op : o.ops) {
      for (uint32_t p : o.members) {
        const Key k{op, p, bytes};
        if (coll[k].empty()) continue;
        const double volume = bytes * Factor(op, p);
        std::vector<double> ms, bus, ring_gbs, vs_p2p, vs_ring, cpu_ms, cpu_x;
        for (size_t r = 0; r < coll[k].size(); ++r) {
          ms.push_back(coll[k][r].wall * 1e3);
          bus.push_back(volume / coll[k][r].wall / 1e9);
          ring_gbs.push_back(volume / ring[k][r].wall / 1e9);
          vs_p2p.push_back(bus.back() / p2p[k][r]);
          vs_ring.push_back(ring[k][r].wall / coll[k][r].wall);
          cpu_ms.push_back(coll[k][r].cpu * 1e3);
          cpu_x.push_back(coll[k][r].cpu / ring[k][r].cpu);
        }
        std::printf("%-10s %2u %6s %10.3f %9.3f %9.3f %9.3f %6.0f%% %6.0f%% %7.1f %6.2f\n",
                    op.c_str(), p, Size(bytes).c_str(), Median(ms), Median(bus), Median(p2p[k]),
                    Median(ring_gbs), 100 * Median(vs_p2p), 100 * Median(vs_ring), Median(cpu_ms),
                    Median(cpu_x));
      }
    }
  }
  std::printf("medians of %d run(s); a ratio is the median of each run's ratio\n", o.runs);
  return failures == 0 ? 0 : 1;
}
