// Checks of a job graph's collective gangs that need whole groups, made on
// JobGraph's one checking path for Build and Append (job_graph_append.cc;
// internal to the scheduler).
//
// A gang starts only when all its members can, so the graph with each
// group contracted to one node must be acyclic: a member that waits,
// through any chain of inputs, for another member of its own group (or
// two groups that wait for each other) could never start. And members of
// a group running a built-in collective must agree on it: the kernel is
// the group's op, a broadcast root and alltoall sizes fit the group, and
// the members of allreduce, allgather and reduce_scatter move the same
// number of elements, else the workers fail mid-run or the simulator
// charges whichever member came first.
// Thread-safety: pure functions.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "hmpmd/protocol/job_spec.h"
#include "hmpmd/protocol/status.h"

namespace hmpmd {

// The part of a graph to check: tasks with local indices 0..n-1; inputs
// outside the part are left out (they cannot close a cycle through it).
struct GangView {
  std::vector<const TaskSpec*> tasks;
  // Per task: its group's local index, or UINT32_MAX for none.
  std::vector<uint32_t> group;
  // Per task: its inputs inside the part (local indices), in the order its
  // kernel reads them, repeats included.
  std::vector<std::vector<uint32_t>> inputs;
  // Per group: its members (local indices, spec order).
  std::vector<std::vector<uint32_t>> members;
  // Index in the whole graph of tasks[0], for messages.
  uint32_t first_index = 0;
};

// One line naming the task and field of the first problem, or Ok.
Status CheckGangs(const GangView& view);

}  // namespace hmpmd
