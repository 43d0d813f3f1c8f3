// bench/store: dispatch throughput with the durable job store on against
// off, in the same run. Two local workers (one cube lane each) run a job of
// independent noop tasks; "off" has no store, "on" writes every task run to
// an SQLite file (WAL, synchronous=NORMAL) through the StoreWriter thread.
// Runs alternate off/on so drift of the machine hits both alike. Each figure
// is the median of --runs runs, printed with min and max, and the ratio
// on/off (target >= 0.80).
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <vector>

#include "bench_util.h"
#include "hmpmd/controller/job_spec_parser.h"
#include "hmpmd/launch/local_cluster.h"
#include "hmpmd/store/sqlite_job_store.h"

namespace hmpmd {
namespace {

using bench::Stats;
using bench::Summarise;

std::string NoopSpec(int n) {
  nlohmann::json tasks = nlohmann::json::array();
  for (int i = 0; i < n; ++i)
    tasks.push_back({{"id", "t" + std::to_string(i)}, {"kernel", "noop"}});
  return nlohmann::json{{"name", "independent"}, {"tasks", tasks}}.dump();
}

// Tasks per second from submission to the end of the job.
double RunOnce(LocalCluster& cluster, const std::string& spec) {
  SpecLimits limits;
  limits.max_tasks = 10'000'000;
  auto parsed = ParseJobSpec(spec, limits);
  auto graph = parsed.ok() ? JobGraph::Build(std::move(parsed).value())
                           : Result<std::shared_ptr<const JobGraph>>(parsed.status());
  if (!graph.ok()) {
    std::fprintf(stderr, "bench: %s\n", graph.status().ToString().c_str());
    std::exit(1);
  }
  double rate = -1;
  size_t n = (*graph)->total_runs();
  Status st = cluster.RunJob(
      *graph, std::chrono::minutes(5),
      [&](const JobRun& job, const Controller&) {
        if (job.state == JobState::kSucceeded) rate = n / ((job.finished - job.submitted) / 1e6);
      },
      spec);
  if (!st.ok() || rate < 0) {
    std::fprintf(stderr, "bench: job failed: %s\n", st.ToString().c_str());
    std::exit(1);
  }
  return rate;
}

LocalClusterOptions ClusterOptions(std::shared_ptr<JobStore> store) {
  LocalClusterOptions o;
  o.workers = 2;
  o.cores = "cube=1";
  o.worker_binary = HMPMD_WORKER_BIN;
  o.log_level = "error";
  o.service.controller.store = std::move(store);
  return o;
}

}  // namespace
}  // namespace hmpmd

int main(int argc, char** argv) {
  using namespace hmpmd;
  CLI::App app{"bench/store: dispatch rate with the SQLite job store on vs off"};
  int runs = 5, tasks = 100'000;
  bool smoke = false;
  app.add_option("--runs", runs, "Runs per figure (the median is reported)")->capture_default_str();
  app.add_option("--tasks", tasks, "Independent noop tasks per job")->capture_default_str();
  app.add_flag("--smoke", smoke, "Small sizes, one run (for CI)");
  CLI11_PARSE(app, argc, argv);
  if (smoke) {
    runs = 1;
    tasks = 5'000;
  }
  spdlog::set_level(spdlog::level::warn);
  std::string db = (std::filesystem::temp_directory_path() /
                    ("hmpmd-store-bench-" + std::to_string(::getpid()) + ".db"))
                       .string();
  auto store = SqliteJobStore::Open(db);
  if (!store.ok()) return std::fprintf(stderr, "bench: %s\n", store.status().ToString().c_str()), 1;
  std::shared_ptr<JobStore> shared = std::move(store).value();

  LocalCluster off(ClusterOptions(nullptr));
  LocalCluster on(ClusterOptions(shared));
  for (LocalCluster* c : {&off, &on}) {
    if (Status st = c->Start(); !st.ok()) {
      return std::fprintf(stderr, "bench: %s\n", st.ToString().c_str()), 1;
    }
  }
  std::string spec = NoopSpec(tasks);
  RunOnce(off, NoopSpec(std::min(tasks, 10'000)));  // warm up
  RunOnce(on, NoopSpec(std::min(tasks, 10'000)));
  std::vector<double> off_rate, on_rate;
  for (int r = 0; r < runs; ++r) {
    off_rate.push_back(RunOnce(off, spec));
    on_rate.push_back(RunOnce(on, spec));
  }
  Stats a = Summarise(off_rate), b = Summarise(on_rate);
  std::printf(
      "bench/store: %d independent noop tasks, 2 workers, median of %d run(s) [min .. max]\n",
      tasks, runs);
  std::printf("  store off                %9.0f tasks/s [%.0f .. %.0f]\n", a.median, a.min, a.max);
  std::printf("  store on (SQLite, WAL)   %9.0f tasks/s [%.0f .. %.0f]\n", b.median, b.min, b.max);
  std::printf("  ratio on/off = %.2f   (target >= 0.80)\n", b.median / a.median);
  shared.reset();
  for (const char* ext : {"", "-wal", "-shm", "-lock"}) std::filesystem::remove(db + ext);
  return 0;
}
