// A job as the user wrote it (docs/job-spec.md), after parsing but
// before any structural check. The controller's parser fills it from JSON;
// the scheduler's JobGraph checks its structure.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "hmpmd/protocol/labels.h"
#include "hmpmd/protocol/types.h"

namespace hmpmd {

enum class SubmodelKind : uint8_t {
  kGeneric = 0,
  kEncoder,
  kPipelineStage,
  kExpert,
  kActor,
  kReward,
  kLearner,
};
std::string_view SubmodelKindName(SubmodelKind kind);
// "U+000A" for the first control character (C0, DEL, or C1 in UTF-8) of
// `text`, or "" when it has none. Ids and names go into one-line errors,
// listings, traces and file names, so they must have none.
std::string FirstControlChar(std::string_view text);
// True when `text` is well-formed UTF-8 (no overlong forms, surrogates or
// code points past U+10FFFF). JSON text must be: strings from the wire
// (worker names, driver ids) are checked before they reach a JSON answer.
bool IsUtf8(std::string_view text);
std::optional<SubmodelKind> ParseSubmodelKind(std::string_view name);

struct SubmodelSpec {
  std::string name;
  SubmodelKind kind = SubmodelKind::kGeneric;
  uint32_t devices = 0;  // devices it asks for; 0 means "any"
  // hmpmd may move devices between its set and other sub-models' as demand
  // shifts; false pins the set it got at admission. Default: true.
  bool elastic = true;
  // Bytes of state of one replica (weights, gradients, optimizer state),
  // on any kind: a device must hold its shard's part to run one of the
  // sub-model's tasks (state_shards.h). Default: 0 (stateless).
  double state_bytes = 0;
  // The parts one replica's state splits into (tensor-parallel ranks): a
  // task with arg `shard` holds part shard % state_shards. Default: 1 (a
  // device holds a whole replica).
  uint32_t state_shards = 1;
  // Labels ("requires") a device must have to run any of its tasks.
  // Default: none.
  Labels required;
};

// Hints the cost model turns into a duration.
struct CostHint {
  double flops = 0;  // matrix work on the task's core kind
  double bytes = 0;  // bytes moved (communication kernels)
  // `bytes` was given, 0 included; false: a communication kernel's size
  // comes from its arguments (CommBytes). A `bytes` above 0 counts as
  // given either way.
  bool bytes_given = false;
};

struct CollectiveSpec {
  std::string group;  // tasks that share a group form one gang
  std::string op;     // allreduce, allgather, reduce_scatter, alltoall, broadcast
  double bytes = 0;
  bool bytes_given = false;  // as CostHint::bytes_given
};

struct TaskSpec {
  std::string id;
  std::string submodel = "default";
  std::string kernel;
  CoreKind core = CoreKind::kCube;
  // Whether the spec named `core`: the hmpmd policy then keeps it, also for
  // communication, which it otherwise runs on a vector core.
  bool core_given = false;
  std::vector<std::string> inputs;
  Args args;
  CostHint cost;
  std::optional<CollectiveSpec> collective;
  // Runs again after a kernel error, up to max_retries more times, when the
  // error contains one of retry_on (any kernel error when retry_on is
  // empty). Re-runs after a worker died are counted apart (max_attempts).
  uint32_t max_retries = 0;
  std::vector<std::string> retry_on;
  // Labels ("requires") a device must have to run it. JobGraph merges its
  // sub-model's into these (a key both give with different values is
  // refused), so in a graph they are the task's whole requirement.
  // Default: none.
  Labels required;
};

struct JobSpec {
  std::string name = "job";
  uint32_t repeat = 1;  // the task list is one step; steps run in order
  uint32_t weight = 1;  // share of the pool against other jobs
  bool elastic = true;  // false pins every sub-model's device set
  std::vector<SubmodelSpec> submodels;
  std::vector<TaskSpec> tasks;
};

// Bytes a communication task (send, a collective kernel, or any task with
// `collective`) moves per member, for the cost model and the simulator:
// collective.bytes or cost.bytes (the larger when both are given; an
// explicit 0 counts), else what the worker makes when the task
// has no input data (`n` floats, else args.bytes, else 4096); 0 for other
// tasks. Live, a task whose inputs hold data moves those instead.
double CommBytes(const TaskSpec& t);
// The size the spec gives a communication task outright (collective.bytes
// or cost.bytes, the larger; an explicit 0 included); nullopt: none.
std::optional<double> GivenCommBytes(const TaskSpec& t);
// True when CommBytes(t) comes from neither collective.bytes nor cost.bytes
// nor a size argument: a guess where the task moves its inputs' data.
bool CommSizedByInputsOnly(const TaskSpec& t);

}  // namespace hmpmd
