#include "hmpmd/scheduler/job_graph.h"

#include <algorithm>

namespace hmpmd {
namespace {

// The sub-model a task that names none runs in.
SubmodelSpec DefaultSubmodel() {
  SubmodelSpec def;
  def.name = "default";
  return def;
}

bool DeclaresDefault(const std::vector<SubmodelSpec>& submodels) {
  return std::any_of(submodels.begin(), submodels.end(),
                     [](const SubmodelSpec& s) { return s.name == "default"; });
}

}  // namespace

std::string JobGraph::Describe(uint32_t i) const {
  return "tasks[" + std::to_string(i) + "] '" + spec_.tasks[i].id + "'";
}

Result<std::shared_ptr<const JobGraph>> JobGraph::Build(JobSpec spec) {
  if (spec.tasks.empty()) return Status::InvalidArgument("tasks: the job has no tasks");
  if (spec.repeat == 0) return Status::InvalidArgument("repeat: must be at least 1");
  std::vector<SubmodelSpec> submodels = std::move(spec.submodels);
  std::vector<TaskSpec> tasks = std::move(spec.tasks);
  spec.submodels.clear();
  spec.tasks.clear();
  if (!DeclaresDefault(submodels) && std::any_of(tasks.begin(), tasks.end(), [](const TaskSpec& t) {
        return t.submodel == "default";
      })) {
    submodels.push_back(DefaultSubmodel());
  }
  auto g = std::make_shared<JobGraph>();
  g->spec_ = std::move(spec);
  RETURN_IF_ERROR(g->Add(std::move(submodels), std::move(tasks)));
  // It never grows, so the names only Append looks up go.
  g->ids_ = {};
  g->submodel_ids_ = {};
  g->group_ids_ = {};
  return std::shared_ptr<const JobGraph>(std::move(g));
}

Result<std::shared_ptr<JobGraph>> JobGraph::BuildOpen(JobSpec spec) {
  if (!spec.tasks.empty()) return Status::InvalidArgument("tasks: an open job starts empty");
  if (spec.repeat != 1) return Status::InvalidArgument("repeat: an open job runs once");
  auto g = std::make_shared<JobGraph>();
  g->open_ = true;
  std::vector<SubmodelSpec> submodels = std::move(spec.submodels);
  spec.submodels.clear();
  g->spec_ = std::move(spec);
  if (!DeclaresDefault(submodels)) submodels.insert(submodels.begin(), DefaultSubmodel());
  RETURN_IF_ERROR(g->Append(std::move(submodels), {}));
  return g;
}

}  // namespace hmpmd
