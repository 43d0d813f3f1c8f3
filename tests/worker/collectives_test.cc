// Collectives on loopback processes: every member is its own process with
// its own data socket, as workers are; each checks what it got against a
// serial reference computed from every member's (deterministic) input.
#include <gtest/gtest.h>
#include <spdlog/logger.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <csignal>
#include <cstring>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "collective_kernels.h"
#include "communicator.h"
#include "data_server.h"

namespace hmpmd::worker {
namespace {

struct Case {
  std::string op;
  uint32_t members = 2;
  int64_t n = 256;    // float32 elements per member
  std::string sizes;  // alltoall: elements per destination
};

std::string Name(const Case& c) {
  std::string name =
      c.op + "_" + std::to_string(c.members) + "members_" + std::to_string(c.n * 4) + "bytes";
  if (!c.sizes.empty()) name += "_uneven";
  return name;
}

Args ArgsOf(const Case& c) {
  Args args = {{"n", c.n}, {"root", int64_t{c.members - 1}}};
  if (!c.sizes.empty()) args.push_back({"sizes", c.sizes});
  return args;
}

// What member `rank` must end with.
std::vector<float> Reference(const Case& c, uint32_t rank) {
  const Args args = ArgsOf(c);
  const KernelArgs ka(args);
  std::vector<std::vector<float>> in;
  for (uint32_t r = 0; r < c.members; ++r) in.push_back(CollectiveInput(ka, {}, r));
  const size_t n = in[0].size();
  const uint32_t p = c.members;
  std::vector<float> out;
  if (c.op == "allreduce" || c.op == "reduce_scatter") {
    std::vector<float> sum(n, 0.0f);
    for (const auto& v : in) {
      for (size_t i = 0; i < n; ++i) sum[i] += v[i];
    }
    if (c.op == "allreduce") return sum;
    return {sum.begin() + static_cast<ptrdiff_t>(n * rank / p),
            sum.begin() + static_cast<ptrdiff_t>(n * (rank + 1) / p)};
  }
  if (c.op == "allgather") {
    for (const auto& v : in) out.insert(out.end(), v.begin(), v.end());
    return out;
  }
  if (c.op == "broadcast") return in[p - 1];
  // alltoall: the same split on every member.
  std::vector<size_t> offsets = {0};
  if (c.sizes.empty()) {
    for (uint32_t d = 1; d <= p; ++d) offsets.push_back(n * d / p);
  } else {
    size_t off = 0;
    for (size_t pos = 0; pos < c.sizes.size();) {
      size_t comma = c.sizes.find(',', pos);
      if (comma == std::string::npos) comma = c.sizes.size();
      off += std::stoul(c.sizes.substr(pos, comma - pos));
      offsets.push_back(off);
      pos = comma + 1;
    }
  }
  for (uint32_t src = 0; src < p; ++src) {
    out.insert(out.end(), in[src].begin() + static_cast<ptrdiff_t>(offsets[rank]),
               in[src].begin() + static_cast<ptrdiff_t>(offsets[rank + 1]));
  }
  return out;
}

// The body of one member process; returns its exit code.
int Member(const Case& c, uint32_t rank, int to_parent, int from_parent) {
  spdlog::logger log("member");  // no sinks
  zmq::context_t ctx(1);
  ObjectStore store(0);
  CollectiveInbox inbox;
  DataServer server(&ctx, &store, &inbox, &log);
  if (!server.Bind("127.0.0.1").ok()) return 10;
  const std::string mine = server.endpoint() + "\n";
  if (::write(to_parent, mine.data(), mine.size()) != static_cast<ssize_t>(mine.size())) return 11;
  std::string all;
  char buf[4096];
  for (ssize_t got; (got = ::read(from_parent, buf, sizeof(buf))) > 0;) all.append(buf, got);
  GangView gang;
  gang.rank = rank;
  gang.tag = 0x5eed;
  for (size_t pos = 0; pos < all.size();) {
    size_t nl = all.find('\n', pos);
    gang.endpoints.push_back(all.substr(pos, nl - pos));
    pos = nl + 1;
  }
  if (gang.endpoints.size() != c.members) return 12;
  Communicator comm(&ctx, &inbox, gang, 30'000'000);
  const Args args = ArgsOf(c);
  BufferList out;
  try {
    out = RunCollective(c.op, KernelArgs(args), {}, comm);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "rank %u: %s\n", rank, e.what());
    return 13;
  }
  const std::vector<float> want = Reference(c, rank);
  if (out.size() != 1 || out[0].data.size() != want.size() * sizeof(float)) {
    std::fprintf(stderr, "rank %u: got %zu bytes, want %zu\n", rank,
                 out.empty() ? 0 : out[0].data.size(), want.size() * sizeof(float));
    return 14;
  }
  for (size_t i = 0; i < want.size(); ++i) {
    float v;
    std::memcpy(&v, out[0].data.data() + i * sizeof(float), sizeof(float));
    if (std::fabs(v - want[i]) > 1e-5f * std::max(1.0f, std::fabs(want[i]))) {
      std::fprintf(stderr, "rank %u: element %zu is %g, want %g\n", rank, i, v, want[i]);
      return 15;
    }
  }
  // Peers may still read from our socket (a chain, a ring): linger a bit.
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  server.Stop();
  return 0;
}

class CollectivesTest : public ::testing::TestWithParam<Case> {};

TEST_P(CollectivesTest, MatchesTheSerialReference) {
  const Case& c = GetParam();
  std::vector<pid_t> pids;
  std::vector<int> from_child, to_child;
  for (uint32_t rank = 0; rank < c.members; ++rank) {
    int up[2], down[2];
    ASSERT_EQ(::pipe(up), 0);
    ASSERT_EQ(::pipe(down), 0);
    const pid_t pid = ::fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      ::close(up[0]);
      ::close(down[1]);
      for (int fd : to_child) ::close(fd);
      ::_exit(Member(c, rank, up[1], down[0]));
    }
    ::close(up[1]);
    ::close(down[0]);
    pids.push_back(pid);
    from_child.push_back(up[0]);
    to_child.push_back(down[1]);
  }
  std::string endpoints;
  for (int fd : from_child) {
    std::string line;
    char ch;
    while (::read(fd, &ch, 1) == 1 && ch != '\n') line += ch;
    endpoints += line + "\n";
    ::close(fd);
  }
  for (int fd : to_child) {
    EXPECT_EQ(::write(fd, endpoints.data(), endpoints.size()),
              static_cast<ssize_t>(endpoints.size()));
    ::close(fd);
  }
  // Bounded wait; stragglers are killed by pid.
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(50);
  std::vector<int> codes(pids.size(), -1);
  size_t left = pids.size();
  while (left > 0 && std::chrono::steady_clock::now() < deadline) {
    for (size_t i = 0; i < pids.size(); ++i) {
      int status = 0;
      if (codes[i] == -1 && ::waitpid(pids[i], &status, WNOHANG) == pids[i]) {
        codes[i] = WIFEXITED(status) ? WEXITSTATUS(status) : 100;
        --left;
      }
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  for (size_t i = 0; i < pids.size(); ++i) {
    if (codes[i] == -1) {
      ::kill(pids[i], SIGKILL);
      ::waitpid(pids[i], nullptr, 0);
    }
    EXPECT_EQ(codes[i], 0) << "rank " << i << " (-1: timed out)";
  }
}

std::vector<Case> Cases() {
  std::vector<Case> cases;
  for (uint32_t p : {2u, 3u, 5u, 8u}) {
    for (int64_t n : {int64_t{256}, int64_t{262144}}) cases.push_back({"allreduce", p, n, ""});
    for (const char* op : {"reduce_scatter", "allgather", "alltoall", "broadcast"}) {
      cases.push_back({op, p, 256, ""});
    }
  }
  for (const char* op : {"reduce_scatter", "allgather", "alltoall", "broadcast"}) {
    cases.push_back({op, 3, 262144, ""});
  }
  cases.push_back({"allreduce", 3, 1000, ""});               // segments of unequal size
  cases.push_back({"alltoall", 4, 1000, "0,700,1,299"});     // MoE-like skew
  cases.push_back({"allreduce", 2, int64_t{16} << 20, ""});  // 64 MB
  return cases;
}

INSTANTIATE_TEST_SUITE_P(Loopback, CollectivesTest, ::testing::ValuesIn(Cases()),
                         [](const auto& p) { return Name(p.param); });

TEST(CommunicatorTest, AMissingMemberFailsWithUnavailable) {
  spdlog::logger log("t");
  zmq::context_t ctx(1);
  ObjectStore store(0);
  CollectiveInbox inbox;
  DataServer server(&ctx, &store, &inbox, &log);
  ASSERT_TRUE(server.Bind("127.0.0.1").ok());
  // Rank 1 never runs: rank 0's first receive times out.
  Communicator comm(&ctx, &inbox, GangView{0, {server.endpoint(), "tcp://127.0.0.1:1"}, 7},
                    200'000);
  std::vector<float> data(64, 1.0f);
  Status s = comm.AllReduce(data);
  EXPECT_EQ(s.code(), StatusCode::kUnavailable) << s.ToString();
  EXPECT_NE(s.message().find("rank 1"), std::string::npos) << s.message();
}

TEST(CommunicatorTest, AFailedZeroCopyCallEndsAndCanBeRepeated) {
  spdlog::logger log("t");
  zmq::context_t ctx(1);
  ObjectStore store(0);
  CollectiveInbox inbox;
  DataServer server(&ctx, &store, &inbox, &log);
  ASSERT_TRUE(server.Bind("127.0.0.1").ok());
  // 1 MiB chunks go zero-copy and stay queued for rank 1, which never
  // connects: the call fails, closes its sockets and waits (bounded by the
  // linger time) until ZeroMQ has dropped them; then the buffer may go.
  Communicator comm(&ctx, &inbox, GangView{0, {server.endpoint(), "tcp://127.0.0.1:1"}, 8},
                    200'000);
  auto data = std::make_unique<std::vector<float>>(size_t{1} << 20, 1.0f);
  ASSERT_GE(data->size() * sizeof(float) / 2, Communicator::kZeroCopyBytes);
  Status s = comm.AllReduce(*data);
  EXPECT_EQ(s.code(), StatusCode::kUnavailable) << s.ToString();
  data.reset();
  // Sockets are opened again on demand: a second call fails the same way.
  std::vector<float> again(size_t{1} << 18, 2.0f);
  EXPECT_EQ(comm.AllReduce(again).code(), StatusCode::kUnavailable);
}

}  // namespace
}  // namespace hmpmd::worker
