// bench_prefetch: what fetching queued tasks' inputs ahead buys. A
// producer process keeps `--tasks` outputs of `--mb` MiB each on its data
// socket; this process's lane (a DataPlane and one Lane, as in
// hmpmd-worker) gets that many tasks at once, each reading one of them and
// then busy for `--kernel-ms` (spinning on a host core, or with --sleep
// sleeping, as an accelerator kernel leaves the host free). Prefetch off
// (as hmpmd-worker --prefetch-mb 0: each input is fetched when its task
// starts) and on (the default 256 MiB) alternate; medians of --runs runs.
//
//   bench_prefetch [--runs N] [--tasks K] [--mb S] [--kernel-ms X] [--sleep]
//   bench_prefetch --fetch [--runs N]    one fetch at a time instead: of
//                  1, 8 and 64 MiB, over a new connection per fetch and
//                  over a kept one (PeerConnections, as hmpmd-worker
//                  fetches), beside raw ZeroMQ point to point (zero-copy,
//                  one message or 1 MiB messages, the faster) measured in
//                  the same run, and the load of a sub-model state of the
//                  same size over the kept connection (DataOp::kFetchState,
//                  as a worker loads a stage's weights)
#include <spdlog/logger.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "completion_queue.h"
#include "data_plane.h"
#include "data_server.h"
#include "hmpmd/protocol/tensor_bytes.h"
#include "lane.h"
#include "member_processes.h"
#include "peer_fetch.h"
#include "tune_allocator.h"
#include "wakeup_fd.h"

