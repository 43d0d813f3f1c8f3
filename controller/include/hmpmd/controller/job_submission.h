// What Controller::Submit() takes, and how its caller hears the outcome.
// Thread-safety: plain values; the callback runs on the controller loop.
#pragma once

#include <functional>
#include <memory>
#include <string>

#include "hmpmd/protocol/status.h"
#include "hmpmd/protocol/types.h"
#include "hmpmd/scheduler/job_graph.h"
#include "hmpmd/scheduler/job_run.h"

namespace hmpmd {

// A job as its caller has it: as spec text, as a graph already built and
// checked (e.g. off the loop), or both.
struct JobSubmission {
  // The spec's JSON text, kept in the store (if any) so that the job
  // survives a restart; empty: the job is not stored. Parsed on the loop
  // (under ControllerOptions::spec_limits) when `graph` is null.
  std::string spec_json;
  // The job, built and checked; null: built from spec_json.
  std::shared_ptr<const JobGraph> graph;
  // Whose job it is (the submitting token's tenant); kept in the store.
  JobTenant tenant;
};

// Hears the outcome of a submit once it is final (Controller::Submit).
using SubmitDone = std::function<void(Result<JobId>)>;

}  // namespace hmpmd
