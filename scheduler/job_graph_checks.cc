#include "job_graph_checks.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <string_view>
#include <utility>

namespace hmpmd {
namespace {

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

// Elements a member without inputs generates, as the worker does
// (worker/collective_kernels.cc): `n`, else `bytes` / 4, else 1024; -1 for
// a member with inputs, whose size is known only when it runs.
int64_t GeneratedElements(const TaskSpec& t) {
  if (!t.inputs.empty()) return -1;
  if (HasArg(t, "n")) return static_cast<int64_t>(ArgNumber(t.args, "n", 0));
  if (HasArg(t, "bytes")) return static_cast<int64_t>(ArgNumber(t.args, "bytes", 0)) / 4;
  return 1024;
}

// A member's checks against its group of `members` members.
Status CheckMember(const GangView& v, uint32_t i, size_t members) {
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
      const char* p = text.data();
      const char* end = p + text.size();
      while (p < end) {
        uint64_t x = 0;
        auto [next, ec] = std::from_chars(p, end, x);
        if (ec != std::errc() || (next < end && *next != ',')) {
          return Status::InvalidArgument(Where(v, i) + ": args.sizes: '" + text +
                                         "' is not a list of element counts like '4,4,8'");
        }
        sizes.push_back(x);
        total += x;
        p = next < end ? next + 1 : next;
      }
      if (sizes.size() != members) {
        return Status::InvalidArgument(
            Where(v, i) + ": args.sizes: " + std::to_string(sizes.size()) + " counts, but group '" +
            c.group + "' has " + std::to_string(members) + " members (one count per member)");
      }
      const int64_t n = GeneratedElements(t);
      if (n >= 0 && total != static_cast<uint64_t>(n)) {
        return Status::InvalidArgument(Where(v, i) + ": args.sizes: counts sum to " +
                                       std::to_string(total) + ", the member sends " +
                                       std::to_string(n) + " elements");
      }
    }
  }
  return Status::Ok();
}

Status CheckGroup(const GangView& v, const std::vector<uint32_t>& members) {
  const uint32_t first = members.front();
  const CollectiveSpec& c0 = *v.tasks[first]->collective;
  uint32_t sized = kNone;  // the first member whose element count is known
  for (uint32_t m : members) {
    const TaskSpec& t = *v.tasks[m];
    RETURN_IF_ERROR(CheckMember(v, m, members.size()));
    if (t.collective->bytes != c0.bytes) {
      return Status::InvalidArgument(
          Where(v, m) + ": collective.bytes: " + Num(t.collective->bytes) + " differs from " +
          Num(c0.bytes) + " of '" + v.tasks[first]->id + "' in group '" + c0.group +
          "' (the members move one payload)");
    }
    // Ring allreduce, allgather and reduce_scatter exchange equal blocks.
    if (t.kernel != "allreduce" && t.kernel != "allgather" && t.kernel != "reduce_scatter") {
      continue;
    }
    const int64_t n = GeneratedElements(t);
    if (n < 0) continue;
    if (sized == kNone) {
      sized = m;
    } else if (const int64_t n0 = GeneratedElements(*v.tasks[sized]); n != n0) {
      return Status::InvalidArgument(Where(v, m) + ": args: " + std::to_string(n) +
                                     " elements, but '" + v.tasks[sized]->id + "' of group '" +
                                     c0.group + "' has " + std::to_string(n0) + " (" + t.kernel +
                                     " members give the same size, args n or bytes)");
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
  for (const std::vector<uint32_t>& members : v.members) {
    if (!members.empty()) RETURN_IF_ERROR(CheckGroup(v, members));
  }
  return CheckGangOrder(v);
}

}  // namespace hmpmd
