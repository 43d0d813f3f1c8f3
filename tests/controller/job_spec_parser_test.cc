// Tests for the strict JSON job spec parser (controller/job_spec_parser.{h,cc}).
#include "hmpmd/controller/job_spec_parser.h"

#include <gtest/gtest.h>

#include <initializer_list>
#include <string>
#include <utility>
#include <variant>
#include <vector>

#include "hmpmd/protocol/labels.h"

namespace hmpmd {
namespace {

// Builds job spec JSON text around a list of task objects.
class SpecText {
 public:
  SpecText& Top(std::string field_json) {
    top_ += field_json + ", ";
    return *this;
  }
  SpecText& Task(std::string object_json) {
    tasks_ += (tasks_.empty() ? "" : ", ") + object_json;
    return *this;
  }
  std::string Build() const { return "{" + top_ + "\"tasks\": [" + tasks_ + "]}"; }

 private:
  std::string top_;
  std::string tasks_;
};

class JobSpecParserTest : public ::testing::Test {
 protected:
  static JobSpec ParseOk(const std::string& text, const SpecLimits& limits = {}) {
    Result<JobSpec> r = ParseJobSpec(text, limits);
    EXPECT_TRUE(r.ok()) << r.status().ToString() << "\n" << text;
    return r.ok() ? *r : JobSpec{};
  }
  // Parsing must fail with `code`, and the message must hold every needle.
  static std::string ParseFails(const std::string& text, std::initializer_list<std::string> needles,
                                const SpecLimits& limits = {},
                                StatusCode code = StatusCode::kInvalidArgument) {
    Result<JobSpec> r = ParseJobSpec(text, limits);
    EXPECT_FALSE(r.ok()) << "accepted: " << text;
    if (r.ok()) return "";
    EXPECT_EQ(r.status().code(), code) << r.status().ToString();
    const std::string& msg = r.status().message();
    for (const std::string& n : needles) {
      EXPECT_NE(msg.find(n), std::string::npos) << "message '" << msg << "' lacks '" << n << "'";
    }
    EXPECT_EQ(msg.find('\n'), std::string::npos) << "one line: " << msg;
    return msg;
  }
  // A spec whose only task is `task_json`.
  static std::string OneTask(const std::string& task_json) {
    return SpecText().Task(task_json).Build();
  }
  static const ArgValue* FindArg(const TaskSpec& t, const std::string& name) {
    for (const Arg& a : t.args) {
      if (a.name == name) return &a.value;
    }
    return nullptr;
  }
};

TEST_F(JobSpecParserTest, MinimalSpecGetsTheDefaults) {
  JobSpec s = ParseOk(R"({"tasks": [{"id": "a", "kernel": "noop"}]})");
  EXPECT_EQ(s.name, "job");
  EXPECT_EQ(s.repeat, 1u);
  EXPECT_EQ(s.weight, 1u);
  EXPECT_TRUE(s.submodels.empty());
  ASSERT_EQ(s.tasks.size(), 1u);
  const TaskSpec& t = s.tasks[0];
  EXPECT_EQ(t.id, "a");
  EXPECT_EQ(t.kernel, "noop");
  EXPECT_EQ(t.submodel, "default");
  EXPECT_EQ(t.core, CoreKind::kCube);
  EXPECT_FALSE(t.core_given);
  EXPECT_TRUE(t.inputs.empty());
  EXPECT_TRUE(t.args.empty());
  EXPECT_EQ(t.cost.flops, 0);
  EXPECT_EQ(t.cost.bytes, 0);
  EXPECT_FALSE(t.collective.has_value());
}

TEST_F(JobSpecParserTest, ANamedCoreIsMarkedGivenEvenWhenItIsTheDefault) {
  JobSpec s = ParseOk(R"({"tasks": [{"id": "s", "kernel": "send", "core": "cube"},
                                    {"id": "v", "kernel": "send", "core": "vector"}]})");
  EXPECT_TRUE(s.tasks[0].core_given);
  EXPECT_EQ(s.tasks[0].core, CoreKind::kCube);
  EXPECT_TRUE(s.tasks[1].core_given);
}

