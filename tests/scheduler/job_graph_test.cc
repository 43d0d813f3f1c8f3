// Tests for JobGraph::Build: structural validation and dense indexing
// (scheduler/job_graph.{h,cc}).
#include "hmpmd/scheduler/job_graph.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <numeric>
#include <optional>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "test_builders.h"

namespace hmpmd {
namespace {

using test::SpecBuilder;
using test::TaskBuilder;

class JobGraphTest : public ::testing::Test {
 protected:
  // Build must fail with InvalidArgument and a message holding every needle.
  static std::string ExpectRejected(const JobSpec& spec,
                                    std::initializer_list<std::string> needles) {
    auto g = JobGraph::Build(spec);
    EXPECT_FALSE(g.ok()) << "Build accepted a spec it must reject";
    if (g.ok()) return "";
    EXPECT_EQ(g.status().code(), StatusCode::kInvalidArgument);
    const std::string& msg = g.status().message();
    for (const std::string& n : needles) {
      EXPECT_NE(msg.find(n), std::string::npos) << "message '" << msg << "' lacks '" << n << "'";
    }
    return msg;
  }

  // Splits "x -> y -> x" (the text after "cycle ") into ids.
  static std::vector<std::string> CyclePath(const std::string& msg) {
    std::vector<std::string> ids;
    size_t p = msg.find("cycle ");
    if (p == std::string::npos) return ids;
    std::string rest = msg.substr(p + 6);
    size_t start = 0;
    while (true) {
      size_t arrow = rest.find(" -> ", start);
      ids.push_back(rest.substr(start, arrow - start));
      if (arrow == std::string::npos) break;
      start = arrow + 4;
    }
    return ids;
  }

