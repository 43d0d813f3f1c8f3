// bench_moe_overlap: runs examples/moe.json (chunked MoE: dispatch of chunk
// i+1 on the vector lane while the experts compute chunk i on the cube
// lane) on 2 local workers (cube=1,vector=1), and the same job with overlap
// switched off: every task on the cube lane of 2 workers that have only
// that lane (cube=1), so communication and matrix work of a device take
// turns. Prints the measured communication masking ratio of each, the
// summed task times and the speed-up, medians of --runs runs, the two
// variants alternating.
//
//   bench_moe_overlap [--runs N] [--spec FILE]
#include <algorithm>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "hmpmd/controller/job_spec_parser.h"
#include "hmpmd/launch/local_cluster.h"
#include "hmpmd/sim/schedule_metrics.h"

namespace hmpmd {
namespace {

struct Outcome {
  double seconds = -1;
  double masking = 0;
  double compute_s = 0;  // summed durations of the matrix (non-comm) tasks
  double comm_s = 0;     // summed durations of the communication tasks
};

Outcome RunOnce(LocalCluster& cluster, std::shared_ptr<const JobGraph> graph) {
  Outcome o;
  Status st =
      cluster.RunJob(graph, std::chrono::minutes(5), [&](const JobRun& job, const Controller& c) {
        if (job.state != JobState::kSucceeded) return;
        o.seconds = (job.finished - job.started) / 1e6;
        o.masking = ComputeMetrics(job, c.scheduler().pool()).masking_ratio;
        const uint32_t n = job.graph->size();
        for (uint32_t r = 0; r < job.runs.size(); ++r) {
          const double d = (job.runs[r].end - job.runs[r].start) / 1e6;
          (job.graph->task(r % n).is_comm ? o.comm_s : o.compute_s) += d;
        }
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
  for (TaskSpec& t : serial.tasks) {  // overlap off: every task names the cube core
    t.core = CoreKind::kCube;
    t.core_given = true;
  }
  auto overlapped = JobGraph::Build(std::move(spec).value());
  auto sequential = JobGraph::Build(std::move(serial));
  if (!overlapped.ok() || !sequential.ok()) {
    std::fprintf(stderr, "bench: bad spec %s\n", path.c_str());
    return 1;
  }
  // Overlap off also runs on devices with one lane, as a static
  // deployment's devices do: a worker's vector lane would sit idle there.
  LocalClusterOptions o;
  o.workers = 2;
  o.cores = "cube=1,vector=1";
  o.worker_binary = HMPMD_WORKER_BIN;
  o.log_level = "error";
  LocalCluster cluster(o);
  o.cores = "cube=1";
  LocalCluster one_lane(o);
  for (LocalCluster* c : {&cluster, &one_lane}) {
    if (Status st = c->Start(); !st.ok()) {
      std::fprintf(stderr, "bench: %s\n", st.ToString().c_str());
      return 1;
    }
  }
  RunOnce(cluster, *overlapped);  // warm-up: connections, cost model
  RunOnce(one_lane, *sequential);
  std::vector<Outcome> on, off;
  for (int r = 0; r < runs; ++r) {
    on.push_back(RunOnce(cluster, *overlapped));
    off.push_back(RunOnce(one_lane, *sequential));
  }
  cluster.Stop();
  one_lane.Stop();
  auto median = [](const std::vector<Outcome>& v, double Outcome::*field) {
    std::vector<double> x;
    for (const Outcome& one : v) x.push_back(one.*field);
    return Median(x);
  };
  // Summed task times show where overlap goes on a host with fewer cores
  // than busy lanes: the matrix tasks stretch by the time comm takes.
  std::printf("%-8s %10s %9s %14s %11s\n", "overlap", "median ms", "masking", "matrix sum ms",
              "comm sum ms");
  for (const auto& [name, v] : {std::pair{"on", &on}, std::pair{"off", &off}}) {
    std::printf("%-8s %10.2f %8.1f%% %14.2f %11.2f\n", name, median(*v, &Outcome::seconds) * 1e3,
                median(*v, &Outcome::masking) * 100, median(*v, &Outcome::compute_s) * 1e3,
                median(*v, &Outcome::comm_s) * 1e3);
  }
  std::printf(
      "speed-up with overlap: %.2fx (%d runs each; 2 workers, on: cube=1,vector=1, "
      "off: cube=1)\n",
      median(off, &Outcome::seconds) / median(on, &Outcome::seconds), runs);
  return 0;
}