namespace hmpmd::worker {
namespace {

using Clock = std::chrono::steady_clock;

struct Options {
  int runs = 3;
  uint32_t tasks = 16;
  size_t mb = 8;
  int kernel_ms = 10;
  bool sleep = false;
  bool fetch = false;  // --fetch: single fetches of kFetchMiB
};

// --fetch: the sizes fetched, in MiB; the producer keeps them as runs
// kFetchRun + i.
constexpr size_t kFetchMiB[] = {1, 8, 64};
constexpr uint32_t kFetchRun = 1'000'000;
// The producer process and the fetchers share this fixed token: a
// benchmark's, not a secret.
constexpr DataToken kBenchToken{0x62656e6368, 2};

// --fetch: the sub-model whose state holds kFetchMiB[i] MiB.
std::string StateName(uint32_t i) { return "state" + std::to_string(kFetchMiB[i]); }

// The producer: keeps the outputs, prints its endpoint, serves until the
// parent closes the pipe.
int Producer(const Options& o, int to_parent, int from_parent) {
  spdlog::logger log("producer");
  ObjectStore store(0);
  ActorStates states;
  CollectiveInbox inbox;
  DataTokens tokens(kBenchToken);
  DataServer server(&store, &states, &inbox, &tokens, &log);
  if (!server.Bind("127.0.0.1").ok()) return 10;
  for (uint32_t i = 0; i < o.tasks; ++i) {
    Buffer b;
    b.data.assign(o.mb << 20, std::byte{1});
    b.shape = {static_cast<int64_t>(b.data.size() / 4)};
    // Read 0 times: kept, so every run fetches it again.
    if (!store.Put(1, i, {std::move(b)}, 0).ok()) return 11;
  }
  for (uint32_t i = 0; o.fetch && i < std::size(kFetchMiB); ++i) {
    Buffer b;
    b.data.assign(kFetchMiB[i] << 20, std::byte{2});
    b.shape = {static_cast<int64_t>(b.data.size() / 4)};
    states.For(1, StateName(i))->Put("w", b);
    if (!store.Put(1, kFetchRun + i, {std::move(b)}, 0).ok()) return 11;
  }
  const std::string line = server.endpoint() + "\n";
  if (::write(to_parent, line.data(), line.size()) < 0) return 12;
  char c;
  while (::read(from_parent, &c, 1) > 0) {
  }
  server.Stop();
  return 0;
}

// Seconds from pushing every task to the last result.
double RunOnce(const Options& o, const std::string& endpoint, uint64_t prefetch_bytes) {
  spdlog::logger log("bench");
  DataPlane plane(DataPlaneOptions{"127.0.0.1", 0, 60'000'000, prefetch_bytes}, &log);
  plane.SetDataToken(kBenchToken);
  if (!plane.Start().ok()) return -1;
  WakeupFd wake;
  CompletionQueue done(&wake);
  const int ms = o.kernel_ms;
  const bool sleep = o.sleep;
  const Kernel busy = [ms, sleep](const KernelArgs&, std::span<const Buffer> in) {
    if (in.empty() || in[0].data.empty()) throw std::runtime_error("no input");
    const auto until = Clock::now() + std::chrono::milliseconds(ms);
    if (sleep) std::this_thread::sleep_until(until);
    while (Clock::now() < until) {
    }
    return BufferList{};
  };
  Lane lane(CoreKind::kCube, 0, &done, &plane, &log);
  const auto start = Clock::now();
  for (uint32_t i = 0; i < o.tasks; ++i) {
    TaskAssign a;
    a.job = 1;
    a.task = 1000 + i;
    a.attempt = 1;
    a.kernel = "busy";
    a.reads = TaskAssign::kDropOutputs;
    a.inputs = {InputRef{i, endpoint, uint64_t{o.mb} << 20}};
    PrefetchedInputs ahead = plane.PrefetchInputs(a);
    lane.Push(LaneTask{std::move(a), &busy, std::move(ahead)});
  }
  std::vector<TaskResult> results;
  while (results.size() < o.tasks) {
    done.TakeAll(&results);
    std::this_thread::sleep_for(std::chrono::microseconds(200));
  }
  const double s = std::chrono::duration<double>(Clock::now() - start).count();
  for (const TaskResult& r : results) {
    if (!r.ok) {
      std::fprintf(stderr, "task %u failed: %s\n", r.task, r.error.c_str());
      return -1;
    }
  }
  return s;
}

// --fetch: per size, median ms of a fetch over a new connection and over
// a kept one (alternating), and raw p2p; prints the table. 0 or 1.
int FetchTable(const Options& o, const std::string& endpoint) {
  zmq::context_t ctx(1);
  DataTokens tokens(kBenchToken);
  PeerConnections kept(&ctx, &tokens);
  std::printf("one fetch from a producer process at a time, medians of %d\n", o.runs);
  std::printf("%-8s %12s %12s %10s %10s %8s %10s %9s\n", "size", "new conn ms", "kept conn ms",
              "kept GB/s", "p2p GB/s", "vs p2p", "load GB/s", "vs fetch");
  for (uint32_t i = 0; i < std::size(kFetchMiB); ++i) {
    const size_t bytes = kFetchMiB[i] << 20;
    std::vector<double> fresh, reuse, load;
    for (int r = -1; r < o.runs; ++r) {  // run -1 warms up (and opens the kept connection)
      for (int mode = 0; mode < 3; ++mode) {
        const auto start = Clock::now();
        Result<BufferList> got =
            mode == 0   ? FetchFromPeer(&ctx, endpoint, kBenchToken, 1, kFetchRun + i, 60'000'000)
            : mode == 1 ? kept.Fetch(endpoint, 1, kFetchRun + i, 60'000'000)
                        : kept.FetchState(endpoint, 1, StateName(i), 60'000'000);
        const double s = std::chrono::duration<double>(Clock::now() - start).count();
        // A state comes with its list of names first.
        if (got.ok() && mode == 2 && got->size() == 2) got->erase(got->begin());
        if (!got.ok() || got->size() != 1 || (*got)[0].data.size() != bytes) {
          std::fprintf(stderr, "fetch of %zu MiB failed: %s\n", kFetchMiB[i],
                       got.ok() ? "wrong size" : got.status().ToString().c_str());
          return 1;
        }
        // A lane hands a task's fetched inputs back to the tensor pool.
        RecycleTensorBytes(std::span<Buffer>(*got));
        if (r >= 0) (mode == 0 ? fresh : mode == 1 ? reuse : load).push_back(s);
      }
    }
    // As bench_collectives: the faster of one message and 1 MiB messages.
    const double p2p =
        std::max(bytes / RawPointToPoint(bytes, false), bytes / RawPointToPoint(bytes, true)) / 1e9;
    const double gbs = bytes / Median(reuse) / 1e9;
    const double load_gbs = bytes / Median(load) / 1e9;
    std::printf("%5zu MiB %12.2f %12.2f %10.2f %10.2f %7.0f%% %10.2f %8.0f%%\n", kFetchMiB[i],
                Median(fresh) * 1e3, Median(reuse) * 1e3, gbs, p2p, 100 * gbs / p2p, load_gbs,
                100 * load_gbs / gbs);
  }
  return 0;
}

}  // namespace
}  // namespace hmpmd::worker

