#include "job_graph_checks.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <string_view>
#include <utility>

namespace hmpmd {
namespace {

// A member sends at most 2^28 elements (args.n's limit, builtin_args.cc).
constexpr uint64_t kMaxSizesCount = uint64_t{1} << 28;

constexpr uint32_t kNone = UINT32_MAX;

std::string Where(const GangView& v, uint32_t i) {
  return "tasks[" + std::to_string(v.first_index + i) + "] '" + v.tasks[i]->id + "'";
}

bool HasArg(const TaskSpec& t, std::string_view name) {
  return std::any_of(t.args.begin(), t.args.end(), [&](const Arg& a) { return a.name == name; });
}

// A number as the spec wrote it: 1024, not 1024.000000.
std::string Num(double x) {
  if (std::trunc(x) == x && std::fabs(x) < 9e15) return std::to_string(static_cast<int64_t>(x));
  return std::to_string(x);
}

// What a task's outputs hold on a worker, as the built-in kernels make them
// (worker/builtin_kernels.cc, gemm_kernel.cc, elementwise_kernels.cc,
// collective_kernels.cc): `buffers` buffers of `bytes` bytes in all;
// unknown (known == false) when only the run tells: a worker's own kernel,
// add or scale of real inputs, a gemm sized by cost.flops alone, an input
// outside the view.
struct Output {
  bool known = false;
  uint32_t buffers = 0;
  int64_t bytes = 0;
};

// Parses alltoall `sizes` ("a,b,..."): false when it is not such a list.
bool ParseSizes(const std::string& text, std::vector<uint64_t>* sizes, uint64_t* total) {
  const char* p = text.data();
  const char* end = p + text.size();
  *total = 0;
  while (p < end) {
    uint64_t x = 0;
    auto [next, ec] = std::from_chars(p, end, x);
    // A comma must be followed by a count ("1,3," is not a list).
    if (ec != std::errc() || (next < end && (*next != ',' || next + 1 == end))) return false;
    // A count beyond any member's elements; also keeps the sum from
    // wrapping (a wrapped sum once matched and crashed the worker).
    if (x > kMaxSizesCount) return false;
    sizes->push_back(x);
    *total += x;
    p = next < end ? next + 1 : next;
  }
  return true;
}

std::string StringArg(const TaskSpec& t, std::string_view name) {
  for (const Arg& a : t.args) {
    if (a.name == name && std::holds_alternative<std::string>(a.value)) {
      return std::get<std::string>(a.value);
    }
  }
  return "";
}

// Outputs of every task and the elements each collective member sends,
// computed on demand (memoized, iterative: a chain of sends may be a
// million deep). Call after CheckGangOrder: it relies on gangs not
// waiting for each other.
class Outputs {
 public:
  explicit Outputs(const GangView& v)
      : v_(v),
        memo_(v.tasks.size()),
        state_(v.tasks.size(), 0),
        expanded_(v.members.size(), 0),
        counts_(v.members.size()) {}

  // The buffers a task's kernel receives: its inputs' outputs, in order.
  Output In(uint32_t t) {
    Output in{true, 0, 0};
    if (!AllInView(t)) return Output{};
    for (uint32_t p : v_.inputs[t]) {
      const Output o = Of(p);
      if (!o.known) return Output{};
      in.buffers += o.buffers;
      in.bytes += o.bytes;
    }
    return in;
  }
  // Elements member `i` sends, as the worker takes them: its inputs' data
  // when they hold any buffer (ordering-only inputs such as a spin hold
  // none), else it generates `n`, else `bytes` / 4, else 1024; -1 when
  // only the run tells.
  int64_t Elements(uint32_t i) {
    const TaskSpec& t = *v_.tasks[i];
    if (!t.inputs.empty()) {
      const Output in = In(i);
      if (!in.known) return -1;
      if (in.buffers > 0) return in.bytes / 4;
    }
    if (HasArg(t, "n")) return static_cast<int64_t>(ArgNumber(t.args, "n", 0));
    if (HasArg(t, "bytes")) return static_cast<int64_t>(ArgNumber(t.args, "bytes", 0)) / 4;
    return 1024;
  }

