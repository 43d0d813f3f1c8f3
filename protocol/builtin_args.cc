#include "hmpmd/protocol/builtin_args.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <span>
#include <string>

namespace hmpmd {
namespace {

enum class ArgType { kInteger, kNumber, kString };

struct ArgRule {
  std::string_view name;
  ArgType type;
  double min = 0;  // inclusive range for numbers
  double max = 0;
  int64_t multiple_of = 1;  // integers: the values a kernel can use whole
  // Strings: the values allowed, as "a|b"; empty: any.
  std::string_view one_of = {};
};

// Limits the workers enforce (worker/f32_util.h, builtin_kernels.cc).
constexpr double kMaxElements = 268435456.0;  // 2^28
constexpr double kMaxBytes = 1073741824.0;    // 2^30
constexpr double kMaxUs = 86400e6;            // one day

constexpr ArgRule kDuration[] = {{"us", ArgType::kNumber, 0, kMaxUs}};
// Required by the worker's gemm, but not here: a simulated gemm may give
// its time by cost.flops alone.
// `weights: "state"`: B is the sub-model's weights, kept in its state.
constexpr ArgRule kGemm[] = {{"m", ArgType::kInteger, 1, kMaxElements},
                             {"n", ArgType::kInteger, 1, kMaxElements},
                             {"k", ArgType::kInteger, 1, kMaxElements},
                             {"weights", ArgType::kString, 0, 0, 1, "state"}};
constexpr ArgRule kAdd[] = {{"n", ArgType::kInteger, 1, kMaxElements}};
// The kernel multiplies float32: a larger factor would make every element
// inf (and 0 x inf NaN).
constexpr double kMaxF32 = 3.4028234663852886e38;
constexpr ArgRule kScale[] = {{"n", ArgType::kInteger, 1, kMaxElements},
                              {"factor", ArgType::kNumber, -kMaxF32, kMaxF32}};
constexpr ArgRule kSend[] = {{"bytes", ArgType::kInteger, 0, kMaxBytes}};
// A collective member without inputs moves `bytes` / 4 float32 elements;
// a remainder would be dropped without a word, so it is refused.
constexpr ArgRule kF32Bytes = {"bytes", ArgType::kInteger, 0, kMaxBytes, 4};
constexpr ArgRule kCollective[] = {{"n", ArgType::kInteger, 0, kMaxElements}, kF32Bytes};
constexpr ArgRule kAllToAll[] = {
    {"n", ArgType::kInteger, 0, kMaxElements}, kF32Bytes, {"sizes", ArgType::kString}};
constexpr ArgRule kBroadcast[] = {{"n", ArgType::kInteger, 0, kMaxElements},
                                  kF32Bytes,
                                  {"root", ArgType::kInteger, 0, kMaxElements}};

// Hints the static policies read from any task (README, "Policies"): the
// shard of its sub-model's set, micro-batch, pass (forward, backward or its
// input gradient, weight gradient), program order, and the training step
// (spmd-eplb).
constexpr ArgRule kHints[] = {{"shard", ArgType::kInteger, 0, kMaxElements},
                              {"mb", ArgType::kInteger, 0, kMaxElements},
                              {"order", ArgType::kInteger, 0, kMaxElements},
                              {"step", ArgType::kInteger, 0, kMaxElements},
                              {"pass", ArgType::kString, 0, 0, 1, "f|b|w"}};

struct KernelRules {
  std::string_view kernel;
  std::span<const ArgRule> rules;
};

constexpr KernelRules kKernels[] = {{"noop", {}},
                                    {"spin", kDuration},
                                    {"sleep", kDuration},
                                    {"gemm", kGemm},
                                    {"add", kAdd},
                                    {"scale", kScale},
                                    {"send", kSend},
                                    {"allreduce", kCollective},
                                    {"allgather", kCollective},
                                    {"reduce_scatter", kCollective},
                                    {"alltoall", kAllToAll},
                                    {"broadcast", kBroadcast}};

std::string TypeOf(const ArgValue& v) {
  if (std::holds_alternative<bool>(v)) return "a bool";
  if (std::holds_alternative<std::string>(v)) return "a string";
  if (std::holds_alternative<int64_t>(v)) return "an integer";
  return "a number";
}

std::string Num(double v) {
  if (std::isinf(v)) return v < 0 ? "-inf" : "inf";
  if (std::fabs(v) >= 1e15) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.9g", v);
    return buf;
  }
  return std::to_string(static_cast<long long>(v));
}

Status CheckOne(const ArgRule& rule, const ArgValue& v) {
  const std::string field = "args." + std::string(rule.name);
  if (rule.type == ArgType::kString) {
    const auto* s = std::get_if<std::string>(&v);
    if (s == nullptr)
      return Status::InvalidArgument(field + ": expected a string, got " + TypeOf(v));
    if (rule.one_of.empty()) return Status::Ok();
    std::string allowed;
    for (size_t b = 0; b <= rule.one_of.size();) {
      size_t e = rule.one_of.find('|', b);
      if (e == std::string_view::npos) e = rule.one_of.size();
      const std::string_view choice = rule.one_of.substr(b, e - b);
      if (*s == choice) return Status::Ok();
      allowed += (allowed.empty() ? "\"" : " or \"") + std::string(choice) + "\"";
      b = e + 1;
    }
    return Status::InvalidArgument(field + ": must be " + allowed);
  }
  double x = 0;
  if (const auto* i = std::get_if<int64_t>(&v)) {
    x = static_cast<double>(*i);
  } else if (const auto* d = std::get_if<double>(&v)) {
    x = *d;
  } else {
    return Status::InvalidArgument(field + ": expected " +
                                   (rule.type == ArgType::kInteger ? "an integer" : "a number") +
                                   ", got " + TypeOf(v));
  }
  const bool integral = std::isfinite(x) && std::trunc(x) == x;
  if (!std::isfinite(x) || (rule.type == ArgType::kInteger && !integral) || x < rule.min ||
      x > rule.max) {
    std::string range = std::isinf(rule.max)
                            ? "a finite number"
                            : (rule.type == ArgType::kInteger ? "an integer" : "a number") +
                                  std::string(" in [") + Num(rule.min) + ", " + Num(rule.max) + "]";
    return Status::InvalidArgument(field + ": must be " + range);
  }
  if (rule.multiple_of > 1 && static_cast<int64_t>(x) % rule.multiple_of != 0) {
    return Status::InvalidArgument(field + ": must be a multiple of " +
                                   std::to_string(rule.multiple_of) +
                                   " (whole float32 elements), got " + Num(x));
  }
  return Status::Ok();
}

}  // namespace