TEST_F(JobSpecParserTest, DesignDocExampleParsesWithEveryField) {
  JobSpec s = ParseOk(R"({
    "name": "mm-step",
    "repeat": 4,
    "weight": 3,
    "submodels": [
      {"name": "vision", "kind": "encoder", "devices": 2},
      {"name": "llm0", "kind": "pipeline_stage", "devices": 1},
      {"name": "bare"}
    ],
    "tasks": [
      {"id": "v0", "submodel": "vision", "kernel": "spin", "args": {"us": 2000},
       "core": "cube", "cost": {"flops": 2e9}},
      {"id": "x0", "submodel": "vision", "kernel": "send", "core": "vector",
       "inputs": ["v0"], "cost": {"bytes": 4194304}},
      {"id": "l0", "submodel": "llm0", "kernel": "gemm",
       "args": {"m": 256, "n": 256, "k": 256}, "inputs": ["x0"]},
      {"id": "r0", "kernel": "allreduce", "core": "vector", "inputs": ["l0"],
       "collective": {"group": "g", "op": "allreduce", "bytes": 1024}}
    ]
  })");
  EXPECT_EQ(s.name, "mm-step");
  EXPECT_EQ(s.repeat, 4u);
  EXPECT_EQ(s.weight, 3u);
  ASSERT_EQ(s.submodels.size(), 3u);
  EXPECT_EQ(s.submodels[0].name, "vision");
  EXPECT_EQ(s.submodels[0].kind, SubmodelKind::kEncoder);
  EXPECT_EQ(s.submodels[0].devices, 2u);
  EXPECT_EQ(s.submodels[1].kind, SubmodelKind::kPipelineStage);
  EXPECT_EQ(s.submodels[2].kind, SubmodelKind::kGeneric) << "kind defaults to generic";
  EXPECT_EQ(s.submodels[2].devices, 0u);
  ASSERT_EQ(s.tasks.size(), 4u);
  EXPECT_EQ(s.tasks[0].submodel, "vision");
  EXPECT_EQ(s.tasks[0].cost.flops, 2e9);
  EXPECT_EQ(s.tasks[1].core, CoreKind::kVector);
  EXPECT_EQ(s.tasks[1].inputs, std::vector<std::string>{"v0"});
  EXPECT_EQ(s.tasks[1].cost.bytes, 4194304);
  ASSERT_EQ(s.tasks[2].args.size(), 3u);
  EXPECT_EQ(std::get<int64_t>(*FindArg(s.tasks[2], "k")), 256);
  ASSERT_TRUE(s.tasks[3].collective.has_value());
  EXPECT_EQ(s.tasks[3].collective->group, "g");
  EXPECT_EQ(s.tasks[3].collective->op, "allreduce");
  EXPECT_EQ(s.tasks[3].collective->bytes, 1024);
  EXPECT_EQ(s.tasks[3].submodel, "default");
}

// A bytes hint of 0 is a size, not its absence: a send given
// "cost": {"bytes": 0} moves nothing. It was timed as 4096 bytes and
// warned about ("give cost.bytes") as if the hint were missing.
TEST_F(JobSpecParserTest, ExplicitZeroBytesHintCountsAsZero) {
  JobSpec s = ParseOk(SpecText()
                          .Task(R"({"id": "g", "kernel": "noop"})")
                          .Task(R"({"id": "zero", "kernel": "send", "inputs": ["g"],
                                    "cost": {"bytes": 0}})")
                          .Task(R"({"id": "none", "kernel": "send", "inputs": ["g"],
                                    "cost": {"flops": 1}})")
                          .Task(R"({"id": "alone", "kernel": "send", "cost": {"bytes": 0}})")
                          .Task(R"({"id": "r0", "kernel": "allreduce", "args": {"n": 8},
                                    "collective": {"group": "a", "op": "allreduce",
                                                   "bytes": 0}})")
                          .Task(R"({"id": "r", "kernel": "allreduce", "args": {"n": 8},
                                    "collective": {"group": "b", "op": "allreduce"}})")
                          .Build());
  ASSERT_EQ(s.tasks.size(), 6u);
  EXPECT_TRUE(s.tasks[1].cost.bytes_given);
  EXPECT_EQ(CommBytes(s.tasks[1]), 0);
  EXPECT_FALSE(CommSizedByInputsOnly(s.tasks[1])) << "no warning: its size is given";
  // Absent: the worker's default, and the simulator's warning.
  EXPECT_FALSE(s.tasks[2].cost.bytes_given);
  EXPECT_EQ(CommBytes(s.tasks[2]), 4096);
  EXPECT_TRUE(CommSizedByInputsOnly(s.tasks[2]));
  EXPECT_EQ(CommBytes(s.tasks[3]), 0) << "not the 4096 bytes of a send without inputs";
  EXPECT_TRUE(s.tasks[4].collective->bytes_given);
  EXPECT_EQ(CommBytes(s.tasks[4]), 0);
  EXPECT_FALSE(s.tasks[5].collective->bytes_given);
  EXPECT_EQ(CommBytes(s.tasks[5]), 32) << "args.n floats";
}

TEST_F(JobSpecParserTest, SubmodelKindsAllParse) {
  for (const char* kind :
       {"encoder", "pipeline_stage", "expert", "actor", "reward", "learner", "generic"}) {
    JobSpec s =
        ParseOk(SpecText()
                    .Top(std::string(R"("submodels": [{"name": "m", "kind": ")") + kind + "\"}]")
                    .Task(R"({"id": "a", "kernel": "noop"})")
                    .Build());
    ASSERT_EQ(s.submodels.size(), 1u);
    EXPECT_EQ(SubmodelKindName(s.submodels[0].kind), kind);
  }
}

