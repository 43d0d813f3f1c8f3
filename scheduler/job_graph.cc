#include "hmpmd/scheduler/job_graph.h"

#include <algorithm>
#include <unordered_map>

#include "hmpmd/protocol/builtin_args.h"
#include "job_graph_checks.h"

namespace hmpmd {
namespace {

std::string Where(const JobSpec& spec, uint32_t i) {
  return "tasks[" + std::to_string(i) + "] '" + spec.tasks[i].id + "'";
}

// Finds one cycle among the tasks Kahn's algorithm could not order and
// returns it as "a -> b -> a".
std::string DescribeCycle(const JobSpec& spec, const std::vector<GraphTask>& tasks,
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
  for (uint32_t t : cycle) out += spec.tasks[t].id + " -> ";
  return out + spec.tasks[cycle.front()].id;
}

}  // namespace

std::string JobGraph::Describe(uint32_t i) const { return Where(spec_, i); }

Result<std::shared_ptr<const JobGraph>> JobGraph::Build(JobSpec spec) {
  if (spec.tasks.empty()) return Status::InvalidArgument("tasks: the job has no tasks");
  if (spec.repeat == 0) return Status::InvalidArgument("repeat: must be at least 1");
  for (TaskSpec& t : spec.tasks) SizeCommByHint(t);  // live, as simulated

  auto g = std::make_shared<JobGraph>();
  std::unordered_map<std::string, uint32_t> submodel_index;
  for (uint32_t i = 0; i < spec.submodels.size(); ++i) {
    const SubmodelSpec& sm = spec.submodels[i];
    if (sm.name.empty()) {
      return Status::InvalidArgument("submodels[" + std::to_string(i) + "].name: empty");
    }
    if (!submodel_index.emplace(sm.name, i).second) {
      return Status::InvalidArgument("submodels[" + std::to_string(i) + "].name: duplicate '" +
                                     sm.name + "'");
    }
  }

  std::unordered_map<std::string, uint32_t> index;
  index.reserve(spec.tasks.size());
  for (uint32_t i = 0; i < spec.tasks.size(); ++i) {
    const TaskSpec& t = spec.tasks[i];
    if (t.id.empty()) return Status::InvalidArgument(Where(spec, i) + ": id: empty");
    auto [it, fresh] = index.emplace(t.id, i);
    if (!fresh) {
      return Status::InvalidArgument(Where(spec, i) + ": id: duplicate of tasks[" +
                                     std::to_string(it->second) + "]");
    }
    if (t.kernel.empty()) return Status::InvalidArgument(Where(spec, i) + ": kernel: empty");
    if (Status s = CheckBuiltinArgs(t.kernel, t.args); !s.ok()) {
      return Status::InvalidArgument(Where(spec, i) + ": " + s.message());
    }
  }

  g->tasks_.resize(spec.tasks.size());
  std::unordered_map<std::string, uint32_t> group_index;
  for (uint32_t i = 0; i < spec.tasks.size(); ++i) {
    const TaskSpec& t = spec.tasks[i];
    GraphTask& gt = g->tasks_[i];
    auto sm = submodel_index.find(t.submodel);
    if (sm == submodel_index.end()) {
      if (t.submodel != "default") {
        return Status::InvalidArgument(Where(spec, i) + ": submodel: unknown submodel '" +
                                       t.submodel + "' (declare it under submodels)");
      }
      SubmodelSpec def;
      def.name = "default";
      spec.submodels.push_back(def);
      sm = submodel_index.emplace("default", spec.submodels.size() - 1).first;
    }
    gt.submodel = sm->second;
    std::vector<uint32_t> order;
    for (const std::string& in : t.inputs) {
      auto p = index.find(in);
      if (p == index.end()) {
        return Status::InvalidArgument(Where(spec, i) + ": inputs: unknown task '" + in + "'");
      }
      if (p->second == i) {
        return Status::InvalidArgument(Where(spec, i) + ": inputs: a task cannot consume itself");
      }
      order.push_back(p->second);
      if (std::find(gt.inputs.begin(), gt.inputs.end(), p->second) == gt.inputs.end()) {
        gt.inputs.push_back(p->second);
      }
    }
    if (order.size() != gt.inputs.size()) g->repeated_inputs_.emplace(i, std::move(order));
    gt.is_comm = IsCommKernel(t.kernel);
    if (t.collective) {
      const CollectiveSpec& c = *t.collective;
      if (c.group.empty()) {
        return Status::InvalidArgument(Where(spec, i) + ": collective.group: empty");
      }
      if (!IsCollectiveKernel(c.op)) {
        return Status::InvalidArgument(Where(spec, i) + ": collective.op: unknown op '" + c.op +
                                       "' (allreduce, allgather, reduce_scatter, alltoall, "
                                       "broadcast)");
      }
      auto [git, fresh] = group_index.emplace(c.group, g->groups_.size());
      if (fresh) g->groups_.push_back({c.group, c.op, {}});
      CollectiveGroup& grp = g->groups_[git->second];
      if (grp.op != c.op) {
        return Status::InvalidArgument(Where(spec, i) + ": collective.op: '" + c.op +
                                       "' differs from '" + grp.op + "' of group '" + c.group +
                                       "'");
      }
      grp.members.push_back(i);
      gt.group = git->second;
      gt.is_comm = true;
    }
  }
  for (uint32_t i = 0; i < g->tasks_.size(); ++i) {
    for (uint32_t in : g->tasks_[i].inputs) g->tasks_[in].consumers.push_back(i);
  }

  // Kahn's algorithm: a topological order, or the cycle that prevents one.
  std::vector<uint32_t> indegree(g->tasks_.size());
  for (uint32_t i = 0; i < g->tasks_.size(); ++i) {
    indegree[i] = static_cast<uint32_t>(g->tasks_[i].inputs.size());
    if (indegree[i] == 0) g->roots_.push_back(i);
  }
  g->topo_ = g->roots_;
  for (size_t head = 0; head < g->topo_.size(); ++head) {
    for (uint32_t c : g->tasks_[g->topo_[head]].consumers) {
      if (--indegree[c] == 0) g->topo_.push_back(c);
    }
  }
  if (g->topo_.size() != g->tasks_.size()) {
    uint32_t first = 0;
    while (indegree[first] == 0) ++first;
    return Status::InvalidArgument(Where(spec, first) + ": inputs: cycle " +
                                   DescribeCycle(spec, g->tasks_, indegree));
  }
  // A gang whose members depend on each other could never start together.
  for (const CollectiveGroup& grp : g->groups_) {
    for (uint32_t m : grp.members) {
      for (uint32_t in : g->tasks_[m].inputs) {
        if (g->tasks_[in].group == g->tasks_[m].group) {
          return Status::InvalidArgument(Where(spec, m) + ": inputs: depends on '" +
                                         spec.tasks[in].id + "' of its own collective group '" +
                                         grp.name + "'");
        }
      }
    }
  }
  // Gangs must agree on their collective and must not wait for each other.
  GangView view;
  view.tasks.reserve(spec.tasks.size());
  for (uint32_t i = 0; i < g->tasks_.size(); ++i) {
    view.tasks.push_back(&spec.tasks[i]);
    view.group.push_back(g->tasks_[i].group);
    const std::span<const uint32_t> in = g->kernel_inputs(i);
    view.inputs.emplace_back(in.begin(), in.end());
  }
  for (const CollectiveGroup& grp : g->groups_) view.members.push_back(grp.members);
  RETURN_IF_ERROR(CheckGangs(view));
  g->spec_ = std::move(spec);
  return std::shared_ptr<const JobGraph>(std::move(g));
}

}  // namespace hmpmd
