#include "hmpmd/controller/job_spec_parser.h"

#include <cmath>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <set>

#include "hmpmd/protocol/labels.h"
#include "hmpmd/protocol/strict_json.h"
#include "hmpmd/scheduler/retry_rule.h"

namespace hmpmd {
namespace {

// ordered_json keeps object members in the order the text gave, so kernel
// arguments reach the kernel in spec order (types.h).
using json = nlohmann::ordered_json;

// Deepest nesting of [ and { outside strings; stops counting past `limit`.
size_t NestingDepth(std::string_view text, size_t limit) {
  size_t depth = 0, max_depth = 0;
  bool in_string = false, escaped = false;
  for (char c : text) {
    if (in_string) {
      if (escaped)
        escaped = false;
      else if (c == '\\')
        escaped = true;
      else if (c == '"')
        in_string = false;
      continue;
    }
    if (c == '"')
      in_string = true;
    else if (c == '[' || c == '{') {
      max_depth = std::max(max_depth, ++depth);
      if (max_depth > limit) return max_depth;
    } else if ((c == ']' || c == '}') && depth > 0) {
      --depth;
    }
  }
  return max_depth;
}

// Ids and names are printed in one-line errors, listings and traces: a
// newline or an escape sequence there would break them, a NUL would cut
// file names short.
Status NoControlChars(std::string_view s) {
  std::string c = FirstControlChar(s);
  if (c.empty()) return Status::Ok();
  return Status::InvalidArgument("contains the control character " + c);
}

std::string TypeName(const json& v) {
  if (v.is_number_integer()) return "an integer";
  if (v.is_number()) return "a number";
  return std::string("a") + (v.is_object() || v.is_array() ? "n " : " ") + v.type_name();
}

// Reads the fields of one JSON object, rejecting any it was not asked for.
class ObjectReader {
 public:
  ObjectReader(const json& obj, std::string where, const SpecLimits& limits)
      : obj_(obj), where_(std::move(where)), limits_(limits) {}

  Status Check() const {
    if (!obj_.is_object()) return Error("", "expected an object, got " + TypeName(obj_));
    return Status::Ok();
  }
  Status Error(std::string_view field, std::string_view what) const {
    std::string out = where_;
    if (!field.empty()) out += (out.empty() ? "" : ": ") + std::string(field);
    if (out.empty()) out = "job spec";
    return Status::InvalidArgument(out + ": " + std::string(what));
  }
  const json* Find(std::string_view field) {
    seen_.insert(std::string(field));
    auto it = obj_.find(field);
    return it == obj_.end() ? nullptr : &*it;
  }
  Status String(std::string_view field, bool required, std::string* out) {
    const json* v = Find(field);
    if (!v) return required ? Error(field, "required") : Status::Ok();
    if (!v->is_string()) return Error(field, "expected a string, got " + TypeName(*v));
    const auto& s = v->get_ref<const std::string&>();
    if (s.size() > limits_.max_string)
      return Error(field, "longer than the limit of " + std::to_string(limits_.max_string));
    if (Status c = NoControlChars(s); !c.ok()) return Error(field, c.message());
    *out = s;
    return Status::Ok();
  }
  Status Uint(std::string_view field, uint64_t min, uint64_t max, uint32_t* out) {
    const json* v = Find(field);
    if (!v) return Status::Ok();
    // A whole number written as a float (Python's json.dumps(2.0) is
    // "2.0") is that integer, as for built-in kernels' arguments.
    if (v->is_number_float()) {
      const double d = v->get<double>();
      if (std::isfinite(d) && std::trunc(d) == d && d >= static_cast<double>(min) &&
          d <= static_cast<double>(max)) {
        *out = static_cast<uint32_t>(d);
        return Status::Ok();
      }
      if (std::isfinite(d) && std::trunc(d) == d) {
        return Error(field,
                     "must be between " + std::to_string(min) + " and " + std::to_string(max));
      }
    }
    if (!v->is_number_integer()) return Error(field, "expected an integer, got " + TypeName(*v));
    if (v->is_number_unsigned() ? v->get<uint64_t>() < min || v->get<uint64_t>() > max
                                : v->get<int64_t>() < static_cast<int64_t>(min)) {
      return Error(field, "must be between " + std::to_string(min) + " and " + std::to_string(max));
    }
    *out = static_cast<uint32_t>(v->get<uint64_t>());
    return Status::Ok();
  }
  Status Bool(std::string_view field, bool* out) {
    const json* v = Find(field);
    if (!v) return Status::Ok();
    if (!v->is_boolean()) return Error(field, "expected true or false, got " + TypeName(*v));
    *out = v->get<bool>();
    return Status::Ok();
  }
  Status NonNegative(std::string_view field, double* out) {
    const json* v = Find(field);
    if (!v) return Status::Ok();
    if (!v->is_number()) return Error(field, "expected a number, got " + TypeName(*v));
    double d = v->get<double>();
    if (!(d >= 0) || !std::isfinite(d)) return Error(field, "must be a finite number >= 0");
    *out = d;
    return Status::Ok();
  }
  // Call last: any field nobody asked for is an error.
  Status NoExtraFields() const {
    for (auto it = obj_.begin(); it != obj_.end(); ++it) {
      if (!seen_.count(it.key())) return Error("", "unknown field '" + it.key() + "'");
    }
    return Status::Ok();
  }