TEST_F(JobSpecParserTest, ArgsKeepTheirTypes) {
  JobSpec s = ParseOk(OneTask(R"({"id": "a", "kernel": "k", "args": {
      "i": 42, "neg": -7, "f": 2.5, "whole_float": 3.0, "t": true, "s": "hi",
      "max": 9223372036854775807, "min": -9223372036854775808}})"));
  const TaskSpec& t = s.tasks.at(0);
  ASSERT_EQ(t.args.size(), 8u);
  EXPECT_EQ(std::get<int64_t>(*FindArg(t, "i")), 42);
  EXPECT_EQ(std::get<int64_t>(*FindArg(t, "neg")), -7);
  EXPECT_EQ(std::get<double>(*FindArg(t, "f")), 2.5);
  EXPECT_EQ(std::get<double>(*FindArg(t, "whole_float")), 3.0);
  EXPECT_EQ(std::get<bool>(*FindArg(t, "t")), true);
  EXPECT_EQ(std::get<std::string>(*FindArg(t, "s")), "hi");
  EXPECT_EQ(std::get<int64_t>(*FindArg(t, "max")), INT64_MAX);
  EXPECT_EQ(std::get<int64_t>(*FindArg(t, "min")), INT64_MIN);
}

TEST_F(JobSpecParserTest, ArgsKeepTheOrderTheSpecGave) {
  // types.h: "Kernel arguments are flat name -> scalar maps, in the order the
  // spec gave." Keys are deliberately not in alphabetical order.
  JobSpec s = ParseOk(
      OneTask(R"({"id": "a", "kernel": "gemm", "args": {"m": 1, "n": 2, "k": 3, "alpha": 1.5}})"));
  const TaskSpec& t = s.tasks.at(0);
  ASSERT_EQ(t.args.size(), 4u);
  EXPECT_EQ(t.args[0].name, "m");
  EXPECT_EQ(t.args[1].name, "n");
  EXPECT_EQ(t.args[2].name, "k");
  EXPECT_EQ(t.args[3].name, "alpha");
}

TEST_F(JobSpecParserTest, ArgOfNestedTypeIsRejected) {
  for (const char* v : {"[1, 2]", "{\"x\": 1}", "null"}) {
    ParseFails(OneTask(std::string(R"({"id": "a", "kernel": "k", "args": {"bad": )") + v + "}}"),
               {"tasks[0] 'a'", "args.bad", "expected a number, string or bool"});
  }
}

TEST_F(JobSpecParserTest, ArgIntegerAboveInt64IsRejected) {
  ParseFails(OneTask(R"({"id": "a", "kernel": "k", "args": {"big": 18446744073709551615}})"),
             {"tasks[0] 'a'", "args.big", "too large"});
}

TEST_F(JobSpecParserTest, TopLevelFieldTypeErrorsNameTheField) {
  struct Case {
    std::string top;
    std::string needle;
  };
  for (const Case& c : std::initializer_list<Case>{
           {R"("name": 5)", "name: expected a string, got an integer"},
           {R"("repeat": "2")", "repeat: expected an integer, got a string"},
           {R"("repeat": 1.5)", "repeat: expected an integer, got a number"},
           {R"("repeat": true)", "repeat: expected an integer, got a boolean"},
           {R"("repeat": 0)", "repeat: must be between 1 and 100000"},
           {R"("repeat": -3)", "repeat: must be between 1"},
           {R"("repeat": 100001)", "repeat: must be between 1 and 100000"},
           {R"("weight": 0)", "weight: must be between 1"},
           {R"("weight": null)", "weight: expected an integer, got a null"},
           {R"("submodels": {})", "submodels: expected an array, got an object"},
       }) {
    ParseFails(SpecText().Top(c.top).Task(R"({"id": "a", "kernel": "k"})").Build(), {c.needle});
  }
  ParseFails(SpecText().Top(R"("repeat": 2e5)").Task(R"({"id": "a", "kernel": "k"})").Build(),
             {"repeat: must be between 1 and 100000"});
  // A whole number written as a float is that integer.
  auto spec = ParseJobSpec(SpecText()
                               .Top(R"("repeat": 3.0, "weight": 1e1)")
                               .Task(R"({"id": "a", "kernel": "k"})")
                               .Build());
  ASSERT_TRUE(spec.ok()) << spec.status().ToString();
  EXPECT_EQ(spec->repeat, 3u);
  EXPECT_EQ(spec->weight, 10u);
  ParseFails(R"({"tasks": {}})", {"tasks: expected an array, got an object"});
  ParseFails(R"({"name": "x"})", {"tasks: required"});
  ParseFails(R"([1, 2])", {"job spec: expected an object, got an array"});
}

TEST_F(JobSpecParserTest, SubmodelErrorsNameTheSubmodelAndField) {
  auto with = [](const std::string& sm) {
    return SpecText()
        .Top(R"("submodels": [{"name": "ok"}, )" + sm + "]")
        .Task(R"({"id": "a", "kernel": "k"})")
        .Build();
  };
  ParseFails(with(R"("vision")"), {"submodels[1]: expected an object, got a string"});
  ParseFails(with(R"({"kind": "encoder"})"), {"submodels[1]: name: required"});
  ParseFails(with(R"({"name": 3})"), {"submodels[1]: name: expected a string"});
  ParseFails(with(R"({"name": "v", "kind": "decoder"})"),
             {"submodels[1]: kind: unknown kind 'decoder'", "encoder", "generic"});
  ParseFails(with(R"({"name": "v", "kind": 1})"), {"submodels[1]: kind: expected a string"});
  ParseFails(with(R"({"name": "v", "devices": -1})"), {"submodels[1]: devices: must be between 0"});
  ParseFails(with(R"({"name": "v", "devices": "2"})"),
             {"submodels[1]: devices: expected an integer, got a string"});
}

