// JobGraph: a job spec checked for structure and turned into dense indices.
//
// Build() rejects duplicate ids, unknown inputs and submodels, cycles and
// inconsistent collectives, with one line naming the task and the field.
// Build and Append check through one path (job_graph_append.cc), so a
// fault reads the same in a job spec and in a driver session.
// Kernel names are not checked here: which kernels exist depends on the
// workers (live) or on the built-in set (simulation).
// Thread-safety: a graph from Build() is immutable; share it freely. An
// open graph (BuildOpen(), a driver session) grows by Append() on the thread
// that owns its Scheduler; other threads must read a copy of it.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "hmpmd/protocol/job_spec.h"
#include "hmpmd/protocol/status.h"

namespace hmpmd {

inline constexpr uint32_t kNoGroup = UINT32_MAX;

struct GraphTask {
  uint32_t submodel = 0;            // index into spec().submodels
  std::vector<uint32_t> inputs;     // producer indices, deduplicated
  std::vector<uint32_t> consumers;  // consumer indices
  uint32_t group = kNoGroup;        // collective gang, index into groups()
  bool is_comm = false;             // communication kernel (send, collectives)
};

struct CollectiveGroup {
  std::string name;
  std::string op;
  std::vector<uint32_t> members;  // task indices, spec order
};

class JobGraph {
 public:
  // Takes the spec; adds an implicit "default" submodel (after the declared
  // ones) when a task uses it. A task's inputs may come before or after it.
  static Result<std::shared_ptr<const JobGraph>> Build(JobSpec spec);
  // An open graph: starts with `spec.submodels` (plus "default") and no
  // tasks, and grows by Append(). repeat must be 1 and tasks empty.
  static Result<std::shared_ptr<JobGraph>> BuildOpen(JobSpec spec);
  // Appends sub-models and tasks to an open graph, all or nothing, in
  // amortised time of the appended part. Tasks may only name inputs already
  // in the graph or earlier in `tasks` (so no cycle can form); every
  // collective group must be complete within one append. Errors are one
  // line naming the task (its index in the whole graph) and the field.
  Status Append(std::vector<SubmodelSpec> submodels, std::vector<TaskSpec> tasks);
  // Merges into each task's `required` the labels its sub-model requires
  // (one of `submodels`, about to be added, or one already in the graph);
  // tasks[i] is task `first` + i, for messages. The same pair from both is
  // one; a key they give different values is InvalidArgument naming the
  // task, both values and the sub-model. A task of an unknown sub-model is
  // left as it is (Append refuses it). Add() runs it, so a graph's tasks
  // hold their whole requirement; the scheduler runs it before it checks
  // an append against the pool.
  Status MergeRequired(std::span<const SubmodelSpec> submodels, std::span<TaskSpec> tasks,
                       uint32_t first) const;
  bool open() const { return open_; }
  // Open graphs: the index of the task called `id`, or -1.
  int64_t Find(std::string_view id) const;

  const JobSpec& spec() const { return spec_; }
  const TaskSpec& spec_task(uint32_t i) const { return spec_.tasks[i]; }
  const GraphTask& task(uint32_t i) const { return tasks_[i]; }
  // The producers task i's kernel reads, in the order its spec lists them,
  // repeats included (`add` of x and x reads x twice); task(i).inputs,
  // which the scheduler counts, holds each producer once.
  std::span<const uint32_t> kernel_inputs(uint32_t i) const {
    auto it = repeated_inputs_.find(i);
    return it == repeated_inputs_.end() ? std::span<const uint32_t>(tasks_[i].inputs)
                                        : std::span<const uint32_t>(it->second);
  }
  // Tasks in one step.
  uint32_t size() const { return static_cast<uint32_t>(tasks_.size()); }
  uint32_t steps() const { return spec_.repeat; }
  // Task runs over all steps: run r is task r % size() of step r / size().
  uint64_t total_runs() const { return static_cast<uint64_t>(size()) * steps(); }
  const std::vector<uint32_t>& roots() const { return roots_; }
  // Producers before consumers.
  const std::vector<uint32_t>& topo_order() const { return topo_; }
  const std::vector<CollectiveGroup>& groups() const { return groups_; }
  // "tasks[0] 'v0'", for error messages.
  std::string Describe(uint32_t i) const;

 private:
  // Checks `submodels` and `tasks` against the graph and adds them, all or
  // nothing. An open graph's tasks may name as inputs only tasks before
  // them; a graph being built (Build, not open) takes the whole job here,
  // in any order, and is refused if its inputs form a cycle.
  Status Add(std::vector<SubmodelSpec> submodels, std::vector<TaskSpec> tasks);

  JobSpec spec_;
  std::vector<GraphTask> tasks_;
  std::vector<uint32_t> roots_;
  std::vector<uint32_t> topo_;
  std::vector<CollectiveGroup> groups_;
  // Tasks whose spec names an input more than once: their kernel_inputs.
  std::unordered_map<uint32_t, std::vector<uint32_t>> repeated_inputs_;
  // Open graphs only (a built graph drops them): names to indices, for
  // Append().
  bool open_ = false;
  std::unordered_map<std::string, uint32_t> ids_;
  std::unordered_map<std::string, uint32_t> submodel_ids_;
  std::unordered_map<std::string, uint32_t> group_ids_;
};

}  // namespace hmpmd
