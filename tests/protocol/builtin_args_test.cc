#include "hmpmd/protocol/builtin_args.h"

#include <gtest/gtest.h>

#include <limits>
#include <optional>

namespace hmpmd {
namespace {

std::string Check(std::string_view kernel, Args args) {
  Status s = CheckBuiltinArgs(kernel, args);
  return s.ok() ? "ok" : s.message();
}

TEST(BuiltinArgsTest, AcceptsWhatTheKernelsTake) {
  EXPECT_EQ(Check("noop", {}), "ok");
  EXPECT_EQ(Check("spin", {{"us", int64_t{250}}}), "ok");
  EXPECT_EQ(Check("sleep", {{"us", 2.5}}), "ok");
  EXPECT_EQ(Check("gemm", {{"m", int64_t{4}}, {"n", 8.0}, {"k", int64_t{2}}}), "ok");
  EXPECT_EQ(Check("scale", {{"factor", -0.5}, {"n", int64_t{16}}}), "ok");
  EXPECT_EQ(Check("send", {{"bytes", int64_t{0}}}), "ok");
  EXPECT_EQ(Check("alltoall", {{"n", int64_t{6}}, {"sizes", std::string("1,2,3")}}), "ok");
  EXPECT_EQ(Check("broadcast", {{"root", int64_t{1}}, {"bytes", int64_t{64}}}), "ok");
  // The spmd-1f1b policy's placement hints go on any kernel.
  EXPECT_EQ(Check("gemm", {{"m", int64_t{4}},
                           {"n", int64_t{4}},
                           {"k", int64_t{4}},
                           {"shard", int64_t{3}},
                           {"mb", int64_t{0}},
                           {"pass", std::string("b")},
                           {"order", int64_t{7}}}),
            "ok");
  EXPECT_EQ(Check("noop", {{"shard", std::string("a")}}),
            "args.shard: expected an integer, got a string");
  // The policies read "f", "b" and "w" only: anything else was silently no pass.
  for (const char* pass : {"bwd", "F", "W", ""}) {
    EXPECT_EQ(Check("spin", {{"pass", std::string(pass)}}),
              "args.pass: must be \"f\" or \"b\" or \"w\"")
        << pass;
  }
  for (const char* pass : {"f", "b", "w"}) {
    EXPECT_EQ(Check("spin", {{"pass", std::string(pass)}}), "ok") << pass;
  }
  // A gemm's weights kept in its sub-model's state, or not at all.
  EXPECT_EQ(Check("gemm", {{"weights", std::string("state")}}), "ok");
  EXPECT_EQ(Check("gemm", {{"weights", std::string("input")}}), "args.weights: must be \"state\"");
}

TEST(BuiltinArgsTest, KnowsEveryBuiltinKernel) {
  for (std::string_view kernel : kBuiltinKernels) {
    EXPECT_NE(Check(kernel, {{"no_such_arg", int64_t{1}}}).find("takes no such argument"),
              std::string::npos)
        << kernel;
  }
}

TEST(BuiltinArgsTest, LeavesAWorkersOwnKernelsAlone) {
  EXPECT_EQ(Check("rollout", {{"us", std::string("anything")}, {"x", true}}), "ok");
}

TEST(BuiltinArgsTest, NamesTheArgumentAndWhatIsWrong) {
  EXPECT_EQ(Check("spin", {{"us", std::string("10")}}), "args.us: expected a number, got a string");
  EXPECT_EQ(Check("spin", {{"us", -1.0}}), "args.us: must be a number in [0, 86400000000]");
  EXPECT_EQ(Check("gemm", {{"m", 2.5}, {"n", int64_t{1}}, {"k", int64_t{1}}}),
            "args.m: must be an integer in [1, 268435456]");
  EXPECT_EQ(Check("scale", {{"factr", 2.0}}),
            "args.factr: 'scale' takes no such argument (n, factor)");
  EXPECT_EQ(Check("noop", {{"us", int64_t{1}}}),
            "args.us: 'noop' takes no such argument (it takes none)");
  EXPECT_EQ(Check("send", {{"bytes", true}}), "args.bytes: expected an integer, got a bool");
  EXPECT_EQ(Check("send", {{"bytes", int64_t{1} << 31}}),
            "args.bytes: must be an integer in [0, 1073741824]");
  EXPECT_EQ(Check("alltoall", {{"sizes", int64_t{3}}}),
            "args.sizes: expected a string, got an integer");
  EXPECT_EQ(Check("scale", {{"factor", std::numeric_limits<double>::infinity()}}),
            "args.factor: must be a number in [-3.40282347e+38, 3.40282347e+38]");
  // Finite as a double, inf as the kernel's float32.
  EXPECT_EQ(Check("scale", {{"factor", 1e39}}),
            "args.factor: must be a number in [-3.40282347e+38, 3.40282347e+38]");
  EXPECT_EQ(Check("scale", {{"factor", -3e38}}), "ok");
}

TEST(BuiltinArgsTest, AWorkersGemmNeedsAllThreeSizes) {
  // A simulation may time a gemm by cost.flops; a worker cannot run one.
  EXPECT_TRUE(
      CheckWorkerArgs("gemm", {{"m", int64_t{2}}, {"n", int64_t{2}}, {"k", int64_t{2}}}).ok());
  EXPECT_EQ(CheckWorkerArgs("gemm", {{"m", int64_t{2}}, {"n", int64_t{2}}}).message(),
            "args.k: required: a worker's gemm multiplies an m x k by a k x n matrix (only a "
            "simulation may give cost.flops instead)");
  EXPECT_EQ(CheckWorkerArgs("gemm", {}).message().substr(0, 16), "args.m: required");
  EXPECT_TRUE(CheckWorkerArgs("add", {}).ok());
  EXPECT_TRUE(CheckWorkerArgs("my_gemm", {}).ok());
}

TEST(BuiltinArgsTest, AWorkersGemmKeepsEachMatrixWithinItsLimit) {
  auto gemm = [](int64_t m, int64_t n, int64_t k) {
    Status s = CheckWorkerArgs("gemm", {{"m", m}, {"n", n}, {"k", k}});
    return s.ok() ? std::string("ok") : s.message();
  };
  EXPECT_EQ(gemm(16384, 16384, 1), "ok");  // C: exactly 2^28 elements
  EXPECT_EQ(gemm(65536, 65536, 1),
            "args: gemm's C (m x n) would have 4294967296 elements, over the 268435456 a "
            "worker's gemm takes");
  EXPECT_EQ(gemm(268435456, 1, 2),
            "args: gemm's A (m x k) would have 536870912 elements, over the 268435456 a "
            "worker's gemm takes");
  EXPECT_EQ(gemm(1, 268435456, 2),
            "args: gemm's B (k x n) would have 536870912 elements, over the 268435456 a "
            "worker's gemm takes");
  // A simulation times any size (CheckBuiltinArgs only bounds each size).
  EXPECT_EQ(Check("gemm", {{"m", int64_t{65536}}, {"n", int64_t{65536}}, {"k", int64_t{1}}}), "ok");
}

TEST(BuiltinArgsTest, ACollectivesBytesAreWholeFloats) {
  EXPECT_EQ(Check("allreduce", {{"bytes", int64_t{64}}}), "ok");
  EXPECT_EQ(Check("allreduce", {{"bytes", int64_t{10}}}),
            "args.bytes: must be a multiple of 4 (whole float32 elements), got 10");
  EXPECT_EQ(Check("broadcast", {{"bytes", int64_t{2}}}),
            "args.bytes: must be a multiple of 4 (whole float32 elements), got 2");
  EXPECT_EQ(Check("alltoall", {{"bytes", 6.0}}),
            "args.bytes: must be a multiple of 4 (whole float32 elements), got 6");
  EXPECT_EQ(Check("send", {{"bytes", int64_t{10}}}), "ok");  // raw bytes
}

TEST(BuiltinArgsTest, ACommunicationTaskIsSizedByItsSpec) {
  auto sized = [](std::string kernel, Args args, double cost, std::optional<double> group) {
    TaskSpec t;
    t.kernel = std::move(kernel);
    t.args = std::move(args);
    if (cost >= 0) {
      t.cost.bytes = cost;
      t.cost.bytes_given = true;
    }
    if (group) t.collective = CollectiveSpec{"g", "allreduce", *group, true};
    SizeCommByHint(t);
    return ArgNumber(t.args, "bytes", -1);
  };
  EXPECT_EQ(sized("send", {}, 4194304, {}), 4194304);
  EXPECT_EQ(sized("send", {}, 0, {}), 0) << "an explicit 0 moves nothing";
  EXPECT_EQ(sized("send", {}, 1e12, {}), 1073741824) << "the most a worker makes";
  EXPECT_EQ(sized("send", {}, -1, {}), -1) << "no hint: the worker's default";
  EXPECT_EQ(sized("send", {{"bytes", int64_t{8}}}, 4096, {}), 8) << "an argument wins";
  EXPECT_EQ(sized("allreduce", {}, -1, 4001), 4000) << "whole float32s";
  EXPECT_EQ(sized("allreduce", {{"n", int64_t{10}}}, -1, 4000), -1) << "n sizes it";
  EXPECT_EQ(sized("alltoall", {{"sizes", std::string("4,4")}}, 64, {}), -1);
  EXPECT_EQ(sized("gemm", {}, 4096, {}), -1) << "not communication";
  EXPECT_EQ(sized("my_send", {}, 4096, {}), -1) << "a worker's own kernel";
}

TEST(BuiltinArgsTest, ATaskListNamesTheFirstTaskAWorkerCannotRun) {
  std::vector<TaskSpec> tasks(3);
  tasks[0].id = "a";
  tasks[0].kernel = "noop";
  tasks[1].id = "mm";
  tasks[1].kernel = "gemm";
  tasks[1].args = {{"m", int64_t{2}}, {"n", int64_t{2}}};
  tasks[2].id = "mm2";
  tasks[2].kernel = "gemm";
  EXPECT_EQ(CheckWorkerTaskArgs(tasks).message().substr(0, 30), "tasks[1] 'mm': args.k: require");
  // A driver session's tasks continue the job's numbering.
  EXPECT_EQ(CheckWorkerTaskArgs(tasks, 40).message().substr(0, 22), "tasks[41] 'mm': args.k");
  tasks[1].args.push_back({"k", int64_t{2}});
  EXPECT_EQ(CheckWorkerTaskArgs(tasks).message().substr(0, 24), "tasks[2] 'mm2': args.m: ");
  tasks.pop_back();
  EXPECT_TRUE(CheckWorkerTaskArgs(tasks).ok());
  EXPECT_TRUE(CheckWorkerTaskArgs({}).ok());
}

}  // namespace
}  // namespace hmpmd