TEST_F(JobSpecParserTest, RequiresOnTasksAndSubmodelsParsesSortedByKey) {
  JobSpec s = ParseOk(SpecText()
                          .Top(R"("submodels": [{"name": "enc", "requires": {"accel": "910c"}}])")
                          .Task(R"({"id": "a", "kernel": "k", "submodel": "enc",
                    "requires": {"zone": "a", "accel": "910c"}})")
                          .Task(R"({"id": "b", "kernel": "k"})")
                          .Build());
  EXPECT_EQ(s.submodels[0].required, (Labels{{"accel", "910c"}}));
  EXPECT_EQ(s.tasks[0].required, (Labels{{"accel", "910c"}, {"zone", "a"}}));
  EXPECT_TRUE(s.tasks[1].required.empty());
}

TEST_F(JobSpecParserTest, BadRequiresAreRefusedNamingTheField) {
  for (const auto& [requires_json, needle] :
       std::initializer_list<std::pair<std::string, std::string>>{
           {R"("910c")", "tasks[0] 'a': requires: expected an object like"},
           {R"({"accel": 910})", "tasks[0] 'a': requires.accel: expected a string, got an integer"},
           {R"({"": "910c"})", "tasks[0] 'a': requires: key: empty"},
           {R"({"a=b": "910c"})", "tasks[0] 'a': requires: key: contains '='"},
           {R"({"accel": ""})", "tasks[0] 'a': requires.accel: value: empty"},
           {R"({"accel": "9\n1"})",
            "tasks[0] 'a': requires.accel: value: contains the control "
            "character U+000A"},
           {R"({"accel": ")" + std::string(kMaxLabelBytes + 1, 'x') + "\"}",
            "tasks[0] 'a': requires.accel: value: longer than the limit of 255 bytes"},
       }) {
    ParseFails(OneTask(R"({"id": "a", "kernel": "k", "requires": )" + requires_json + "}"),
               {needle});
  }
  ParseFails(SpecText()
                 .Top(R"("submodels": [{"name": "enc", "requires": {"accel": 1}}])")
                 .Task(R"({"id": "a", "kernel": "k"})")
                 .Build(),
             {"submodels[0]: requires.accel: expected a string"});
  std::string many = "{";
  for (size_t i = 0; i <= kMaxLabels; ++i)
    many += (i ? ", \"k" : "\"k") + std::to_string(i) + "\": \"v\"";
  ParseFails(OneTask(R"({"id": "a", "kernel": "k", "requires": )" + many + "}}"),
             {"tasks[0] 'a': requires: more than 64 labels"});
}

TEST_F(JobSpecParserTest, SubmodelStateBytesIsANonNegativeNumber) {
  JobSpec s =
      ParseOk(SpecText()
                  .Top(R"("submodels": [{"name": "a", "kind": "actor", "state_bytes": 3.5e7},)"
                       R"( {"name": "b"}])")
                  .Task(R"({"id": "t", "kernel": "k", "submodel": "a"})")
                  .Build());
  ASSERT_EQ(s.submodels.size(), 2u);
  EXPECT_EQ(s.submodels[0].state_bytes, 3.5e7);
  EXPECT_EQ(s.submodels[1].state_bytes, 0) << "none by default";
  ParseFails(SpecText()
                 .Top(R"("submodels": [{"name": "v", "state_bytes": -1}])")
                 .Task(R"({"id": "a", "kernel": "k"})")
                 .Build(),
             {"submodels[0]: state_bytes: must be a finite number >= 0"});
  // Every kind may hold state, split over state_shards parts (default 1).
  for (const char* kind : {"encoder", "pipeline_stage", "expert", "generic", "actor"}) {
    JobSpec k = ParseOk(SpecText()
                            .Top(std::string(R"("submodels": [{"name": "v", "kind": ")") + kind +
                                 R"(", "state_bytes": 1e6, "state_shards": 4}])")
                            .Task(R"({"id": "a", "kernel": "k", "submodel": "v"})")
                            .Build());
    EXPECT_EQ(k.submodels[0].state_bytes, 1e6) << kind;
    EXPECT_EQ(k.submodels[0].state_shards, 4u) << kind;
  }
  EXPECT_EQ(s.submodels[0].state_shards, 1u) << "one part by default";
  for (const char* shards : {"0", "-1", "1.5", "\"8\"", "2000000"}) {
    ParseFails(
        SpecText()
            .Top(std::string(R"("submodels": [{"name": "v", "state_shards": )") + shards + "}]")
            .Task(R"({"id": "a", "kernel": "k", "submodel": "v"})")
            .Build(),
        {"submodels[0]: state_shards:"});
  }
  EXPECT_EQ(ParseOk(SpecText()
                        .Top(R"("submodels": [{"name": "v", "state_bytes": 1}])")
                        .Task(R"({"id": "a", "kernel": "k"})")
                        .Build())
                .submodels[0]
                .state_bytes,
            1)
      << "the default kind, generic, may hold state too";
}

