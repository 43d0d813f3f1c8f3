// Bad specs are refused with one line naming the task and field, and the
// controller keeps serving good jobs afterwards.
#include <nlohmann/json.hpp>

#include "cluster_fixture.h"

namespace hmpmd::testing {
namespace {

struct BadSpec {
  const char* name;
  const char* spec;
  const char* message;  // a substring the one-line error must contain
};

const BadSpec kBadSpecs[] = {
    {"unknown kernel", R"({"tasks":[{"id":"a","kernel":"warp_drive"}]})",
     "tasks[0] 'a': kernel: no worker runs 'warp_drive'"},
    {"core kind no worker has", R"({"tasks":[{"id":"a","kernel":"noop","core":"vector"}]})",
     "tasks[0] 'a': core: no worker has a 'vector' core"},
    {"unknown input", R"({"tasks":[{"id":"a","kernel":"noop","inputs":["zz"]}]})",
     "tasks[0] 'a': inputs: unknown task 'zz'"},
    {"duplicate id", R"({"tasks":[{"id":"a","kernel":"noop"},{"id":"a","kernel":"noop"}]})",
     "tasks[1] 'a': id: duplicate"},
    {"cycle",
     R"({"tasks":[{"id":"a","kernel":"noop","inputs":["b"]},{"id":"b","kernel":"noop","inputs":["a"]}]})",
     "cycle"},
    {"wrong type", R"({"tasks":[{"id":"a","kernel":"spin","args":{"us":[1]}}]})",
     "tasks[0] 'a': args.us: expected a number, string or bool"},
    {"built-in kernel argument of the wrong type",
     R"({"tasks":[{"id":"a","kernel":"spin","args":{"us":"10"}}]})",
     "tasks[0] 'a': args.us: expected a number, got a string"},
    {"built-in kernel argument out of range",
     R"({"tasks":[{"id":"a","kernel":"gemm","args":{"m":-4,"n":2,"k":2}}]})",
     "tasks[0] 'a': args.m: must be an integer in [1, 268435456]"},
    {"built-in kernel argument misspelt",
     R"({"tasks":[{"id":"a","kernel":"scale","args":{"factr":2}}]})",
     "tasks[0] 'a': args.factr: 'scale' takes no such argument (n, factor)"},
    {"extra field", R"({"tasks":[{"id":"a","kernel":"noop","colour":"red"}]})",
     "tasks[0] 'a': unknown field 'colour'"},
    {"too many devices",
     R"({"submodels":[{"name":"big","devices":64}],"tasks":[{"id":"a","kernel":"noop","submodel":"big"}]})",
     "submodels[0] 'big': devices: asks for 64"},
    {"gang larger than the pool",
     R"({"tasks":[{"id":"r0","kernel":"allreduce","collective":{"group":"g","op":"allreduce"}},
                  {"id":"r1","kernel":"allreduce","collective":{"group":"g","op":"allreduce"}},
                  {"id":"r2","kernel":"allreduce","collective":{"group":"g","op":"allreduce"}}]})",
     "tasks[0] 'r0': collective.group: group 'g' has 3 members, which need distinct devices; "
     "devices that run 'allreduce' on a cube core: 2"},
    {"not json", R"({"tasks": [)", "invalid JSON"},
};

class BadSpecTest : public ClusterTest {};

TEST_F(BadSpecTest, EachBadSpecGetsOneLineAndTheControllerKeepsServing) {
  StartCluster(2, "cube=1");  // no vector cores on purpose
  for (const BadSpec& b : kBadSpecs) {
    SCOPED_TRACE(b.name);
    Status st = Submit(b.spec);
    ASSERT_FALSE(st.ok());
    EXPECT_NE(st.message().find(b.message), std::string::npos) << st.message();
    EXPECT_EQ(st.message().find('\n'), std::string::npos) << "one line: " << st.message();
  }
  JobResult r = RunSpec(R"({"tasks":[{"id":"a","kernel":"spin","args":{"us":100}},
                                      {"id":"b","kernel":"noop","inputs":["a"]}]})");
  EXPECT_EQ(r.state, JobState::kSucceeded) << r.error;
  size_t jobs = cluster_->Call([&] { return cluster_->controller().scheduler().jobs().size(); });
  EXPECT_EQ(jobs, 1u) << "refused specs must not leave jobs behind";
}

TEST_F(BadSpecTest, GemmOverAWorkersLimitIsRefusedAtSubmission) {
  StartCluster(1);
  // Each size is in range, but C would not fit a worker's gemm: refused
  // now, not failed when it runs.
  Status st =
      Submit(R"({"tasks":[{"id":"big","kernel":"gemm","args":{"m":65536,"n":65536,"k":1}}]})");
  EXPECT_EQ(st.message(),
            "tasks[0] 'big': args: gemm's C (m x n) would have 4294967296 elements, over the "
            "268435456 a worker's gemm takes");
}

TEST_F(BadSpecTest, TaskErrorOnTheWorkerFailsTheJobWithItsMessage) {
  // The spec is fine; the worker's 1 MiB store cannot keep the 4 MiB
  // output, which only the worker finds out when the task runs.
  extra_worker_args_ = {"--memory-mb", "1"};
  StartCluster(1);
  JobResult r = RunSpec(R"({"tasks":[{"id":"bad","kernel":"add","args":{"n":1048576}}]})");
  EXPECT_EQ(r.state, JobState::kFailed);
  EXPECT_NE(r.error.find("task 'bad' failed: object store: outputs of job"), std::string::npos)
      << r.error;
  EXPECT_NE(r.error.find("need 4194304 bytes"), std::string::npos) << r.error;
  // The worker is still there for the next job.
  JobResult ok = RunSpec(R"({"tasks":[{"id":"fine","kernel":"noop"}]})");
  EXPECT_EQ(ok.state, JobState::kSucceeded) << ok.error;
}

}  // namespace
}  // namespace hmpmd::testing