int main(int argc, char** argv) {
  using namespace hmpmd::worker;
  TuneAllocatorForTensors();
  Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string flag = argv[i];
    if (flag == "--sleep") {
      o.sleep = true;
      continue;
    }
    if (flag == "--fetch") {
      o.fetch = true;
      continue;
    }
    if (i + 1 >= argc) {
      std::fprintf(stderr, "bench_prefetch: %s needs a value\n", flag.c_str());
      return 2;
    }
    const int v = std::atoi(argv[++i]);
    if (flag == "--runs") {
      o.runs = std::max(1, v);
    } else if (flag == "--tasks") {
      o.tasks = static_cast<uint32_t>(std::clamp(v, 1, 1000));
    } else if (flag == "--mb") {
      o.mb = static_cast<size_t>(std::clamp(v, 1, 256));
    } else if (flag == "--kernel-ms") {
      o.kernel_ms = std::clamp(v, 0, 10'000);
    } else {
      std::fprintf(stderr,
                   "usage: bench_prefetch [--runs N] [--tasks K] [--mb S] [--kernel-ms X] "
                   "[--sleep] [--fetch]\n");
      return 2;
    }
  }
  int up[2], down[2];
  if (::pipe(up) != 0 || ::pipe(down) != 0) return 1;
  const pid_t pid = ::fork();
  if (pid == 0) {
    ::close(up[0]);
    ::close(down[1]);
    ::_exit(Producer(o, up[1], down[0]));
  }
  ::close(up[1]);
  ::close(down[0]);
  std::string endpoint;
  char c;
  while (::read(up[0], &c, 1) == 1 && c != '\n') endpoint += c;
  int rc = endpoint.empty() ? 1 : 0;
  if (rc == 0 && o.fetch) {
    rc = FetchTable(o, endpoint);
    ::close(down[1]);
    ::close(up[0]);
    ::waitpid(pid, nullptr, 0);
    return rc;
  }
  std::vector<double> off, on;
  if (rc == 0) RunOnce(o, endpoint, 256ull << 20);  // warm-up
  for (int r = 0; r < o.runs && rc == 0; ++r) {
    off.push_back(RunOnce(o, endpoint, 0));
    on.push_back(RunOnce(o, endpoint, 256ull << 20));
    if (off.back() < 0 || on.back() < 0) rc = 1;
  }
  ::close(down[1]);
  ::close(up[0]);
  ::waitpid(pid, nullptr, 0);
  if (rc != 0) {
    std::fprintf(stderr, "bench_prefetch: a run failed\n");
    return rc;
  }
  const double kernels = o.tasks * o.kernel_ms / 1e3;
  std::printf("%u tasks, each reading %zu MiB from a producer process, then %s %d ms\n", o.tasks,
              o.mb, o.sleep ? "sleeping" : "spinning", o.kernel_ms);
  std::printf("%-13s %10s %12s\n", "prefetch", "median ms", "over kernels");
  std::printf("%-13s %10.1f %11.2fx\n", "off (0 MiB)", Median(off) * 1e3, Median(off) / kernels);
  std::printf("%-13s %10.1f %11.2fx\n", "on (256 MiB)", Median(on) * 1e3, Median(on) / kernels);
  std::printf("speed-up with prefetch: %.2fx (medians of %d runs each, alternating)\n",
              Median(off) / Median(on), o.runs);
  return 0;
}