TEST_F(JobSpecParserTest, ElasticOnTheJobAndOnSubmodelsIsABoolean) {
  JobSpec s =
      ParseOk(SpecText()
                  .Top(R"("elastic": false, "submodels": [{"name": "a", "devices": 2,)"
                       R"( "elastic": false}, {"name": "b", "elastic": true}, {"name": "c"}])")
                  .Task(R"({"id": "t", "kernel": "k", "submodel": "a"})")
                  .Build());
  EXPECT_FALSE(s.elastic);
  ASSERT_EQ(s.submodels.size(), 3u);
  EXPECT_FALSE(s.submodels[0].elastic);
  EXPECT_TRUE(s.submodels[1].elastic);
  EXPECT_TRUE(s.submodels[2].elastic) << "elastic by default";
  EXPECT_TRUE(ParseOk(OneTask(R"({"id": "a", "kernel": "k"})")).elastic) << "elastic by default";
  ParseFails(SpecText().Top(R"("elastic": "no")").Task(R"({"id": "a", "kernel": "k"})").Build(),
             {"elastic: expected true or false, got a string"});
  ParseFails(SpecText()
                 .Top(R"("submodels": [{"name": "ok"}, {"name": "v", "elastic": 0}])")
                 .Task(R"({"id": "a", "kernel": "k"})")
                 .Build(),
             {"submodels[1]: elastic: expected true or false, got an integer"});
}

TEST_F(JobSpecParserTest, TaskFieldErrorsNameTheTaskAndField) {
  struct Case {
    std::string task;
    std::string needle;
  };
  for (
      const Case& c : std::initializer_list<Case>{
          {R"(7)", "tasks[2]: expected an object, got an integer"},
          {R"({"kernel": "k"})", "tasks[2]: id: required"},
          {R"({"id": 5, "kernel": "k"})", "tasks[2]: id: expected a string, got an integer"},
          {R"({"id": "", "kernel": "k"})", "tasks[2] '': id: must not be empty"},
          {R"({"id": "x"})", "tasks[2] 'x': kernel: required"},
          {R"({"id": "x", "kernel": ""})", "tasks[2] 'x': kernel: must not be empty"},
          {R"({"id": "x", "kernel": ["k"]})",
           "tasks[2] 'x': kernel: expected a string, got an array"},
          {R"({"id": "x", "kernel": "k", "submodel": 1})",
           "tasks[2] 'x': submodel: expected a string"},
          {R"({"id": "x", "kernel": "k", "core": "tensor"})",
           "tasks[2] 'x': core: unknown core kind 'tensor' (cube, vector)"},
          {R"({"id": "x", "kernel": "k", "core": 0})", "tasks[2] 'x': core: expected a string"},
          {R"({"id": "x", "kernel": "k", "inputs": "a"})",
           "tasks[2] 'x': inputs: expected an array, got a string"},
          {R"({"id": "x", "kernel": "k", "inputs": ["a", 1]})",
           "tasks[2] 'x': inputs[1]: expected a task id string, got an integer"},
          {R"({"id": "x", "kernel": "k", "args": [1]})",
           "tasks[2] 'x': args: expected an object, got an array"},
          {R"({"id": "x", "kernel": "k", "cost": 5})",
           "tasks[2] 'x': cost: expected an object, got an integer"},
          {R"({"id": "x", "kernel": "k", "cost": {"flops": "many"}})",
           "tasks[2] 'x': cost: flops: expected a number, got a string"},
          {R"({"id": "x", "kernel": "k", "cost": {"bytes": -1}})",
           "tasks[2] 'x': cost: bytes: must be a finite number >= 0"},
          {R"({"id": "x", "kernel": "k", "collective": "g"})",
           "tasks[2] 'x': collective: expected an object, got a string"},
          {R"({"id": "x", "kernel": "k", "collective": {"op": "allreduce"}})",
           "tasks[2] 'x': collective: group: required"},
          {R"({"id": "x", "kernel": "k", "collective": {"group": "g"}})",
           "tasks[2] 'x': collective: op: required"},
          {R"({"id": "x", "kernel": "k", "collective": {"group": "g", "op": "allreduce", "bytes": -5}})",
           "tasks[2] 'x': collective: bytes: must be a finite number >= 0"},
      }) {
    ParseFails(SpecText()
                   .Task(R"({"id": "a", "kernel": "k"})")
                   .Task(R"({"id": "b", "kernel": "k"})")
                   .Task(c.task)
                   .Build(),
               {c.needle});
  }
}