  // True when every "x -> y" step of `path` is an edge (y consumes x).
  static bool IsCycleOf(const JobSpec& spec, const std::vector<std::string>& path) {
    if (path.size() < 3 || path.front() != path.back()) return false;
    for (size_t k = 0; k + 1 < path.size(); ++k) {
      int consumer = test::IndexOf(spec, path[k + 1]);
      if (consumer < 0) return false;
      const auto& in = spec.tasks[consumer].inputs;
      if (std::find(in.begin(), in.end(), path[k]) == in.end()) return false;
    }
    return true;
  }
};

TEST_F(JobGraphTest, BuildsIndicesForAValidSpec) {
  JobSpec spec = SpecBuilder()
                     .Submodel("vision", SubmodelKind::kEncoder, 2)
                     .Add(TaskBuilder("v0").Submodel("vision").Us(10))
                     .Add(TaskBuilder("x0", "send").Vector().Inputs({"v0"}).Bytes(4096))
                     .Add(TaskBuilder("l0", "gemm").Inputs({"x0", "v0", "x0"}))
                     .Repeat(3);
  auto g = test::BuildGraph(spec);
  ASSERT_NE(g, nullptr);
  EXPECT_EQ(g->size(), 3u);
  EXPECT_EQ(g->steps(), 3u);
  EXPECT_EQ(g->total_runs(), 9u);
  EXPECT_EQ(g->roots(), std::vector<uint32_t>{0});
  EXPECT_EQ(g->task(1).inputs, std::vector<uint32_t>{0});
  EXPECT_EQ(g->task(2).inputs, (std::vector<uint32_t>{1, 0})) << "inputs deduplicated, in order";
  // The kernel still reads x0 twice, in the spec's order.
  auto kernel = g->kernel_inputs(2);
  EXPECT_EQ(std::vector<uint32_t>(kernel.begin(), kernel.end()), (std::vector<uint32_t>{1, 0, 1}));
  auto plain = g->kernel_inputs(1);
  EXPECT_EQ(std::vector<uint32_t>(plain.begin(), plain.end()), std::vector<uint32_t>{0});
  EXPECT_EQ(g->task(0).consumers, (std::vector<uint32_t>{1, 2}));
  EXPECT_EQ(g->task(1).consumers, std::vector<uint32_t>{2});
  EXPECT_TRUE(g->task(2).consumers.empty());
  EXPECT_FALSE(g->task(0).is_comm);
  EXPECT_TRUE(g->task(1).is_comm) << "send is communication";
  EXPECT_FALSE(g->task(2).is_comm);
  EXPECT_EQ(g->task(0).submodel, 0u);
  EXPECT_EQ(g->topo_order(), (std::vector<uint32_t>{0, 1, 2}));
  EXPECT_EQ(g->Describe(1), "tasks[1] 'x0'");
  EXPECT_EQ(g->spec_task(2).id, "l0");
}

TEST_F(JobGraphTest, EmptyTaskListIsRejected) {
  ExpectRejected(SpecBuilder().Build(), {"tasks", "no tasks"});
}

TEST_F(JobGraphTest, RepeatZeroIsRejected) {
  ExpectRejected(SpecBuilder().Chain({"a"}, 1).Repeat(0), {"repeat", "at least 1"});
}

TEST_F(JobGraphTest, DuplicateIdIsRejectedNamingBothTasks) {
  ExpectRejected(SpecBuilder().Chain({"a", "b"}, 1).Add(TaskBuilder("a")),
                 {"tasks[2] 'a'", "id", "duplicate of tasks[0]"});
}

TEST_F(JobGraphTest, EmptyIdOrKernelIsRejected) {
  ExpectRejected(SpecBuilder().Add(TaskBuilder("")), {"tasks[0] ''", "id: empty"});
  ExpectRejected(SpecBuilder().Chain({"a"}, 1).Add(TaskBuilder("b", "")),
                 {"tasks[1] 'b'", "kernel: empty"});
}

TEST_F(JobGraphTest, UnknownInputIsRejectedNamingTaskAndInput) {
  ExpectRejected(SpecBuilder().Chain({"a", "b"}, 1).Add(TaskBuilder("c").Inputs({"a", "zz"})),
                 {"tasks[2] 'c'", "inputs", "unknown task 'zz'"});
}

TEST_F(JobGraphTest, SelfInputIsRejected) {
  ExpectRejected(SpecBuilder().Chain({"a"}, 1).Add(TaskBuilder("b").Inputs({"a", "b"})),
                 {"tasks[1] 'b'", "inputs", "cannot consume itself"});
}

TEST_F(JobGraphTest, CycleIsRejectedWithItsPath) {
  JobSpec spec = SpecBuilder()
                     .Add(TaskBuilder("a").Inputs({"c"}))
                     .Add(TaskBuilder("b").Inputs({"a"}))
                     .Add(TaskBuilder("c").Inputs({"b"}));
  std::string msg = ExpectRejected(spec, {"tasks[0] 'a'", "inputs: cycle "});
  std::vector<std::string> path = CyclePath(msg);
  EXPECT_TRUE(IsCycleOf(spec, path)) << msg;
  EXPECT_EQ(path.size(), 4u) << msg;
  EXPECT_EQ(std::set<std::string>(path.begin(), path.end()),
            (std::set<std::string>{"a", "b", "c"}));
}

TEST_F(JobGraphTest, CyclePathLeavesOutTasksOnlyReachingTheCycle) {
  // d hangs off the cycle (consumes a), e feeds it; neither is on it. d comes
  // first, so the search for the cycle starts outside it.
  JobSpec spec = SpecBuilder()
                     .Add(TaskBuilder("d").Inputs({"a"}))
                     .Add(TaskBuilder("e"))
                     .Add(TaskBuilder("a").Inputs({"c", "e"}))
                     .Add(TaskBuilder("b").Inputs({"a"}))
                     .Add(TaskBuilder("c").Inputs({"b"}))
                     .Add(TaskBuilder("f").Inputs({"d"}));
  std::string msg = ExpectRejected(spec, {"inputs: cycle "});
  std::vector<std::string> path = CyclePath(msg);
  EXPECT_TRUE(IsCycleOf(spec, path)) << msg;
  for (const char* off : {"d", "e", "f"}) {
    EXPECT_EQ(std::count(path.begin(), path.end(), off), 0)
        << off << " is not on the cycle: " << msg;
  }
}

TEST_F(JobGraphTest, TwoTaskCycleIsRejected) {
  JobSpec spec =
      SpecBuilder().Add(TaskBuilder("p").Inputs({"q"})).Add(TaskBuilder("q").Inputs({"p"}));
  std::string msg = ExpectRejected(spec, {"cycle"});
  EXPECT_TRUE(IsCycleOf(spec, CyclePath(msg))) << msg;
}

TEST_F(JobGraphTest, UnknownSubmodelIsRejected) {
  ExpectRejected(SpecBuilder().Submodel("vision").Add(TaskBuilder("a").Submodel("audio")),
                 {"tasks[0] 'a'", "submodel", "unknown submodel 'audio'"});
}

TEST_F(JobGraphTest, DefaultSubmodelIsAddedImplicitlyOnce) {
  JobSpec spec = SpecBuilder()
                     .Submodel("vision")
                     .Add(TaskBuilder("a"))
                     .Add(TaskBuilder("b").Submodel("vision"))
                     .Add(TaskBuilder("c"));
  auto g = test::BuildGraph(spec);
  ASSERT_NE(g, nullptr);
  ASSERT_EQ(g->spec().submodels.size(), 2u);
  EXPECT_EQ(g->spec().submodels[1].name, "default");
  EXPECT_EQ(g->spec().submodels[1].kind, SubmodelKind::kGeneric);
  EXPECT_EQ(g->task(0).submodel, 1u);
  EXPECT_EQ(g->task(1).submodel, 0u);
  EXPECT_EQ(g->task(2).submodel, 1u);
}

TEST_F(JobGraphTest, DeclaredDefaultSubmodelIsReused) {
  auto g = test::BuildGraph(
      SpecBuilder().Submodel("default", SubmodelKind::kActor, 1).Add(TaskBuilder("a")));
  ASSERT_NE(g, nullptr);
  ASSERT_EQ(g->spec().submodels.size(), 1u);
  EXPECT_EQ(g->spec().submodels[0].kind, SubmodelKind::kActor);
  EXPECT_EQ(g->task(0).submodel, 0u);
}

TEST_F(JobGraphTest, EmptyOrDuplicateSubmodelNameIsRejected) {
  ExpectRejected(SpecBuilder().Submodel("").Chain({"a"}, 1), {"submodels[0].name", "empty"});
  ExpectRejected(SpecBuilder().Submodel("x").Submodel("y").Submodel("x").Chain({"a"}, 1),
                 {"submodels[2].name", "duplicate 'x'"});
}

TEST_F(JobGraphTest, CollectiveGroupsFormGangsInSpecOrder) {
  JobSpec spec =
      SpecBuilder()
          .Chain({"p0", "p1"}, 1)
          .Add(TaskBuilder("r0", "allreduce").Collective("g", "allreduce", 64).Inputs({"p0"}))
          .Add(TaskBuilder("r1", "allreduce").Collective("g", "allreduce", 64).Inputs({"p1"}))
          .Add(TaskBuilder("h0", "allgather").Collective("h", "allgather"));
  auto g = test::BuildGraph(spec);
  ASSERT_NE(g, nullptr);
  ASSERT_EQ(g->groups().size(), 2u);
  EXPECT_EQ(g->groups()[0].name, "g");
  EXPECT_EQ(g->groups()[0].op, "allreduce");
  EXPECT_EQ(g->groups()[0].members, (std::vector<uint32_t>{2, 3}));
  EXPECT_EQ(g->groups()[1].members, std::vector<uint32_t>{4});
  EXPECT_EQ(g->task(2).group, 0u);
  EXPECT_EQ(g->task(4).group, 1u);
  EXPECT_EQ(g->task(0).group, kNoGroup);
  EXPECT_TRUE(g->task(2).is_comm);
}

TEST_F(JobGraphTest, CollectiveMarksAnyKernelAsCommunication) {
  auto g = test::BuildGraph(
      SpecBuilder().Add(TaskBuilder("c", "custom_reduce").Collective("g", "allreduce")));
  ASSERT_NE(g, nullptr);
  EXPECT_TRUE(g->task(0).is_comm);
}

TEST_F(JobGraphTest, CollectiveWithEmptyGroupIsRejected) {
  ExpectRejected(SpecBuilder().Add(TaskBuilder("r", "allreduce").Collective("", "allreduce")),
                 {"tasks[0] 'r'", "collective.group", "empty"});
}

TEST_F(JobGraphTest, CollectiveWithUnknownOpIsRejected) {
  ExpectRejected(SpecBuilder().Add(TaskBuilder("r", "allreduce").Collective("g", "allsum")),
                 {"tasks[0] 'r'", "collective.op", "unknown op 'allsum'"});
}

TEST_F(JobGraphTest, CollectiveOpMismatchInGroupIsRejected) {
  ExpectRejected(
      SpecBuilder()
          .Add(TaskBuilder("r0", "allreduce").Collective("g", "allreduce"))
          .Add(TaskBuilder("r1", "allgather").Collective("g", "allgather")),
      {"tasks[1] 'r1'", "collective.op", "'allgather' differs from 'allreduce'", "group 'g'"});
}

TEST_F(JobGraphTest, DependencyInsideACollectiveGroupIsRejected) {
  ExpectRejected(
      SpecBuilder()
          .Add(TaskBuilder("r0", "allreduce").Collective("g", "allreduce"))
          .Add(TaskBuilder("r1", "allreduce").Collective("g", "allreduce").Inputs({"r0"})),
      {"tasks[1] 'r1'", "inputs", "depends on 'r0'", "collective group 'g'"});
}

TEST_F(JobGraphTest, MemberWaitingForItsGangThroughAnotherTaskIsRejected) {
  // r1 waits for r0 through x: the gang {r0, r1} could never start.
  std::string msg = ExpectRejected(
      SpecBuilder()
          .Add(TaskBuilder("r0", "allreduce").Collective("g", "allreduce"))
          .Add(TaskBuilder("x").Inputs({"r0"}))
          .Add(TaskBuilder("r1", "allreduce").Collective("g", "allreduce").Inputs({"x"})),
      {"tasks[2] 'r1'", "inputs", "r0 -> x -> r1 (gang 'g' with r0)"});
  EXPECT_EQ(msg.find('\n'), std::string::npos);
}

TEST_F(JobGraphTest, TwoGangsWaitingForEachOtherAreRejected) {
  // a -> b and d -> c, with gangs {a, c} and {b, d}: each waits for the other.
  ExpectRejected(SpecBuilder()
                     .Add(TaskBuilder("a", "allreduce").Collective("g1", "allreduce"))
                     .Add(TaskBuilder("c", "allreduce").Collective("g1", "allreduce").Inputs({"d"}))
                     .Add(TaskBuilder("b", "allgather").Collective("g2", "allgather").Inputs({"a"}))
                     .Add(TaskBuilder("d", "allgather").Collective("g2", "allgather")),
                 {"inputs: collective gangs wait for each other",
                  "a -> b (gang 'g2' with d) -> c (gang 'g1' with a)"});
  // The same gangs in a consistent order are fine: a -> b and c -> d.
  EXPECT_NE(
      test::BuildGraph(
          SpecBuilder()
              .Add(TaskBuilder("a", "allreduce").Collective("g1", "allreduce"))
              .Add(TaskBuilder("c", "allreduce").Collective("g1", "allreduce"))
              .Add(TaskBuilder("b", "allgather").Collective("g2", "allgather").Inputs({"a"}))
              .Add(TaskBuilder("d", "allgather").Collective("g2", "allgather").Inputs({"c"}))),
      nullptr);
}

TEST_F(JobGraphTest, BuiltinCollectiveKernelNeedsAGroupOfItsOwnOp) {
  ExpectRejected(SpecBuilder().Add(TaskBuilder("r", "allreduce").Arg("n", int64_t{16})),
                 {"tasks[0] 'r'", "collective: required", "'allreduce'"});
  ExpectRejected(SpecBuilder()
                     .Add(TaskBuilder("r0", "allreduce").Collective("g", "allgather"))
                     .Add(TaskBuilder("r1", "allreduce").Collective("g", "allgather")),
                 {"tasks[0] 'r0'",
                  "collective.op: 'allgather' differs from the task's kernel "
                  "'allreduce'"});
}

TEST_F(JobGraphTest, BroadcastRootAndAlltoallSizesMustFitTheGroup) {
  auto pair = [](std::string kernel, std::string arg, ArgValue v) {
    return SpecBuilder()
        .Add(TaskBuilder("m0", kernel).Arg("n", int64_t{4}).Arg(arg, v).Collective("g", kernel))
        .Add(TaskBuilder("m1", kernel).Arg("n", int64_t{4}).Arg(arg, v).Collective("g", kernel));
  };
  ExpectRejected(pair("broadcast", "root", int64_t{2}),
                 {"tasks[0] 'm0'", "args.root: 2 is not a rank of group 'g' (2 members"});
  EXPECT_NE(test::BuildGraph(pair("broadcast", "root", int64_t{1})), nullptr);
  // Members that disagree on the root each kept their own data, and the job
  // succeeded; a root left out is rank 0.
  auto roots = [](int64_t r0, std::optional<int64_t> r1) {
    TaskBuilder m1("m1", "broadcast");
    m1.Arg("n", int64_t{4}).Collective("g", "broadcast");
    if (r1) m1.Arg("root", *r1);
    return SpecBuilder()
        .Add(TaskBuilder("m0", "broadcast")
                 .Arg("n", int64_t{4})
                 .Arg("root", r0)
                 .Collective("g", "broadcast"))
        .Add(m1);
  };
  ExpectRejected(roots(0, 1),
                 {"tasks[1] 'm1'", "args.root: 1 differs from 0 of 'm0' in group 'g'"});
  ExpectRejected(roots(1, std::nullopt), {"tasks[1] 'm1'", "args.root: 0 differs from 1 of 'm0'"});
  EXPECT_NE(test::BuildGraph(roots(0, std::nullopt)), nullptr);
  ExpectRejected(pair("alltoall", "sizes", std::string("1,x")),
                 {"tasks[0] 'm0'", "args.sizes: '1,x' is not a list of element counts"});
  ExpectRejected(pair("alltoall", "sizes", std::string("1,3,")),
                 {"tasks[0] 'm0'", "args.sizes: '1,3,' is not a list of element counts"});
  // Counts whose sum wraps around 2^64 to the member's 4 elements.
  ExpectRejected(pair("alltoall", "sizes", std::string("18446744073709551614,6")),
                 {"args.sizes: '18446744073709551614,6' is not a list of element counts like "
                  "'4,4,8', each at most 268435456"});
  ExpectRejected(pair("alltoall", "sizes", std::string("268435457,0")), {"each at most 268435456"});
  ExpectRejected(pair("alltoall", "sizes", std::string("1,1,2")),
                 {"args.sizes: 3 counts, but group 'g' has 2 members"});
  ExpectRejected(pair("alltoall", "sizes", std::string("1,1")),
                 {"args.sizes: counts sum to 2, the member sends 4 elements"});
  EXPECT_NE(test::BuildGraph(pair("alltoall", "sizes", std::string("1,3"))), nullptr);
}

TEST_F(JobGraphTest, GangMembersMustMoveTheSamePayload) {
  // 16 elements against 100 bytes = 25 elements: the ring would fail mid-run.
  ExpectRejected(
      SpecBuilder()
          .Add(TaskBuilder("r0", "allreduce").Arg("n", int64_t{16}).Collective("g", "allreduce"))
          .Add(TaskBuilder("r1", "allreduce")
                   .Arg("bytes", int64_t{100})
                   .Collective("g", "allreduce")),
      {"tasks[1] 'r1'", "args: 25 elements, but 'r0' of group 'g' has 16"});
  EXPECT_NE(
      test::BuildGraph(
          SpecBuilder()
              .Add(
                  TaskBuilder("r0", "allreduce").Arg("n", int64_t{16}).Collective("g", "allreduce"))
              .Add(TaskBuilder("r1", "allreduce")
                       .Arg("bytes", int64_t{64})
                       .Collective("g", "allreduce"))),
      nullptr);
  // The simulator times a gang by its members' collective.bytes: one figure.
  ExpectRejected(SpecBuilder()
                     .Add(TaskBuilder("r0", "allreduce").Collective("g", "allreduce", 1024))
                     .Add(TaskBuilder("r1", "allreduce").Collective("g", "allreduce", 99)),
                 {"tasks[1] 'r1'", "collective.bytes: 99 differs from 1024 of 'r0'"});
}

TEST_F(JobGraphTest, AMemberWithInputsMovesTheirDataAndMustMatchTheOthers) {
  // A member with inputs that hold data sends that data, not its `n` (as a
  // worker does): a 4x4 gemm's 16 floats against 8 generated failed
  // mid-run ("rank 0 sent 32 bytes where 16 were left") and was accepted.
  auto gemm = [] { return TaskBuilder("mm", "gemm").Arg("m", int64_t{4}).Arg("n", int64_t{4}); };
  auto member = [](std::string id, int64_t n) {
    return TaskBuilder(std::move(id), "allreduce").Arg("n", n).Collective("g", "allreduce");
  };
  ExpectRejected(SpecBuilder()
                     .Add(gemm().Arg("k", int64_t{4}))
                     .Add(member("a", 16).Inputs({"mm"}))
                     .Add(member("b", 8)),
                 {"tasks[2] 'b': args: 8 elements, but 'a' of group 'g' has 16 (the data of "
                  "its inputs)"});
  EXPECT_NE(test::BuildGraph(SpecBuilder()
                                 .Add(gemm().Arg("k", int64_t{4}))
                                 .Add(member("a", 8).Inputs({"mm"}))
                                 .Add(member("b", 16))),
            nullptr);
  // Ordering-only inputs (spin, noop, sleep hold no data) keep `n`.
  EXPECT_NE(test::BuildGraph(SpecBuilder()
                                 .Add(TaskBuilder("s").Us(5))
                                 .Add(member("a", 8).Inputs({"s"}))
                                 .Add(member("b", 8))),
            nullptr);
  // Sizes follow sends and earlier gangs: a reduce_scatter of 8 over 2
  // gives each rank 4 elements; a send of 64 bytes hands on 16.
  ExpectRejected(
      SpecBuilder()
          .Add(TaskBuilder("r0", "reduce_scatter")
                   .Arg("n", int64_t{8})
                   .Collective("rs", "reduce_scatter"))
          .Add(TaskBuilder("r1", "reduce_scatter")
                   .Arg("n", int64_t{8})
                   .Collective("rs", "reduce_scatter"))
          .Add(TaskBuilder("x", "send").Arg("bytes", int64_t{64}))
          .Add(TaskBuilder("y", "send").Inputs({"x"}))
          .Add(member("a", 1).Inputs({"r0"}))
          .Add(member("b", 1).Inputs({"y"})),
      {"tasks[5] 'b': inputs: 16 elements (the data of its inputs), but 'a' of group 'g' has 4"});
  // An alltoall's counts must sum to what the member really sends.
  ExpectRejected(SpecBuilder()
                     .Add(gemm().Arg("k", int64_t{1}))
                     .Add(TaskBuilder("a", "alltoall")
                              .Arg("sizes", std::string("1,1"))
                              .Inputs({"mm"})
                              .Collective("t", "alltoall"))
                     .Add(TaskBuilder("b", "alltoall")
                              .Arg("n", int64_t{2})
                              .Arg("sizes", std::string("1,1"))
                              .Collective("t", "alltoall")),
                 {"tasks[1] 'a': args.sizes: counts sum to 2, the member sends 16 elements (the "
                  "data of its inputs)"});
  // A worker's own kernel or a gemm sized by flops alone: known only live.
  EXPECT_NE(test::BuildGraph(SpecBuilder()
                                 .Add(TaskBuilder("k", "my_kernel"))
                                 .Add(TaskBuilder("f", "gemm").Flops(1e6))
                                 .Add(member("a", 8).Inputs({"k"}))
                                 .Add(member("b", 16).Inputs({"f"}))),
            nullptr);
}

TEST_F(JobGraphTest, BuildAndAppendRefuseAFaultWithOneMessage) {
  // The same tasks as a whole job and as a driver session's first append
  // (whose graph declares "default" already).
  auto both = [](const JobSpec& spec) {
    auto built = JobGraph::Build(spec);
    auto open = JobGraph::BuildOpen(JobSpec{});
    EXPECT_TRUE(open.ok());
    std::vector<TaskSpec> tasks = spec.tasks;
    Status appended = (*open)->Append({}, std::move(tasks));
    EXPECT_FALSE(built.ok());
    EXPECT_FALSE(appended.ok());
    EXPECT_EQ(built.ok() ? "" : built.status().message(), appended.message());
    return appended.message();
  };
  EXPECT_EQ(both(SpecBuilder().Add(TaskBuilder("a").Submodel("ghost"))),
            "tasks[0] 'a': submodel: unknown submodel 'ghost' (declare it under submodels)");
  EXPECT_EQ(both(SpecBuilder().Add(TaskBuilder("r", "allreduce").Collective("g", "allsum"))),
            "tasks[0] 'r': collective.op: unknown op 'allsum' (allreduce, allgather, "
            "reduce_scatter, alltoall, broadcast)");
  EXPECT_EQ(both(SpecBuilder().Add(TaskBuilder("a")).Add(TaskBuilder("a"))),
            "tasks[1] 'a': id: duplicate of tasks[0]");
  EXPECT_EQ(
      both(SpecBuilder()
               .Add(TaskBuilder("r0", "allreduce").Collective("g", "allreduce"))
               .Add(TaskBuilder("r1", "allreduce").Collective("g", "allreduce").Inputs({"r0"}))),
      "tasks[1] 'r1': inputs: depends on 'r0' of its own collective group 'g'");
  EXPECT_EQ(both(SpecBuilder().Add(TaskBuilder("a\nb"))),
            "tasks[0]: id: contains the control character U+000A");
}

TEST_F(JobGraphTest, TopoOrderRespectsEdgesOnRandomDags) {
  constexpr uint64_t kSeed = 20240611;
  test::LogSeed("random_dags", kSeed);
  std::mt19937_64 rng(kSeed);
  for (int trial = 0; trial < 200; ++trial) {
    // Edges go from lower to higher rank; the spec lists tasks shuffled so
    // inputs often refer to tasks further down the list.
    const int n = 1 + static_cast<int>(rng() % 40);
    std::vector<int> order(n);
    std::iota(order.begin(), order.end(), 0);
    std::shuffle(order.begin(), order.end(), rng);
    JobSpec spec;
    spec.tasks.resize(n);
    std::vector<std::vector<int>> inputs_of(n);
    for (int r = 0; r < n; ++r) {
      TaskSpec& t = spec.tasks[order[r]];
      t.id = "t" + std::to_string(r);
      t.kernel = "spin";
      for (int p = 0; p < r; ++p) {
        if (rng() % 4 == 0) {
          t.inputs.push_back("t" + std::to_string(p));
          inputs_of[order[r]].push_back(order[p]);
        }
      }
    }
    auto g = JobGraph::Build(spec);
    ASSERT_TRUE(g.ok()) << "trial " << trial << ": " << g.status().ToString();
    const auto& topo = (*g)->topo_order();
    ASSERT_EQ(topo.size(), static_cast<size_t>(n));
    std::vector<int> pos(n, -1);
    for (size_t k = 0; k < topo.size(); ++k) {
      ASSERT_LT(topo[k], static_cast<uint32_t>(n));
      ASSERT_EQ(pos[topo[k]], -1) << "task listed twice";
      pos[topo[k]] = static_cast<int>(k);
    }
    std::set<uint32_t> roots((*g)->roots().begin(), (*g)->roots().end());
    for (int i = 0; i < n; ++i) {
      EXPECT_EQ(roots.count(i) == 1, inputs_of[i].empty()) << "trial " << trial << " task " << i;
      for (int p : inputs_of[i]) {
        EXPECT_LT(pos[p], pos[i]) << "trial " << trial << ": producer after consumer";
        const auto& cons = (*g)->task(p).consumers;
        EXPECT_NE(std::find(cons.begin(), cons.end(), static_cast<uint32_t>(i)), cons.end());
      }
    }
    if (HasFailure()) return;
  }
}

TEST_F(JobGraphTest, RandomDagWithOneBackEdgeIsRejectedAsCycle) {
  constexpr uint64_t kSeed = 777;
  test::LogSeed("random_cycles", kSeed);
  std::mt19937_64 rng(kSeed);
  for (int trial = 0; trial < 100; ++trial) {
    const int n = 3 + static_cast<int>(rng() % 20);
    JobSpec spec;
    spec.tasks.resize(n);
    for (int i = 0; i < n; ++i) {
      spec.tasks[i].id = "t" + std::to_string(i);
      spec.tasks[i].kernel = "spin";
      if (i > 0) spec.tasks[i].inputs.push_back("t" + std::to_string(i - 1));  // a chain
    }
    // Close a cycle from a later task back to an earlier one.
    int lo = static_cast<int>(rng() % (n - 1));
    int hi = lo + 1 + static_cast<int>(rng() % (n - 1 - lo));
    spec.tasks[lo].inputs.push_back("t" + std::to_string(hi));
    std::string msg = ExpectRejected(spec, {"inputs: cycle "});
    std::vector<std::string> path = CyclePath(msg);
    EXPECT_TRUE(IsCycleOf(spec, path)) << "trial " << trial << ": " << msg;
    EXPECT_EQ(path.size(), static_cast<size_t>(hi - lo + 2)) << "trial " << trial << ": " << msg;
    if (HasFailure()) return;
  }
}

}  // namespace
}  // namespace hmpmd
