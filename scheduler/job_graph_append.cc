// JobGraph: adding sub-models and tasks to a graph, the one checking path
// of Build (a whole job at once) and Append (a driver session's graph as it
// grows), so both refuse a fault with one message.
#include <algorithm>
#include <unordered_map>
#include <vector>

#include "hmpmd/protocol/builtin_args.h"
#include "hmpmd/scheduler/job_graph.h"
#include "hmpmd/scheduler/retry_rule.h"
#include "job_graph_checks.h"

namespace hmpmd {
namespace {

// Room for `more` after what `v` holds. An open graph grows a call at a
// time: reserving the exact size copied its whole task list on every append
// (a driver's 50,000 one-task submits held the controller's loop for
// minutes), so the capacity at least doubles.
template <typename T>
void GrowFor(std::vector<T>& v, size_t more) {
  if (v.size() + more > v.capacity()) v.reserve(std::max(v.size() + more, 2 * v.capacity()));
}

std::string Where(uint32_t index, const std::string& id) {
  return "tasks[" + std::to_string(index) + "] '" + id + "'";
}

// Driver tasks come from the wire, not through the JSON parser's checks,
// and ids and names are printed in one-line errors, listings and traces.
Status CheckText(const std::string& where, const std::string& text) {
  if (!IsUtf8(text)) return Status::InvalidArgument(where + ": is not valid UTF-8");
  if (std::string c = FirstControlChar(text); !c.empty()) {
    return Status::InvalidArgument(where + ": contains the control character " + c);
  }
  return Status::Ok();
}

// Finds one cycle among the tasks Kahn's algorithm could not order
// (indegree > 0) and returns it as "a -> b -> a".
std::string DescribeCycle(const std::vector<TaskSpec>& specs, const std::vector<GraphTask>& tasks,
                          const std::vector<uint32_t>& indegree) {
  uint32_t start = 0;
  while (indegree[start] == 0) ++start;
  // Walk backwards along inputs that are still blocked; we must revisit a node.
  std::vector<int> seen_at(tasks.size(), -1);
  std::vector<uint32_t> path;
  uint32_t cur = start;
  while (seen_at[cur] < 0) {
    seen_at[cur] = static_cast<int>(path.size());
    path.push_back(cur);
    for (uint32_t in : tasks[cur].inputs) {
      if (indegree[in] > 0) {
        cur = in;
        break;
      }
    }
  }
  std::vector<uint32_t> cycle(path.begin() + seen_at[cur], path.end());
  std::reverse(cycle.begin(), cycle.end());
  std::string out;
  for (uint32_t t : cycle) out += specs[t].id + " -> ";
  return out + specs[cycle.front()].id;
}

// Kahn's algorithm over a whole job's tasks: `*topo` gets a topological
// order (roots in index order, then consumers as they free up), or the
// error names a cycle that prevents one.
Status Order(const std::vector<TaskSpec>& specs, const std::vector<GraphTask>& tasks,
             std::vector<uint32_t>* topo) {
  const auto n = static_cast<uint32_t>(tasks.size());
  // Consumers of each task, in index order (as JobGraph keeps them).
  std::vector<uint32_t> start(n + 1, 0), consumers;
  for (const GraphTask& t : tasks) {
    for (uint32_t in : t.inputs) ++start[in + 1];
  }
  for (uint32_t i = 0; i < n; ++i) start[i + 1] += start[i];
  consumers.resize(start[n]);
  std::vector<uint32_t> next(start.begin(), start.end() - 1);
  std::vector<uint32_t> indegree(n);
  for (uint32_t i = 0; i < n; ++i) {
    indegree[i] = static_cast<uint32_t>(tasks[i].inputs.size());
    for (uint32_t in : tasks[i].inputs) consumers[next[in]++] = i;
    if (indegree[i] == 0) topo->push_back(i);
  }
  for (size_t head = 0; head < topo->size(); ++head) {
    const uint32_t t = (*topo)[head];
    for (uint32_t k = start[t]; k < start[t + 1]; ++k) {
      if (--indegree[consumers[k]] == 0) topo->push_back(consumers[k]);
    }
  }
  if (topo->size() == n) return Status::Ok();
  uint32_t first = 0;
  while (indegree[first] == 0) ++first;
  return Status::InvalidArgument(Where(first, specs[first].id) + ": inputs: cycle " +
                                 DescribeCycle(specs, tasks, indegree));
}

}  // namespace

int64_t JobGraph::Find(std::string_view id) const {
  auto it = ids_.find(std::string(id));
  return it == ids_.end() ? -1 : it->second;
}

Status JobGraph::Append(std::vector<SubmodelSpec> submodels, std::vector<TaskSpec> tasks) {
  if (!open_) return Status::InvalidArgument("job: not open; only a driver session's job grows");
  return Add(std::move(submodels), std::move(tasks));
}

Status JobGraph::MergeRequired(std::span<const SubmodelSpec> submodels, std::span<TaskSpec> tasks,
                               uint32_t first) const {
  auto find = [&](const std::string& name) -> const SubmodelSpec* {
    for (const SubmodelSpec& sm : submodels) {
      if (sm.name == name) return &sm;
    }
    auto it = submodel_ids_.find(name);
    return it == submodel_ids_.end() ? nullptr : &spec_.submodels[it->second];
  };
  for (uint32_t i = 0; i < tasks.size(); ++i) {
    TaskSpec& t = tasks[i];
    const SubmodelSpec* sm = find(t.submodel);
    if (sm == nullptr || sm->required.empty()) continue;
    for (const Label& l : sm->required) {
      for (const Label& own : t.required) {
        if (own.key == l.key && own.value != l.value) {
          return Status::InvalidArgument(Where(first + i, t.id) + ": requires: " + LabelText(own) +
                                         " conflicts with " + LabelText(l) +
                                         ", which its submodel '" + sm->name + "' requires");
        }
      }
      RETURN_IF_ERROR(AddLabel(Where(first + i, t.id) + ": requires", l, &t.required));
    }
  }
  return Status::Ok();
}

Status JobGraph::Add(std::vector<SubmodelSpec> submodels, std::vector<TaskSpec> tasks) {
  // A graph being built (not open) takes the whole job at once: an input
  // may name a task listed after it, so the order is found, and cycles
  // refused, here. An open graph takes tasks whose inputs came before them,
  // so no cycle can form and the order they come in is topological.
  const bool whole = !open_;
  for (TaskSpec& t : tasks) SizeCommByHint(t);  // live, as simulated
  const uint32_t first = size();
  const auto first_sm = static_cast<uint32_t>(spec_.submodels.size());
  // Check everything before changing anything.
  std::unordered_map<std::string, uint32_t> new_sm, new_ids, new_groups;
  for (uint32_t i = 0; i < submodels.size(); ++i) {
    const SubmodelSpec& sm = submodels[i];
    const std::string where = "submodels[" + std::to_string(first_sm + i) + "].name";
    if (sm.name.empty()) return Status::InvalidArgument(where + ": empty");
    RETURN_IF_ERROR(CheckText(where, sm.name));
    if (submodel_ids_.count(sm.name) || !new_sm.emplace(sm.name, first_sm + i).second) {
      return Status::InvalidArgument(where + ": duplicate '" + sm.name + "'");
    }
  }
  RETURN_IF_ERROR(MergeRequired(submodels, tasks, first));
  auto submodel_of = [&](const std::string& name) -> int64_t {
    if (auto it = submodel_ids_.find(name); it != submodel_ids_.end()) return it->second;
    if (auto it = new_sm.find(name); it != new_sm.end()) return it->second;
    return -1;
  };
  auto task_of = [&](const std::string& id) -> int64_t {
    if (auto it = ids_.find(id); it != ids_.end()) return it->second;
    if (auto it = new_ids.find(id); it != new_ids.end()) return it->second;
    return -1;
  };
  // Each task on its own first (ids, kernel, args), so that inputs may
  // name any of them below.
  new_ids.reserve(tasks.size());
  for (uint32_t i = 0; i < tasks.size(); ++i) {
    const TaskSpec& t = tasks[i];
    const uint32_t index = first + i;
    const std::string at = "tasks[" + std::to_string(index) + "]: ";
    if (t.id.empty()) return Status::InvalidArgument(Where(index, t.id) + ": id: empty");
    RETURN_IF_ERROR(CheckText(at + "id", t.id));
    RETURN_IF_ERROR(CheckText(at + "kernel", t.kernel));
    if (t.collective) RETURN_IF_ERROR(CheckText(at + "collective.group", t.collective->group));
    int64_t dup = -1;
    if (auto old = ids_.find(t.id); old != ids_.end()) {
      dup = old->second;
    } else if (auto [it, fresh] = new_ids.emplace(t.id, index); !fresh) {
      dup = it->second;
    }
    if (dup >= 0) {
      return Status::InvalidArgument(Where(index, t.id) + ": id: duplicate of tasks[" +
                                     std::to_string(dup) + "]");
    }
    if (t.kernel.empty()) return Status::InvalidArgument(Where(index, t.id) + ": kernel: empty");
    if (Status s = CheckBuiltinArgs(t.kernel, t.args); !s.ok()) {
      return Status::InvalidArgument(Where(index, t.id) + ": " + s.message());
    }
    for (const std::string& s : t.retry_on) RETURN_IF_ERROR(CheckText(at + "retry_on", s));
    RETURN_IF_ERROR(CheckRetryRule(t, Where(index, t.id)));
  }
  // Then their place in the graph: sub-model, inputs, collective group.
  std::vector<GraphTask> added(tasks.size());
  std::vector<std::pair<uint32_t, std::vector<uint32_t>>> repeated;  // kernel_inputs
  std::vector<CollectiveGroup> new_group_list;                       // local member indices
  GangView view;
  view.first_index = first;
  view.group.assign(tasks.size(), kNoGroup);
  view.inputs.resize(tasks.size());
  for (uint32_t i = 0; i < tasks.size(); ++i) {
    const TaskSpec& t = tasks[i];
    const uint32_t index = first + i;
    GraphTask& gt = added[i];
    const int64_t sm = submodel_of(t.submodel);
    if (sm < 0) {
      return Status::InvalidArgument(Where(index, t.id) + ": submodel: unknown submodel '" +
                                     t.submodel + "' (declare it under submodels)");
    }
    gt.submodel = static_cast<uint32_t>(sm);
    std::vector<uint32_t> order;
    for (const std::string& in : t.inputs) {
      if (in == t.id) {
        return Status::InvalidArgument(Where(index, t.id) +
                                       ": inputs: a task cannot consume itself");
      }
      const int64_t p = task_of(in);
      if (p < 0 || (!whole && p > index)) {
        return Status::InvalidArgument(
            Where(index, t.id) + ": inputs: unknown task '" + in + "'" +
            (whole ? "" : " (inputs must be submitted before their consumers)"));
      }
      const auto producer = static_cast<uint32_t>(p);
      order.push_back(producer);
      if (producer >= first) view.inputs[i].push_back(producer - first);
      if (std::find(gt.inputs.begin(), gt.inputs.end(), producer) == gt.inputs.end()) {
        gt.inputs.push_back(producer);
      }
    }
    if (order.size() != gt.inputs.size()) repeated.emplace_back(index, std::move(order));
    gt.is_comm = IsCommKernel(t.kernel);
    if (!t.collective) continue;
    const CollectiveSpec& c = *t.collective;
    if (c.group.empty()) {
      return Status::InvalidArgument(Where(index, t.id) + ": collective.group: empty");
    }
    if (!IsCollectiveKernel(c.op)) {
      return Status::InvalidArgument(Where(index, t.id) + ": collective.op: unknown op '" + c.op +
                                     "' (allreduce, allgather, reduce_scatter, alltoall, "
                                     "broadcast)");
    }
    if (group_ids_.count(c.group)) {
      return Status::InvalidArgument(Where(index, t.id) + ": collective.group: group '" + c.group +
                                     "' was completed by an earlier submit");
    }
    auto [it, fresh] = new_groups.emplace(c.group, static_cast<uint32_t>(new_group_list.size()));
    if (fresh) new_group_list.push_back({c.group, c.op, {}});
    CollectiveGroup& grp = new_group_list[it->second];
    if (grp.op != c.op) {
      return Status::InvalidArgument(Where(index, t.id) + ": collective.op: '" + c.op +
                                     "' differs from '" + grp.op + "' of group '" + c.group + "'");
    }
    grp.members.push_back(i);
    view.group[i] = it->second;
    gt.is_comm = true;
  }
  std::vector<uint32_t> topo;
  if (whole) RETURN_IF_ERROR(Order(tasks, added, &topo));
  // A gang whose members depend on each other could never start together.
  for (const CollectiveGroup& grp : new_group_list) {
    for (uint32_t m : grp.members) {
      for (uint32_t in : added[m].inputs) {
        if (in >= first && view.group[in - first] == view.group[m]) {
          return Status::InvalidArgument(Where(first + m, tasks[m].id) + ": inputs: depends on '" +
                                         tasks[in - first].id + "' of its own collective group '" +
                                         grp.name + "'");
        }
      }
    }
  }
  // Gangs must agree on their collective and must not wait for each other.
  view.tasks.reserve(tasks.size());
  for (const TaskSpec& t : tasks) view.tasks.push_back(&t);
  for (const CollectiveGroup& grp : new_group_list) view.members.push_back(grp.members);
  RETURN_IF_ERROR(CheckGangs(view));

  // Apply.
  for (SubmodelSpec& sm : submodels) {
    submodel_ids_.emplace(sm.name, static_cast<uint32_t>(spec_.submodels.size()));
    spec_.submodels.push_back(std::move(sm));
  }
  const auto first_group = static_cast<uint32_t>(groups_.size());
  for (CollectiveGroup& grp : new_group_list) {
    group_ids_.emplace(grp.name, static_cast<uint32_t>(groups_.size()));
    for (uint32_t& m : grp.members) m += first;
    groups_.push_back(std::move(grp));
  }
  GrowFor(tasks_, added.size());
  for (uint32_t i = 0; i < added.size(); ++i) {
    if (view.group[i] != kNoGroup) added[i].group = first_group + view.group[i];
    tasks_.push_back(std::move(added[i]));
  }
  for (uint32_t index = first; index < tasks_.size(); ++index) {
    for (uint32_t p : tasks_[index].inputs) tasks_[p].consumers.push_back(index);
    if (tasks_[index].inputs.empty()) roots_.push_back(index);
    if (!whole) topo_.push_back(index);
  }
  if (whole) topo_ = std::move(topo);
  for (auto& [index, order] : repeated) repeated_inputs_.emplace(index, std::move(order));
  if (ids_.empty()) {
    ids_ = std::move(new_ids);
  } else {
    ids_.merge(new_ids);
  }
  GrowFor(spec_.tasks, tasks.size());
  for (TaskSpec& t : tasks) spec_.tasks.push_back(std::move(t));
  return Status::Ok();
}

}  // namespace hmpmd