TEST_F(JobSpecParserTest, UnknownFieldsAreRejectedAtEveryLevel) {
  ParseFails(SpecText().Top(R"("nmae": "x")").Task(R"({"id": "a", "kernel": "k"})").Build(),
             {"job spec: unknown field 'nmae'"});
  ParseFails(SpecText()
                 .Top(R"("submodels": [{"name": "v", "device": 2}])")
                 .Task(R"({"id": "a", "kernel": "k"})")
                 .Build(),
             {"submodels[0]: unknown field 'device'"});
  ParseFails(OneTask(R"({"id": "a", "kernel": "k", "input": ["b"]})"),
             {"tasks[0] 'a': unknown field 'input'"});
  ParseFails(OneTask(R"({"id": "a", "kernel": "k", "cost": {"flop": 1}})"),
             {"tasks[0] 'a': cost: unknown field 'flop'"});
  ParseFails(
      OneTask(
          R"({"id": "a", "kernel": "k", "collective": {"group": "g", "op": "allreduce", "size": 1}})"),
      {"tasks[0] 'a': collective: unknown field 'size'"});
}

TEST_F(JobSpecParserTest, AFieldGivenTwiceIsRejectedAtEveryLevel) {
  // nlohmann keeps the last of two equal keys; a spec must not mean
  // something else than it reads.
  ParseFails(R"({"tasks": [], "tasks": [{"id": "a", "kernel": "k"}]})",
             {"job spec: field 'tasks' given twice"});
  ParseFails(OneTask(R"({"id": "a", "id": "b", "kernel": "k"})"),
             {"tasks[0]: field 'id' given twice"});
  ParseFails(SpecText()
                 .Task(R"({"id": "a", "kernel": "k"})")
                 .Task(R"({"id": "b", "kernel": "spin", "args": {"us": 1, "us": -5}})")
                 .Build(),
             {"tasks[1].args: field 'us' given twice"});
  ParseFails(
      SpecText()
          .Top(R"("submodels": [{"name": "s"}, {"name": "t", "kind": "actor", "kind": "x"}])")
          .Task(R"({"id": "a", "kernel": "k"})")
          .Build(),
      {"submodels[1]: field 'kind' given twice"});
  // Past the small-object scan: the 41st key repeats the 7th.
  std::string args;
  for (int i = 0; i < 40; ++i) args += "\"k" + std::to_string(i) + "\": 1, ";
  ParseFails(OneTask(R"({"id": "a", "kernel": "k", "args": {)" + args + R"("k7": 2}})"),
             {"tasks[0].args: field 'k7' given twice"});
  // Equal keys in different objects are fine.
  ParseOk(SpecText()
              .Task(R"({"id": "a", "kernel": "k", "args": {"n": 1}})")
              .Task(R"({"id": "b", "kernel": "k", "args": {"n": 1}, "inputs": ["a"]})")
              .Build());
}