 private:
  const json& obj_;
  std::string where_;
  const SpecLimits& limits_;
  std::set<std::string> seen_;
};

// "requires": {"accel": "910c", ...}, the labels a device must have.
Status ParseRequires(ObjectReader& r, Labels* out) {
  const json* v = r.Find("requires");
  if (!v) return Status::Ok();
  if (!v->is_object()) {
    return r.Error("requires",
                   "expected an object like {\"accel\": \"910c\"}, got " + TypeName(*v));
  }
  if (v->size() > kMaxLabels) {
    return r.Error("requires", "more than " + std::to_string(kMaxLabels) + " labels");
  }
  for (auto it = v->begin(); it != v->end(); ++it) {
    if (Status k = CheckLabelKey(it.key()); !k.ok()) return r.Error("requires", k.message());
    const std::string field = "requires." + it.key();
    if (!it.value().is_string()) {
      return r.Error(field, "expected a string, got " + TypeName(it.value()));
    }
    const auto& value = it.value().get_ref<const std::string&>();
    if (Status c = CheckLabelValue(value); !c.ok()) return r.Error(field, c.message());
    RETURN_IF_ERROR(AddLabel(field, {it.key(), value}, out));
  }
  return Status::Ok();
}

Status ParseArgs(ObjectReader& r, const SpecLimits& limits, Args* out) {
  const json* v = r.Find("args");
  if (!v) return Status::Ok();
  if (!v->is_object()) return r.Error("args", "expected an object, got " + TypeName(*v));
  if (v->size() > limits.max_args) {
    return r.Error("args", "more than " + std::to_string(limits.max_args) + " arguments");
  }
  for (auto it = v->begin(); it != v->end(); ++it) {
    const json& a = it.value();
    if (it.key().size() > limits.max_string) {
      return r.Error("args",
                     "argument name longer than the limit of " + std::to_string(limits.max_string));
    }
    if (Status c = NoControlChars(it.key()); !c.ok()) {
      return r.Error("args", "argument name " + c.message());
    }
    std::string field = "args." + it.key();
    if (a.is_boolean())
      out->push_back({it.key(), a.get<bool>()});
    else if (a.is_number_integer() && !a.is_number_unsigned())
      out->push_back({it.key(), a.get<int64_t>()});
    else if (a.is_number_unsigned()) {
      if (a.get<uint64_t>() > static_cast<uint64_t>(INT64_MAX)) return r.Error(field, "too large");
      out->push_back({it.key(), static_cast<int64_t>(a.get<uint64_t>())});
    } else if (a.is_number_float())
      out->push_back({it.key(), a.get<double>()});
    else if (a.is_string()) {
      if (a.get_ref<const std::string&>().size() > limits.max_string) {
        return r.Error(field, "longer than the limit of " + std::to_string(limits.max_string));
      }
      if (Status c = NoControlChars(a.get_ref<const std::string&>()); !c.ok()) {
        return r.Error(field, c.message());
      }
      out->push_back({it.key(), a.get<std::string>()});
    } else {
      return r.Error(field, "expected a number, string or bool, got " + TypeName(a));
    }
  }
  return Status::Ok();
}

Status ParseTask(const json& j, size_t i, const SpecLimits& limits, TaskSpec* t) {
  std::string where = "tasks[" + std::to_string(i) + "]";
  if (j.is_object()) {
    auto id = j.find("id");
    if (id != j.end() && id->is_string() && id->get_ref<const std::string&>().size() <= 256 &&
        FirstControlChar(id->get_ref<const std::string&>()).empty()) {
      where += " '" + id->get<std::string>() + "'";
    }
  }
  ObjectReader r(j, where, limits);
  RETURN_IF_ERROR(r.Check());
  RETURN_IF_ERROR(r.String("id", true, &t->id));
  if (t->id.empty()) return r.Error("id", "must not be empty");
  RETURN_IF_ERROR(r.String("kernel", true, &t->kernel));
  if (t->kernel.empty()) return r.Error("kernel", "must not be empty");
  RETURN_IF_ERROR(r.String("submodel", false, &t->submodel));
  std::string core = "cube";
  t->core_given = r.Find("core") != nullptr;
  RETURN_IF_ERROR(r.String("core", false, &core));
  auto kind = ParseCoreKind(core);
  if (!kind) return r.Error("core", "unknown core kind '" + core + "' (cube, vector)");
  t->core = *kind;
  if (const json* in = r.Find("inputs")) {
    if (!in->is_array()) return r.Error("inputs", "expected an array, got " + TypeName(*in));
    if (in->size() > limits.max_inputs) {
      return r.Error("inputs", "more than " + std::to_string(limits.max_inputs) + " inputs");
    }
    for (size_t k = 0; k < in->size(); ++k) {
      const json& e = (*in)[k];
      if (!e.is_string()) {
        return r.Error("inputs[" + std::to_string(k) + "]",
                       "expected a task id string, got " + TypeName(e));
      }
      if (e.get_ref<const std::string&>().size() > limits.max_string) {
        return r.Error("inputs[" + std::to_string(k) + "]",
                       "longer than the limit of " + std::to_string(limits.max_string));
      }
      if (Status c = NoControlChars(e.get_ref<const std::string&>()); !c.ok()) {
        return r.Error("inputs[" + std::to_string(k) + "]", c.message());
      }
      t->inputs.push_back(e.get<std::string>());
    }
  }
  RETURN_IF_ERROR(ParseArgs(r, limits, &t->args));
  if (const json* c = r.Find("cost")) {
    ObjectReader cr(*c, where + ": cost", limits);
    RETURN_IF_ERROR(cr.Check());
    RETURN_IF_ERROR(cr.NonNegative("flops", &t->cost.flops));
    RETURN_IF_ERROR(cr.NonNegative("bytes", &t->cost.bytes));
    t->cost.bytes_given = c->contains("bytes");
    RETURN_IF_ERROR(cr.NoExtraFields());
  }
  if (const json* c = r.Find("collective")) {
    ObjectReader cr(*c, where + ": collective", limits);
    RETURN_IF_ERROR(cr.Check());
    CollectiveSpec cs;
    RETURN_IF_ERROR(cr.String("group", true, &cs.group));
    RETURN_IF_ERROR(cr.String("op", true, &cs.op));
    RETURN_IF_ERROR(cr.NonNegative("bytes", &cs.bytes));
    cs.bytes_given = c->contains("bytes");
    RETURN_IF_ERROR(cr.NoExtraFields());
    t->collective = std::move(cs);
  }
  RETURN_IF_ERROR(r.Uint("max_retries", 0, kMaxTaskRetries, &t->max_retries));
  if (const json* on = r.Find("retry_on")) {
    if (!on->is_array()) {
      return r.Error("retry_on", "expected an array of strings, got " + TypeName(*on));
    }
    if (on->size() > kMaxRetryOn) {
      return r.Error("retry_on", "more than " + std::to_string(kMaxRetryOn) + " entries");
    }
    for (size_t k = 0; k < on->size(); ++k) {
      const json& e = (*on)[k];
      const std::string field = "retry_on[" + std::to_string(k) + "]";
      if (!e.is_string()) return r.Error(field, "expected a string, got " + TypeName(e));
      const auto& s = e.get_ref<const std::string&>();
      if (s.empty()) return r.Error(field, "empty (leave retry_on out to retry any error)");
      if (s.size() > kMaxRetryOnBytes) {
        return r.Error(field, "longer than the limit of " + std::to_string(kMaxRetryOnBytes));
      }
      if (Status c = NoControlChars(s); !c.ok()) return r.Error(field, c.message());
      t->retry_on.push_back(s);
    }
  }
  RETURN_IF_ERROR(ParseRequires(r, &t->required));
  return r.NoExtraFields();
}

}  // namespace

Result<JobSpec> ParseJobSpec(std::string_view text, const SpecLimits& limits) {
  if (text.size() > limits.max_bytes) {
    return Status::ResourceExhausted("job spec: " + std::to_string(text.size()) +
                                     " bytes, over the limit of " +
                                     std::to_string(limits.max_bytes));
  }
  if (NestingDepth(text, limits.max_depth) > limits.max_depth) {
    return Status::InvalidArgument("job spec: nested deeper than the limit of " +
                                   std::to_string(limits.max_depth));
  }
  // Strict: a field given twice is an error, not "the last one wins".
  Result<json> parsed = ParseStrictJson(text);
  if (!parsed.ok()) {
    const std::string& m = parsed.status().message();
    const bool top = m.starts_with("invalid JSON") || m.starts_with("field '");
    return Status::InvalidArgument(top ? "job spec: " + m : m);
  }
  json root = std::move(parsed).value();
  JobSpec spec;
  ObjectReader r(root, "", limits);
  if (!root.is_object())
    return Status::InvalidArgument("job spec: expected an object, got " + TypeName(root));
  RETURN_IF_ERROR(r.String("name", false, &spec.name));
  RETURN_IF_ERROR(r.Uint("repeat", 1, limits.max_repeat, &spec.repeat));
  RETURN_IF_ERROR(r.Uint("weight", 1, 1'000'000, &spec.weight));
  RETURN_IF_ERROR(r.Bool("elastic", &spec.elastic));
  if (const json* sms = r.Find("submodels")) {
    if (!sms->is_array()) return r.Error("submodels", "expected an array, got " + TypeName(*sms));
    for (size_t i = 0; i < sms->size(); ++i) {
      ObjectReader sr((*sms)[i], "submodels[" + std::to_string(i) + "]", limits);
      RETURN_IF_ERROR(sr.Check());
      SubmodelSpec sm;
      RETURN_IF_ERROR(sr.String("name", true, &sm.name));
      std::string kind = "generic";
      RETURN_IF_ERROR(sr.String("kind", false, &kind));
      auto k = ParseSubmodelKind(kind);
      if (!k) {
        return sr.Error("kind", "unknown kind '" + kind +
                                    "' (encoder, pipeline_stage, expert, actor, reward, "
                                    "learner, generic)");
      }
      sm.kind = *k;
      RETURN_IF_ERROR(sr.Uint("devices", 0, 1'000'000, &sm.devices));
      RETURN_IF_ERROR(sr.Bool("elastic", &sm.elastic));
      RETURN_IF_ERROR(sr.NonNegative("state_bytes", &sm.state_bytes));
      RETURN_IF_ERROR(sr.Uint("state_shards", 1, 1'000'000, &sm.state_shards));
      RETURN_IF_ERROR(ParseRequires(sr, &sm.required));
      RETURN_IF_ERROR(sr.NoExtraFields());
      spec.submodels.push_back(std::move(sm));
    }
  }
  const json* tasks = r.Find("tasks");
  if (!tasks) return r.Error("tasks", "required");
  if (!tasks->is_array()) return r.Error("tasks", "expected an array, got " + TypeName(*tasks));
  if (tasks->size() > limits.max_tasks) {
    return Status::ResourceExhausted("tasks: " + std::to_string(tasks->size()) +
                                     " tasks, over the limit of " +
                                     std::to_string(limits.max_tasks));
  }
  spec.tasks.resize(tasks->size());
  for (size_t i = 0; i < tasks->size(); ++i) {
    RETURN_IF_ERROR(ParseTask((*tasks)[i], i, limits, &spec.tasks[i]));
  }
  RETURN_IF_ERROR(r.NoExtraFields());
  if (uint64_t runs = uint64_t{spec.repeat} * spec.tasks.size(); runs > limits.max_runs) {
    return Status::ResourceExhausted("job spec: " + std::to_string(spec.tasks.size()) +
                                     " tasks x repeat " + std::to_string(spec.repeat) + " = " +
                                     std::to_string(runs) + " task runs, over the limit of " +
                                     std::to_string(limits.max_runs));
  }
  return spec;
}

}  // namespace hmpmd
