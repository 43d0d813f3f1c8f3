#include "bench_util.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>

namespace hmpmd::bench {

Stats Summarise(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return {v[v.size() / 2], v.front(), v.back()};
}

std::shared_ptr<const JobGraph> NoopJob(int n, bool chain) {
  JobSpec spec;
  spec.name = chain ? "chain" : "independent";
  spec.tasks.resize(n);
  for (int i = 0; i < n; ++i) {
    spec.tasks[i].id = "t" + std::to_string(i);
    spec.tasks[i].kernel = "noop";
    if (chain && i > 0) spec.tasks[i].inputs.push_back("t" + std::to_string(i - 1));
  }
  auto g = JobGraph::Build(std::move(spec));
  if (!g.ok()) {
    std::fprintf(stderr, "bench: %s\n", g.status().ToString().c_str());
    std::exit(1);
  }
  return *g;
}

double JobSeconds(LocalCluster& cluster, std::shared_ptr<const JobGraph> graph) {
  double seconds = -1;
  Status st =
      cluster.RunJob(graph, std::chrono::minutes(5), [&](const JobRun& job, const Controller&) {
        if (job.state == JobState::kSucceeded) seconds = (job.finished - job.submitted) / 1e6;
      });
  if (!st.ok() || seconds <= 0) {
    std::fprintf(stderr, "bench: job failed: %s\n", st.ToString().c_str());
    std::exit(1);
  }
  return seconds;
}

}  // namespace hmpmd::bench
