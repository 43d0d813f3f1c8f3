// Helpers the benchmarks share: medians with their spread, no-op jobs, and
// timing one job on a LocalCluster.
#pragma once

#include <memory>
#include <vector>

#include "local_cluster.h"

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

}  // namespace hmpmd::bench