TEST_F(JobSpecParserTest, ControlCharactersInIdsAndNamesAreRejected) {
  // Ids and names are printed in one-line errors, listings and file names.
  ParseFails(OneTask(R"({"id": "a\nb", "kernel": "k", "core": "x"})"),
             {"tasks[0]: id: contains the control character U+000A"});
  ParseFails(OneTask(R"({"id": "a\u0000b", "kernel": "k"})"), {"id:", "U+0000"});
  ParseFails(OneTask(R"({"id": "\u001b[31mred", "kernel": "k"})"), {"id:", "U+001B"});
  ParseFails(OneTask(R"({"id": "a\u009bb", "kernel": "k"})"), {"id:", "U+009B"});
  ParseFails(OneTask(R"({"id": "a", "kernel": "k\r"})"), {"tasks[0] 'a': kernel:", "U+000D"});
  ParseFails(OneTask(R"({"id": "a", "kernel": "k", "inputs": ["x\ty"]})"),
             {"tasks[0] 'a': inputs[0]:", "U+0009"});
  ParseFails(OneTask(R"({"id": "a", "kernel": "k", "args": {"s": "1\n2"}})"),
             {"tasks[0] 'a': args.s:", "U+000A"});
  ParseFails(SpecText().Top(R"("name": "x\u007fy")").Task(R"({"id": "a", "kernel": "k"})").Build(),
             {"name:", "U+007F"});
  // Other Unicode is welcome.
  JobSpec spec = ParseOk(OneTask(R"({"id": "視覚→λ é", "kernel": "k"})"));
  ASSERT_EQ(spec.tasks.size(), 1u);
  EXPECT_EQ(spec.tasks[0].id, "視覚→λ é");
}

TEST_F(JobSpecParserTest, InvalidJsonReportsLineAndColumn) {
  std::string msg = ParseFails("{\n  \"tasks\": [\n    {\"id\": \"a\",, }\n  ]\n}",
                               {"job spec: invalid JSON", "line 3", "column"});
  EXPECT_EQ(msg.find("[json.exception"), std::string::npos) << "library prefix stripped: " << msg;
  ParseFails("", {"invalid JSON"});
  ParseFails("{\"tasks\": []} trailing", {"invalid JSON"});
  // nlohmann's lexer stops at a NUL byte: what followed it was ignored.
  const std::string spec = OneTask(R"({"id": "a", "kernel": "k"})");
  ParseFails(spec + std::string(1, '\0') + "{garbage", {"invalid JSON: a NUL byte at line 1"});
  ParseFails("{\n \"tasks\": [{\"id\": \"a" + std::string(1, '\0') + "\", \"kernel\": \"k\"}]}",
             {"invalid JSON: a NUL byte at line 2, column 21"});
  // A number too large for a double: the one error nlohmann gives no place.
  ParseFails("{\"tasks\": [{\"id\": \"a\", \"kernel\": \"k\",\n  \"args\": {\"x\": 1e400}}]}",
             {"invalid JSON: number overflow parsing '1e400' at line 2, column 17"});
}

TEST_F(JobSpecParserTest, NestingDeeperThanTheLimitIsRejectedBeforeParsing) {
  std::string deep(40, '[');
  deep += std::string(40, ']');
  ParseFails(deep, {"nested deeper than the limit of 32"});
  // Unbalanced: the parser is never reached, so no stack is at risk.
  ParseFails(std::string(1'000'000, '['), {"nested deeper than the limit of 32"});

  SpecLimits tight;
  tight.max_depth = 3;
  // root { tasks [ task { }: depth 3 fits; an args object makes it 4.
  ParseOk(OneTask(R"({"id": "a", "kernel": "k"})"), tight);
  ParseFails(OneTask(R"({"id": "a", "kernel": "k", "args": {}})"), {"limit of 3"}, tight);
}

TEST_F(JobSpecParserTest, BracketsInsideStringsDoNotCountAsNesting) {
  SpecLimits tight;
  tight.max_depth = 3;
  JobSpec s = ParseOk(OneTask(R"({"id": "[[[[{{{{", "kernel": "k\"[[[[\\"})"), tight);
  EXPECT_EQ(s.tasks.at(0).id, "[[[[{{{{");
  EXPECT_EQ(s.tasks.at(0).kernel, "k\"[[[[\\");
}

TEST_F(JobSpecParserTest, MoreTasksThanTheLimitIsResourceExhausted) {
  SpecLimits limits;
  limits.max_tasks = 2;
  std::string two = SpecText()
                        .Task(R"({"id": "a", "kernel": "k"})")
                        .Task(R"({"id": "b", "kernel": "k"})")
                        .Build();
  EXPECT_EQ(ParseOk(two, limits).tasks.size(), 2u);
  std::string three = SpecText()
                          .Task(R"({"id": "a", "kernel": "k"})")
                          .Task(R"({"id": "b", "kernel": "k"})")
                          .Task(R"({"id": "c", "kernel": "k"})")
                          .Build();
  ParseFails(three, {"tasks", "3 tasks", "limit of 2"}, limits, StatusCode::kResourceExhausted);
}

TEST_F(JobSpecParserTest, TextOverMaxBytesIsResourceExhaustedBeforeParsing) {
  std::string text = OneTask(R"({"id": "a", "kernel": "k"})");
  SpecLimits limits;
  limits.max_bytes = text.size();
  ParseOk(text, limits);
  limits.max_bytes = text.size() - 1;
  ParseFails(text, {"over the limit of " + std::to_string(text.size() - 1)}, limits,
             StatusCode::kResourceExhausted);
  // Checked first: even invalid JSON gets the size error.
  ParseFails(std::string(limits.max_bytes + 1, '{'), {"bytes"}, limits,
             StatusCode::kResourceExhausted);
}

TEST_F(JobSpecParserTest, StringsOverMaxStringAreRejected) {
  SpecLimits limits;
  limits.max_string = 4;
  ParseOk(SpecText().Top(R"("name": "abcd")").Task(R"({"id": "abcd", "kernel": "k"})").Build(),
          limits);
  ParseFails(SpecText().Top(R"("name": "abcde")").Task(R"({"id": "a", "kernel": "k"})").Build(),
             {"name: longer than the limit of 4"}, limits);
  ParseFails(OneTask(R"({"id": "abcde", "kernel": "k"})"),
             {"tasks[0] 'abcde': id: longer than the limit of 4"}, limits);
  ParseFails(OneTask(R"({"id": "a", "kernel": "kernel"})"), {"tasks[0] 'a': kernel: longer"},
             limits);
  ParseFails(OneTask(R"({"id": "a", "kernel": "k", "args": {"s": "hello"}})"),
             {"tasks[0] 'a': args.s: longer than the limit of 4"}, limits);
  ParseFails(OneTask(R"({"id": "a", "kernel": "k", "collective": {"group": "ggggg", "op": "x"}})"),
             {"tasks[0] 'a': collective: group: longer"}, limits);
}

TEST_F(JobSpecParserTest, InputIdsAndArgNamesObeyMaxString) {
  // max_string bounds "any one string (ids, names, argument values)": the
  // ids in inputs and the names of arguments too.
  SpecLimits limits;
  limits.max_string = 4;
  ParseFails(OneTask(R"({"id": "a", "kernel": "k", "inputs": ["abcde"]})"),
             {"tasks[0] 'a': inputs[0]: longer than the limit of 4"}, limits);
  ParseFails(OneTask(R"({"id": "a", "kernel": "k", "args": {"abcde": 1}})"),
             {"tasks[0] 'a': args: argument name longer than the limit of 4"}, limits);
  ParseOk(OneTask(R"({"id": "a", "kernel": "k", "inputs": ["abcd"], "args": {"abcd": 1}})"),
          limits);
}

TEST_F(JobSpecParserTest, TooManyInputsOrArgsAreRejected) {
  SpecLimits limits;
  limits.max_inputs = 2;
  limits.max_args = 2;
  ParseOk(OneTask(R"({"id": "a", "kernel": "k", "inputs": ["x", "y"], "args": {"p": 1, "q": 2}})"),
          limits);
  ParseFails(OneTask(R"({"id": "a", "kernel": "k", "inputs": ["x", "y", "z"]})"),
             {"tasks[0] 'a': inputs: more than 2 inputs"}, limits);
  ParseFails(OneTask(R"({"id": "a", "kernel": "k", "args": {"p": 1, "q": 2, "r": 3}})"),
             {"tasks[0] 'a': args: more than 2 arguments"}, limits);
}

TEST_F(JobSpecParserTest, RepeatAboveCustomLimitIsRejected) {
  SpecLimits limits;
  limits.max_repeat = 10;
  ParseOk(SpecText().Top(R"("repeat": 10)").Task(R"({"id": "a", "kernel": "k"})").Build(), limits);
  ParseFails(SpecText().Top(R"("repeat": 11)").Task(R"({"id": "a", "kernel": "k"})").Build(),
             {"repeat: must be between 1 and 10"}, limits);
}

TEST_F(JobSpecParserTest, TaskRunsAboveTheLimitAreResourceExhausted) {
  SpecLimits limits;
  limits.max_runs = 20;
  auto two = [](int repeat) {
    return SpecText()
        .Top(R"("repeat": )" + std::to_string(repeat))
        .Task(R"({"id": "a", "kernel": "k"})")
        .Task(R"({"id": "b", "kernel": "k"})")
        .Build();
  };
  ParseOk(two(10), limits);
  auto r = ParseJobSpec(two(11), limits);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kResourceExhausted);
  EXPECT_EQ(r.status().message(),
            "job spec: 2 tasks x repeat 11 = 22 task runs, over the limit of 20");
}

TEST_F(JobSpecParserTest, VeryLongIdIsLeftOutOfTheLocation) {
  std::string id(300, 'x');
  std::string msg = ParseFails(OneTask(R"({"id": ")" + id + R"(", "kernel": "k", "core": "gpu"})"),
                               {"tasks[0]: core: unknown core kind 'gpu'"});
  EXPECT_EQ(msg.find(id), std::string::npos);
}

TEST_F(JobSpecParserTest, HugeFloatIsRejectedNotInfinite) {
  Result<JobSpec> r =
      ParseJobSpec(OneTask(R"({"id": "a", "kernel": "k", "cost": {"flops": 1e400}})"));
  ASSERT_FALSE(r.ok()) << "1e400 is not a finite cost";
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
}

TEST_F(JobSpecParserTest, EmptyTaskListParses) {
  // Structure (at least one task) is JobGraph's check, not the parser's.
  JobSpec s = ParseOk(R"({"tasks": []})");
  EXPECT_TRUE(s.tasks.empty());
}

TEST_F(JobSpecParserTest, RetryFieldsParseAndDefaultToNoRetries) {
  JobSpec s = ParseOk(SpecText()
                          .Task(R"({"id": "a", "kernel": "noop"})")
                          .Task(R"({"id": "b", "kernel": "noop", "max_retries": 2,
                                    "retry_on": ["ValueError", "timeout"]})")
                          .Build());
  EXPECT_EQ(s.tasks[0].max_retries, 0u);
  EXPECT_TRUE(s.tasks[0].retry_on.empty());
  EXPECT_EQ(s.tasks[1].max_retries, 2u);
  EXPECT_EQ(s.tasks[1].retry_on, (std::vector<std::string>{"ValueError", "timeout"}));
}

TEST_F(JobSpecParserTest, BadRetryFieldsAreOneLineErrorsNamingTheTaskAndField) {
  ParseFails(OneTask(R"({"id": "a", "kernel": "noop", "max_retries": -1})"),
             {"tasks[0] 'a': max_retries: must be between 0 and 100"});
  ParseFails(OneTask(R"({"id": "a", "kernel": "noop", "max_retries": 101})"),
             {"tasks[0] 'a': max_retries: must be between 0 and 100"});
  ParseFails(OneTask(R"({"id": "a", "kernel": "noop", "max_retries": "2"})"),
             {"tasks[0] 'a': max_retries: expected an integer, got a string"});
  ParseFails(OneTask(R"({"id": "a", "kernel": "noop", "retry_on": "ValueError"})"),
             {"tasks[0] 'a': retry_on: expected an array of strings, got a string"});
  ParseFails(OneTask(R"({"id": "a", "kernel": "noop", "retry_on": ["x", 3]})"),
             {"tasks[0] 'a': retry_on[1]: expected a string, got an integer"});
  ParseFails(OneTask(R"({"id": "a", "kernel": "noop", "retry_on": [""]})"),
             {"tasks[0] 'a': retry_on[0]: empty"});
}

}  // namespace
}  // namespace hmpmd