void SizeCommByHint(TaskSpec& t) {
  const bool collective = IsCollectiveKernel(t.kernel);
  if (!collective && t.kernel != "send") return;
  for (const Arg& a : t.args) {
    if (a.name == "n" || a.name == "bytes" || a.name == "sizes") return;
  }
  const std::optional<double> given = GivenCommBytes(t);
  if (!given || !std::isfinite(*given) || *given < 0) return;
  auto bytes = static_cast<int64_t>(std::min(*given, kMaxBytes));
  if (collective) bytes = bytes / 4 * 4;
  t.args.push_back({"bytes", ArgValue(bytes)});
}

Status CheckBuiltinArgs(std::string_view kernel, const Args& args) {
  const KernelRules* k = nullptr;
  for (const KernelRules& r : kKernels) {
    if (r.kernel == kernel) k = &r;
  }
  if (k == nullptr) return Status::Ok();
  for (const Arg& a : args) {
    const ArgRule* rule = nullptr;
    for (const ArgRule& r : k->rules) {
      if (r.name == a.name) rule = &r;
    }
    for (const ArgRule& r : kHints) {
      if (r.name == a.name) rule = &r;
    }
    if (rule == nullptr) {
      std::string known;
      for (const ArgRule& r : k->rules) known += (known.empty() ? "" : ", ") + std::string(r.name);
      return Status::InvalidArgument("args." + a.name + ": '" + std::string(kernel) +
                                     "' takes no such argument (" +
                                     (known.empty() ? "it takes none" : known) + ")");
    }
    RETURN_IF_ERROR(CheckOne(*rule, a.value));
  }
  return Status::Ok();
}

Status CheckWorkerArgs(std::string_view kernel, const Args& args) {
  if (kernel != "gemm") return Status::Ok();
  double size[3] = {0, 0, 0};  // m, n, k; 0 when not a number (CheckBuiltinArgs says so)
  const std::string_view names[3] = {"m", "n", "k"};
  for (int i = 0; i < 3; ++i) {
    bool given = false;
    for (const Arg& a : args) {
      if (a.name != names[i]) continue;
      given = true;
      if (const auto* v = std::get_if<int64_t>(&a.value)) size[i] = static_cast<double>(*v);
      if (const auto* v = std::get_if<double>(&a.value)) size[i] = *v;
    }
    if (!given) {
      return Status::InvalidArgument("args." + std::string(names[i]) +
                                     ": required: a worker's gemm multiplies an m x k by a k x n "
                                     "matrix (only a simulation may give cost.flops instead)");
    }
  }
  // Each matrix must fit the worker's kernel limit (worker/gemm_kernel.cc),
  // or the job would be accepted and fail when the gemm runs.
  const struct {
    const char* what;
    double elements;
  } matrices[] = {{"A (m x k)", size[0] * size[2]},
                  {"B (k x n)", size[2] * size[1]},
                  {"C (m x n)", size[0] * size[1]}};
  for (const auto& matrix : matrices) {
    if (matrix.elements > kMaxElements) {
      return Status::InvalidArgument(std::string("args: gemm's ") + matrix.what + " would have " +
                                     Num(matrix.elements) + " elements, over the " +
                                     Num(kMaxElements) + " a worker's gemm takes");
    }
  }
  return Status::Ok();
}

Status CheckWorkerTaskArgs(std::span<const TaskSpec> tasks, size_t first_index) {
  for (size_t i = 0; i < tasks.size(); ++i) {
    if (Status st = CheckWorkerArgs(tasks[i].kernel, tasks[i].args); !st.ok()) {
      return Status::InvalidArgument("tasks[" + std::to_string(first_index + i) + "] '" +
                                     tasks[i].id + "': " + st.message());
    }
  }
  return Status::Ok();
}

}  // namespace hmpmd
