// Helpers the benchmarks share: medians with their spread, no-op jobs, and
// timing one job on a LocalCluster.
#pragma once

#include <memory>
#include <vector>

#include "hmpmd/launch/local_cluster.h"

namespace hmpmd::bench {

struct Stats {
  double median, min, max;
};
// Median, min and max of `v` (not empty).
Stats Summarise(std::vector<double> v);

// `n` noop tasks, independent or (`chain`) each after the one before.
std::shared_ptr<const JobGraph> NoopJob(int n, bool chain);

// Seconds from submission to the end of `graph` on the controller's clock.
// Exits the benchmark with a one-line error if the job fails.
double JobSeconds(LocalCluster& cluster, std::shared_ptr<const JobGraph> graph);

// Median round trip in microseconds of `round_trips` 64-byte messages
// between a DEALER here and a ROUTER echo in a forked child: the raw
// transport baseline benchmarks compare against. -1 when it cannot run.
// Call it before any ZeroMQ context lives in this process (it forks).
double RawRoundTripUs(int round_trips);

}  // namespace hmpmd::bench