 private:
  // Inputs outside the view (JobGraph::Append) are left out of v_.inputs,
  // which lists them as the kernel reads them, repeats included.
  bool AllInView(uint32_t t) const { return v_.tasks[t]->inputs.size() == v_.inputs[t].size(); }
  // A task whose outputs depend on what its inputs (a collective: its
  // group's members' inputs) hold.
  bool ReadsInputs(uint32_t t) const {
    const TaskSpec& s = *v_.tasks[t];
    return v_.group[t] != kNone || s.kernel == "send" || s.kernel == "add" || s.kernel == "scale";
  }
  Output Of(uint32_t root) {
    if (state_[root] == 1) return Output{};  // not reached on an acyclic view
    std::vector<uint32_t> stack{root};
    while (!stack.empty()) {
      const uint32_t t = stack.back();
      if (state_[t] == 2) {
        stack.pop_back();
        continue;
      }
      if (state_[t] == 0 && ReadsInputs(t)) {
        state_[t] = 1;  // inputs first (a gang's: all its members', once)
        const uint32_t g = v_.group[t];
        if (g == kNone) {
          Push(t, &stack);
        } else if (!expanded_[g]) {
          expanded_[g] = 1;
          for (uint32_t m : v_.members[g]) Push(m, &stack);
        }
        continue;
      }
      memo_[t] = Own(t);
      state_[t] = 2;
      stack.pop_back();
    }
    return memo_[root];
  }
  void Push(uint32_t t, std::vector<uint32_t>* stack) const {
    for (uint32_t p : v_.inputs[t]) {
      if (state_[p] == 0) stack->push_back(p);
    }
  }
  Output Own(uint32_t t) {
    const TaskSpec& s = *v_.tasks[t];
    if (v_.group[t] != kNone) return OfMember(t);
    if (s.kernel == "noop" || s.kernel == "spin" || s.kernel == "sleep") return {true, 0, 0};
    if (s.kernel == "gemm") {
      if (!HasArg(s, "m") || !HasArg(s, "n")) return Output{};
      return {true, 1,
              static_cast<int64_t>(ArgNumber(s.args, "m", 0) * ArgNumber(s.args, "n", 0)) * 4};
    }
    if (!ReadsInputs(t)) return Output{};  // a worker's own kernel
    const Output in = In(t);
    if (!in.known) return Output{};
    if (s.kernel == "send") {
      // Hands its inputs on; without any, `bytes` bytes (default 4096).
      if (in.buffers > 0) return in;
      return {true, 1,
              HasArg(s, "bytes") ? static_cast<int64_t>(ArgNumber(s.args, "bytes", 0)) : 4096};
    }
    // add, scale: real inputs may set the size; ordering-only edges do not.
    if (in.buffers > 0) return Output{};
    return {true, 1, static_cast<int64_t>(ArgNumber(s.args, "n", 1024)) * 4};
  }
  // A collective member's output: one buffer, by its op and rank (its
  // place among the group's members).
  Output OfMember(uint32_t t) {
    const TaskSpec& s = *v_.tasks[t];
    if (!IsCollectiveKernel(s.kernel)) return Output{};
    const std::vector<uint32_t>& members = v_.members[v_.group[t]];
    const uint64_t p = members.size();
    const uint64_t rank =
        static_cast<uint64_t>(std::find(members.begin(), members.end(), t) - members.begin());
    std::vector<int64_t>& counts = counts_[v_.group[t]];  // the group's, once
    if (counts.empty()) {
      for (uint32_t m : members) counts.push_back(Elements(m));
    }
    if (std::any_of(counts.begin(), counts.end(), [](int64_t c) { return c < 0; })) {
      return Output{};
    }
    const auto mine = static_cast<uint64_t>(counts[rank]);
    uint64_t elements = 0;
    if (s.kernel == "allreduce") {
      elements = mine;
    } else if (s.kernel == "allgather") {
      elements = mine * p;
    } else if (s.kernel == "reduce_scatter") {
      elements = p < 2 ? mine : mine * (rank + 1) / p - mine * rank / p;
    } else if (s.kernel == "broadcast") {
      const double root = ArgNumber(s.args, "root", 0);
      if (!(root >= 0 && root < static_cast<double>(p))) return Output{};
      elements = static_cast<uint64_t>(counts[static_cast<size_t>(root)]);
    } else {  // alltoall: block `rank` of every member's split
      for (uint64_t r = 0; r < p; ++r) {
        const uint64_t n = static_cast<uint64_t>(counts[r]);
        const std::string text = StringArg(*v_.tasks[members[r]], "sizes");
        if (text.empty()) {
          elements += n * (rank + 1) / p - n * rank / p;
          continue;
        }
        std::vector<uint64_t> sizes;
        uint64_t total = 0;
        if (!ParseSizes(text, &sizes, &total) || sizes.size() != p || total != n) return Output{};
        elements += sizes[rank];
      }
    }
    return {true, 1, static_cast<int64_t>(elements * 4)};
  }

