// The arguments each built-in kernel takes (docs/data-plane.md, "Embedding the worker"),
// checked when a job is submitted so that a typo or a wrong type is a
// one-line error then, not a silent default or a failure minutes later.
//
// Thread-safety: pure functions.
#pragma once

#include <cstddef>
#include <span>
#include <string_view>

#include "hmpmd/protocol/job_spec.h"
#include "hmpmd/protocol/status.h"
#include "hmpmd/protocol/types.h"

namespace hmpmd {

// Ok when `kernel` is not built in (a worker's own kernel reads its
// arguments itself), or when every argument is one the built-in takes, of
// the right type and in range. Otherwise
// InvalidArgument "args.NAME: what is wrong" (the caller prefixes the task).
// A worker that registers its own kernel under a built-in name keeps these
// rules for it.
Status CheckBuiltinArgs(std::string_view kernel, const Args& args);

// A built-in communication kernel (send, a collective) without a size
// argument (`n`, `bytes`, alltoall's `sizes`) makes `bytes` bytes of data
// when its inputs hold none, 4096 by default. Where the spec sizes the
// task (cost.bytes or collective.bytes), this adds that `bytes` argument,
// so that a live run moves what the simulation and the cost model assume
// (docs/job-spec.md: a send is sized by cost.bytes): at most 2^30, the most a
// worker makes, and for a collective rounded down to whole float32s.
void SizeCommByHint(TaskSpec& t);

// What a live worker needs on top of CheckBuiltinArgs: the arguments a
// built-in kernel cannot run without (gemm's m, n and k; a simulation may
// time a gemm by cost.flops instead). InvalidArgument "args.m: ..." when
// one is missing; the caller prefixes the task.
Status CheckWorkerArgs(std::string_view kernel, const Args& args);

// CheckWorkerArgs over a task list, for every path that hands tasks to live
// workers (a submitted job, a driver session's appended tasks): Ok, or
// InvalidArgument "tasks[I] 'ID': args.m: ..." for the first task that
// fails, I counted from `first_index` (a session's tasks continue its job's).
Status CheckWorkerTaskArgs(std::span<const TaskSpec> tasks, size_t first_index = 0);

}  // namespace hmpmd
