// JobGraph's open form: a driver session's graph that grows by Append().
#include <algorithm>

#include "hmpmd/protocol/builtin_args.h"
#include "hmpmd/scheduler/job_graph.h"
#include "job_graph_checks.h"

namespace hmpmd {
namespace {

std::string Where(uint32_t index, const std::string& id) {
  return "tasks[" + std::to_string(index) + "] '" + id + "'";
}

}  // namespace

Result<std::shared_ptr<JobGraph>> JobGraph::BuildOpen(JobSpec spec) {
  if (!spec.tasks.empty()) return Status::InvalidArgument("tasks: an open job starts empty");
  if (spec.repeat != 1) return Status::InvalidArgument("repeat: an open job runs once");
  auto g = std::make_shared<JobGraph>();
  g->open_ = true;
  std::vector<SubmodelSpec> submodels = std::move(spec.submodels);
  spec.submodels.clear();
  g->spec_ = std::move(spec);
  SubmodelSpec def;
  def.name = "default";
  if (std::none_of(submodels.begin(), submodels.end(),
                   [](const SubmodelSpec& s) { return s.name == "default"; })) {
    submodels.insert(submodels.begin(), def);
  }
  RETURN_IF_ERROR(g->Append(std::move(submodels), {}));
  return g;
}

int64_t JobGraph::Find(std::string_view id) const {
  auto it = ids_.find(std::string(id));
  return it == ids_.end() ? -1 : it->second;
}

Status JobGraph::Append(std::vector<SubmodelSpec> submodels, std::vector<TaskSpec> tasks) {
  if (!open_) return Status::InvalidArgument("job: not open; only a driver session's job grows");
  for (TaskSpec& t : tasks) SizeCommByHint(t);  // live, as simulated
  const uint32_t first = size();
  const uint32_t first_sm = static_cast<uint32_t>(spec_.submodels.size());
  // Check everything before changing anything.
  std::unordered_map<std::string, uint32_t> new_sm, new_ids, new_groups;
  for (uint32_t i = 0; i < submodels.size(); ++i) {
    const SubmodelSpec& sm = submodels[i];
    const std::string where = "submodels[" + std::to_string(first_sm + i) + "]";
    if (sm.name.empty()) return Status::InvalidArgument(where + ".name: empty");
    if (!IsUtf8(sm.name)) return Status::InvalidArgument(where + ".name: is not valid UTF-8");
    if (std::string c = FirstControlChar(sm.name); !c.empty()) {
      return Status::InvalidArgument(where + ".name: contains the control character " + c);
    }
    if (submodel_ids_.count(sm.name) || !new_sm.emplace(sm.name, first_sm + i).second) {
      return Status::InvalidArgument(where + ".name: duplicate '" + sm.name + "'");
    }
  }
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
  std::vector<std::string> group_ops;  // of the groups new here, by order
  std::vector<uint32_t> group_of(tasks.size(), kNoGroup);
  for (uint32_t i = 0; i < tasks.size(); ++i) {
    const TaskSpec& t = tasks[i];
    const uint32_t index = first + i;
    if (t.id.empty()) return Status::InvalidArgument(Where(index, t.id) + ": id: empty");
    // Driver tasks come from the wire, not through the JSON parser's checks.
    for (const auto& [field, text] :
         {std::pair<const char*, const std::string*>{"id", &t.id},
          {"kernel", &t.kernel},
          {"collective.group", t.collective ? &t.collective->group : nullptr}}) {
      if (text == nullptr) continue;
      if (!IsUtf8(*text)) {
        return Status::InvalidArgument("tasks[" + std::to_string(index) + "]: " + field +
                                       ": is not valid UTF-8");
      }
      if (std::string c = FirstControlChar(*text); !c.empty()) {
        return Status::InvalidArgument("tasks[" + std::to_string(index) + "]: " + field +
                                       ": contains the control character " + c);
      }
    }
    if (int64_t dup = task_of(t.id); dup >= 0) {
      return Status::InvalidArgument(Where(index, t.id) + ": id: duplicate of tasks[" +
                                     std::to_string(dup) + "]");
    }
    if (t.kernel.empty()) return Status::InvalidArgument(Where(index, t.id) + ": kernel: empty");
    if (Status s = CheckBuiltinArgs(t.kernel, t.args); !s.ok()) {
      return Status::InvalidArgument(Where(index, t.id) + ": " + s.message());
    }
    if (submodel_of(t.submodel) < 0) {
      return Status::InvalidArgument(Where(index, t.id) + ": submodel: unknown submodel '" +
                                     t.submodel + "'");
    }
    for (const std::string& in : t.inputs) {
      if (in == t.id) {
        return Status::InvalidArgument(Where(index, t.id) +
                                       ": inputs: a task cannot consume itself");
      }
      if (task_of(in) < 0) {
        return Status::InvalidArgument(Where(index, t.id) + ": inputs: unknown task '" + in +
                                       "' (inputs must be submitted before their consumers)");
      }
    }
    if (t.collective) {
      const CollectiveSpec& c = *t.collective;
      if (c.group.empty()) {
        return Status::InvalidArgument(Where(index, t.id) + ": collective.group: empty");
      }
      if (!IsCollectiveKernel(c.op)) {
        return Status::InvalidArgument(Where(index, t.id) + ": collective.op: unknown op '" + c.op +
                                       "'");
      }
      if (group_ids_.count(c.group)) {
        return Status::InvalidArgument(Where(index, t.id) + ": collective.group: group '" +
                                       c.group + "' was completed by an earlier submit");
      }
      auto [it, fresh] = new_groups.emplace(c.group, static_cast<uint32_t>(group_ops.size()));
      if (fresh) group_ops.push_back(c.op);
      if (group_ops[it->second] != c.op) {
        return Status::InvalidArgument(Where(index, t.id) + ": collective.op: '" + c.op +
                                       "' differs from '" + group_ops[it->second] + "' of group '" +
                                       c.group + "'");
      }
      group_of[i] = it->second;
      for (const std::string& in : t.inputs) {
        auto p = new_ids.find(in);
        if (p != new_ids.end() && group_of[p->second - first] == it->second) {
          return Status::InvalidArgument(Where(index, t.id) + ": inputs: depends on '" + in +
                                         "' of its own collective group '" + c.group + "'");
        }
      }
    }
    new_ids.emplace(t.id, index);
  }

  // Gangs of this append (complete here) must agree and not wait for each other.
  GangView view;
  view.first_index = first;
  view.group = group_of;
  view.members.resize(group_ops.size());
  for (uint32_t i = 0; i < tasks.size(); ++i) {
    view.tasks.push_back(&tasks[i]);
    view.inputs.emplace_back();
    for (const std::string& in : tasks[i].inputs) {
      if (auto p = new_ids.find(in); p != new_ids.end())
        view.inputs.back().push_back(p->second - first);
    }
    if (group_of[i] != kNoGroup) view.members[group_of[i]].push_back(i);
  }
  RETURN_IF_ERROR(CheckGangs(view));

  // Apply.
  for (auto& sm : submodels) {
    submodel_ids_.emplace(sm.name, static_cast<uint32_t>(spec_.submodels.size()));
    spec_.submodels.push_back(std::move(sm));
  }
  const uint32_t first_group = static_cast<uint32_t>(groups_.size());
  for (uint32_t k = 0; k < group_ops.size(); ++k) groups_.push_back({"", group_ops[k], {}});
  tasks_.resize(first + tasks.size());
  for (uint32_t i = 0; i < tasks.size(); ++i) {
    TaskSpec& t = tasks[i];
    const uint32_t index = first + i;
    GraphTask& gt = tasks_[index];
    gt.submodel = static_cast<uint32_t>(submodel_of(t.submodel));
    std::vector<uint32_t> order;
    for (const std::string& in : t.inputs) {
      const uint32_t p = static_cast<uint32_t>(task_of(in));
      order.push_back(p);
      if (std::find(gt.inputs.begin(), gt.inputs.end(), p) == gt.inputs.end()) {
        gt.inputs.push_back(p);
        tasks_[p].consumers.push_back(index);
      }
    }
    if (order.size() != gt.inputs.size()) repeated_inputs_.emplace(index, std::move(order));
    gt.is_comm = IsCommKernel(t.kernel);
    if (group_of[i] != kNoGroup) {
      gt.group = first_group + group_of[i];
      gt.is_comm = true;
      CollectiveGroup& grp = groups_[gt.group];
      grp.name = t.collective->group;
      grp.members.push_back(index);
      group_ids_.emplace(grp.name, gt.group);
    }
    if (gt.inputs.empty()) roots_.push_back(index);
    topo_.push_back(index);  // inputs are always earlier tasks
    ids_.emplace(t.id, index);
    spec_.tasks.push_back(std::move(t));
  }
  return Status::Ok();
}

}  // namespace hmpmd
