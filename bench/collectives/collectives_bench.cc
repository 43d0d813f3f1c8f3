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
//   ... --as-task                members run the collective kernels as a
//                                lane runs a task (RunCollective: input
//                                buffer in, new output buffer out)
//   ... --default-malloc         (last) without hmpmd-worker's malloc settings
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <string>
#include <tuple>
#include <vector>

#include "member_processes.h"
#include "tune_allocator.h"

namespace hmpmd::worker {
namespace {

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
  bool as_task = false;
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
    if (flag == "--as-task") {
      o->as_task = true;
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
                 "[--members 2,4] [--ops allreduce,alltoall] [--as-task]\n");
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
          const GangTime c = RunGang(op, p, bytes, o.as_task);
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
  std::printf("medians of %d run(s); a ratio is the median of each run's ratio%s\n", o.runs,
              o.as_task ? "; members ran the kernels as tasks (RunCollective)" : "");
  return failures == 0 ? 0 : 1;
}
