// bench_moe_overlap: runs examples/moe.json (chunked MoE: dispatch of chunk
// i+1 on the vector lane while the experts compute chunk i on the cube
// lane) on 2 local workers, and the same job with overlap switched off
// (every task on the cube lane, so communication and matrix work of a
// device take turns). Prints the measured communication masking ratio of
// each and the speed-up, medians of --runs runs.
//
//   bench_moe_overlap [--runs N] [--spec FILE]
#include <algorithm>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "hmpmd/scheduler/schedule_metrics.h"
#include "job_spec_parser.h"
#include "local_cluster.h"

namespace hmpmd {
namespace {

struct Outcome {
  double seconds = -1;
  double masking = 0;
};

Outcome RunOnce(LocalCluster& cluster, std::shared_ptr<const JobGraph> graph) {
  Outcome o;
  Status st =
      cluster.RunJob(graph, std::chrono::minutes(5), [&](const JobRun& job, const Controller& c) {
        if (job.state != JobState::kSucceeded) return;
        o.seconds = (job.finished - job.started) / 1e6;
        o.masking = ComputeMetrics(job, c.scheduler().pool()).masking_ratio;
      });
  if (!st.ok() || o.seconds < 0) {
    std::fprintf(stderr, "bench: job failed: %s\n", st.ToString().c_str());
    std::exit(1);
  }
  return o;
}

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

}  // namespace
}  // namespace hmpmd

int main(int argc, char** argv) {
  using namespace hmpmd;
  int runs = 5;
  std::string path = std::string(HMPMD_SOURCE_DIR) + "/examples/moe.json";
  for (int i = 1; i + 1 < argc; i += 2) {
    if (std::strcmp(argv[i], "--runs") == 0) runs = std::max(1, std::atoi(argv[i + 1]));
    if (std::strcmp(argv[i], "--spec") == 0) path = argv[i + 1];
  }
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  auto spec = ParseJobSpec(text.str());
  if (!spec.ok()) {
    std::fprintf(stderr, "bench: %s: %s\n", path.c_str(), spec.status().ToString().c_str());
    return 1;
  }
  JobSpec serial = *spec;
  for (TaskSpec& t : serial.tasks) t.core = CoreKind::kCube;  // overlap off
  auto overlapped = JobGraph::Build(std::move(spec).value());
  auto sequential = JobGraph::Build(std::move(serial));
  if (!overlapped.ok() || !sequential.ok()) {
    std::fprintf(stderr, "bench: bad spec %s\n", path.c_str());
    return 1;
  }
  LocalClusterOptions o;
  o.workers = 2;
  o.cores = "cube=1,vector=1";
  o.worker_binary = HMPMD_WORKER_BIN;
  o.log_level = "error";
  LocalCluster cluster(o);
  if (Status st = cluster.Start(); !st.ok()) {
    std::fprintf(stderr, "bench: %s\n", st.ToString().c_str());
    return 1;
  }
  RunOnce(cluster, *overlapped);  // warm-up: connections, cost model
  RunOnce(cluster, *sequential);
  std::vector<double> on_s, on_mask, off_s, off_mask;
  for (int r = 0; r < runs; ++r) {
    Outcome a = RunOnce(cluster, *overlapped);
    Outcome b = RunOnce(cluster, *sequential);
    on_s.push_back(a.seconds);
    on_mask.push_back(a.masking);
    off_s.push_back(b.seconds);
    off_mask.push_back(b.masking);
  }
  cluster.Stop();
  std::printf("%-12s %12s %16s\n", "overlap", "median ms", "masking ratio");
  std::printf("%-12s %12.2f %15.1f%%\n", "on", Median(on_s) * 1e3, Median(on_mask) * 100);
  std::printf("%-12s %12.2f %15.1f%%\n", "off", Median(off_s) * 1e3, Median(off_mask) * 100);
  std::printf("speed-up with overlap: %.2fx (%d runs each, 2 workers cube=1,vector=1)\n",
              Median(off_s) / Median(on_s), runs);
  return 0;
}