  const GangView& v_;
  std::vector<Output> memo_;
  std::vector<uint8_t> state_;                // 0 new, 1 inputs pending, 2 done
  std::vector<uint8_t> expanded_;             // per group: its inputs pushed
  std::vector<std::vector<int64_t>> counts_;  // per group: Elements() of its members
};

// Where a member's element count comes from, for messages.
std::string Source(const TaskSpec& t, Outputs& outputs, uint32_t i) {
  if (!t.inputs.empty() && outputs.In(i).buffers > 0) return " (the data of its inputs)";
  return "";
}

// A member's checks against its group of `members` members.
Status CheckMember(const GangView& v, uint32_t i, size_t members, Outputs& outputs) {
  const TaskSpec& t = *v.tasks[i];
  const CollectiveSpec& c = *t.collective;
  if (!IsCollectiveKernel(t.kernel)) return Status::Ok();  // a worker's own kernel
  if (t.kernel != c.op) {
    return Status::InvalidArgument(Where(v, i) + ": collective.op: '" + c.op +
                                   "' differs from the task's kernel '" + t.kernel + "'");
  }
  if (t.kernel == "broadcast" && ArgNumber(t.args, "root", 0) >= static_cast<double>(members)) {
    return Status::InvalidArgument(
        Where(v, i) + ": args.root: " + Num(ArgNumber(t.args, "root", 0)) +
        " is not a rank of group '" + c.group + "' (" + std::to_string(members) +
        " members, ranks 0 to " + std::to_string(members - 1) + ")");
  }
  if (t.kernel == "alltoall") {
    for (const Arg& a : t.args) {
      if (a.name != "sizes" || !std::holds_alternative<std::string>(a.value)) continue;
      const std::string& text = std::get<std::string>(a.value);
      if (text.empty()) continue;  // the worker splits evenly
      std::vector<uint64_t> sizes;
      uint64_t total = 0;
      if (!ParseSizes(text, &sizes, &total)) {
        return Status::InvalidArgument(Where(v, i) + ": args.sizes: '" + text +
                                       "' is not a list of element counts like '4,4,8', each at "
                                       "most 268435456");
      }
      if (sizes.size() != members) {
        return Status::InvalidArgument(
            Where(v, i) + ": args.sizes: " + std::to_string(sizes.size()) + " counts, but group '" +
            c.group + "' has " + std::to_string(members) + " members (one count per member)");
      }
      const int64_t n = outputs.Elements(i);
      if (n >= 0 && total != static_cast<uint64_t>(n)) {
        return Status::InvalidArgument(Where(v, i) + ": args.sizes: counts sum to " +
                                       std::to_string(total) + ", the member sends " +
                                       std::to_string(n) + " elements" + Source(t, outputs, i));
      }
    }
  }
  return Status::Ok();
}

Status CheckGroup(const GangView& v, const std::vector<uint32_t>& members, Outputs& outputs) {
  const uint32_t first = members.front();
  const CollectiveSpec& c0 = *v.tasks[first]->collective;
  uint32_t sized = kNone;  // the first member whose element count is known
  for (uint32_t m : members) {
    const TaskSpec& t = *v.tasks[m];
    RETURN_IF_ERROR(CheckMember(v, m, members.size(), outputs));
    if (t.collective->bytes != c0.bytes) {
      return Status::InvalidArgument(
          Where(v, m) + ": collective.bytes: " + Num(t.collective->bytes) + " differs from " +
          Num(c0.bytes) + " of '" + v.tasks[first]->id + "' in group '" + c0.group +
          "' (the members move one payload)");
    }
    // Each broadcast member reads `root` on its own: members that disagree
    // each kept their own data and the job succeeded (a wrong result).
    if (t.kernel == "broadcast" && v.tasks[first]->kernel == "broadcast" &&
        ArgNumber(t.args, "root", 0) != ArgNumber(v.tasks[first]->args, "root", 0)) {
      return Status::InvalidArgument(
          Where(v, m) + ": args.root: " + Num(ArgNumber(t.args, "root", 0)) + " differs from " +
          Num(ArgNumber(v.tasks[first]->args, "root", 0)) + " of '" + v.tasks[first]->id +
          "' in group '" + c0.group + "' (the members broadcast from one rank)");
    }
    // Ring allreduce, allgather and reduce_scatter exchange equal blocks.
    if (t.kernel != "allreduce" && t.kernel != "allgather" && t.kernel != "reduce_scatter") {
      continue;
    }
    const int64_t n = outputs.Elements(m);
    if (n < 0) continue;
    if (sized == kNone) {
      sized = m;
    } else if (const int64_t n0 = outputs.Elements(sized); n != n0) {
      return Status::InvalidArgument(
          Where(v, m) + (Source(t, outputs, m).empty() ? ": args: " : ": inputs: ") +
          std::to_string(n) + " elements" + Source(t, outputs, m) + ", but '" + v.tasks[sized]->id +
          "' of group '" + c0.group + "' has " + std::to_string(n0) +
          Source(*v.tasks[sized], outputs, sized) + " (" + t.kernel +
          " members give the same size: args n or bytes, or inputs of that size)");
    }
  }
  return Status::Ok();
}

// The graph with each group contracted to one node must be acyclic.
Status CheckGangOrder(const GangView& v) {
  const uint32_t n = static_cast<uint32_t>(v.tasks.size());
  const uint32_t nodes = n + static_cast<uint32_t>(v.members.size());
  auto node = [&](uint32_t t) { return v.group[t] == kNone ? t : n + v.group[t]; };
  // Incoming edges (producer task, consumer task) per node.
  std::vector<std::vector<std::pair<uint32_t, uint32_t>>> in(nodes);
  std::vector<std::vector<uint32_t>> out(nodes);
  std::vector<uint32_t> indegree(nodes, 0);
  for (uint32_t t = 0; t < n; ++t) {
    for (uint32_t p : v.inputs[t]) {
      in[node(t)].push_back({p, t});
      out[node(p)].push_back(node(t));
      ++indegree[node(t)];
    }
  }
  std::vector<uint32_t> ready;
  for (uint32_t x = 0; x < nodes; ++x) {
    if (indegree[x] == 0) ready.push_back(x);
  }
  uint32_t done = 0;
  while (!ready.empty()) {
    const uint32_t x = ready.back();
    ready.pop_back();
    ++done;
    for (uint32_t y : out[x]) {
      if (--indegree[y] == 0) ready.push_back(y);
    }
  }
  if (done == nodes) return Status::Ok();
  // Walk backwards along blocked edges from a blocked group until a node repeats.
  uint32_t cur = 0;
  while (indegree[cur] == 0) ++cur;
  std::vector<int64_t> seen_at(nodes, -1);
  std::vector<std::pair<uint32_t, uint32_t>> path;  // edges, walked backwards
  while (seen_at[cur] < 0) {
    seen_at[cur] = static_cast<int64_t>(path.size());
    for (const auto& e : in[cur]) {
      if (indegree[node(e.first)] > 0) {
        path.push_back(e);
        cur = node(e.first);
        break;
      }
    }
  }
  std::vector<std::pair<uint32_t, uint32_t>> cycle(path.begin() + seen_at[cur], path.end());
  std::reverse(cycle.begin(), cycle.end());
  // Start at an edge out of a group, so the text begins and ends at a gang.
  auto from_group = std::find_if(cycle.begin(), cycle.end(),
                                 [&](const auto& e) { return v.group[e.first] != kNone; });
  std::rotate(cycle.begin(), from_group, cycle.end());
  auto gang = [&](uint32_t member, uint32_t with) {
    return " (gang '" + v.tasks[member]->collective->group + "' with " + v.tasks[with]->id + ")";
  };
  std::string text = v.tasks[cycle.front().first]->id;
  for (size_t k = 0; k < cycle.size(); ++k) {
    const uint32_t c = cycle[k].second;
    const uint32_t next = cycle[(k + 1) % cycle.size()].first;
    text += " -> " + v.tasks[c]->id;
    if (c != next) text += gang(c, next);
  }
  return Status::InvalidArgument(Where(v, cycle.back().second) +
                                 ": inputs: collective gangs wait for each other: " + text +
                                 "; a gang starts only when all its members can");
}

}  // namespace

Status CheckGangs(const GangView& v) {
  for (uint32_t i = 0; i < v.tasks.size(); ++i) {
    const TaskSpec& t = *v.tasks[i];
    if (v.group[i] == kNone && IsCollectiveKernel(t.kernel)) {
      return Status::InvalidArgument(Where(v, i) + ": collective: required: '" + t.kernel +
                                     "' runs among the members of a group ({\"group\": ..., "
                                     "\"op\": \"" +
                                     t.kernel + "\"})");
    }
  }
  // Order first: the members' sizes follow their inputs through earlier gangs.
  RETURN_IF_ERROR(CheckGangOrder(v));
  Outputs outputs(v);
  for (const std::vector<uint32_t>& members : v.members) {
    if (!members.empty()) RETURN_IF_ERROR(CheckGroup(v, members, outputs));
  }
  return Status::Ok();
}

}  // namespace hmpmd
