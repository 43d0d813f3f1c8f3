// bench/peers, the C++ half: the four workloads of bench/peers on HyperMPMD
// (a LocalCluster of 2 workers with one cube core each, on loopback) and
// workloads 1 and 2 on raw ZeroMQ (raw_peers.h says what that does). Dask
// runs the same workloads in dask_bench.py; report.py puts them side by side.
//
//  1 independent  N noop tasks, no edges                    tasks/s
//  2 chain        N noop tasks, each the input of the next  us per task
//  3 tree         L noop leaves reduced by noop tasks of fan-in 8 to one root:
//                 makespan
//  4 multimodal   --multimodal JOB.json (spin kernels of fixed durations):
//                 makespan and the schedule's lower bound
//
// HyperMPMD times are submission to end on the controller's clock. Every
// figure gets one warm-up run and then --runs timed runs; each timed run is
// one CSV row "system,workload,metric,unit,run,value" on stdout (or --csv).
#include <spdlog/spdlog.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cstdio>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <vector>
#include <zmq.hpp>

#include "hmpmd/controller/job_spec_parser.h"
#include "hmpmd/launch/local_cluster.h"
#include "hmpmd/sim/schedule_metrics.h"
#include "raw_peers.h"

namespace hmpmd {
namespace {

[[noreturn]] void Die(const std::string& what) {
  std::fprintf(stderr, "bench_peers: %s\n", what.c_str());
  std::exit(1);
}

std::shared_ptr<const JobGraph> Build(JobSpec spec) {
  auto g = JobGraph::Build(std::move(spec));
  if (!g.ok()) Die(g.status().ToString());
  return *g;
}

TaskSpec Noop(std::string id, std::vector<std::string> inputs = {}) {
  TaskSpec t;
  t.id = std::move(id);
  t.kernel = "noop";
  t.inputs = std::move(inputs);
  return t;
}

std::shared_ptr<const JobGraph> IndependentJob(int n) {
  JobSpec spec;
  spec.name = "independent";
  for (int i = 0; i < n; ++i) spec.tasks.push_back(Noop("t" + std::to_string(i)));
  return Build(std::move(spec));
}

std::shared_ptr<const JobGraph> ChainJob(int n) {
  JobSpec spec;
  spec.name = "chain";
  for (int i = 0; i < n; ++i) {
    std::vector<std::string> in;
    if (i > 0) in.push_back("t" + std::to_string(i - 1));
    spec.tasks.push_back(Noop("t" + std::to_string(i), std::move(in)));
  }
  return Build(std::move(spec));
}

// Leaves l0..l{n-1}; level k node r{k}_{i} reduces nodes 8i..8i+7 of the
// level below, until one node is left.
std::shared_ptr<const JobGraph> TreeJob(int leaves, int fan_in) {
  JobSpec spec;
  spec.name = "tree";
  std::vector<std::string> level;
  for (int i = 0; i < leaves; ++i) {
    level.push_back("l" + std::to_string(i));
    spec.tasks.push_back(Noop(level.back()));
  }
  for (int k = 1; level.size() > 1; ++k) {
    std::vector<std::string> up;
    for (size_t i = 0; i < level.size(); i += static_cast<size_t>(fan_in)) {
      std::vector<std::string> in(
          level.begin() + static_cast<ptrdiff_t>(i),
          level.begin() +
              static_cast<ptrdiff_t>(std::min(level.size(), i + static_cast<size_t>(fan_in))));
      up.push_back("r" + std::to_string(k) + "_" + std::to_string(up.size()));
      spec.tasks.push_back(Noop(up.back(), std::move(in)));
    }
    level = std::move(up);
  }
  return Build(std::move(spec));
}

std::shared_ptr<const JobGraph> FileJob(const std::string& path) {
  std::ifstream in(path);
  if (!in) Die(path + ": cannot read");
  std::stringstream text;
  text << in.rdbuf();
  auto spec = ParseJobSpec(text.str());
  if (!spec.ok()) Die(path + ": " + spec.status().message());
  // Dask runs the same file, and it knows only spin tasks.
  for (size_t i = 0; i < spec->tasks.size(); ++i) {
    const TaskSpec& t = spec->tasks[i];
    if (t.kernel != "spin" || ArgNumber(t.args, "us", -1) < 0) {
      Die(path + ": tasks[" + std::to_string(i) + "] '" + t.id +
          "': kernel: only spin tasks with args.us run here");
    }
  }
  return Build(std::move(spec).value());
}

struct Outcome {
  double seconds = -1;       // submission to end
  double lower_bound_s = 0;  // from the recorded runs (ScheduleMetrics)
};

Outcome RunOnce(LocalCluster& cluster, std::shared_ptr<const JobGraph> graph) {
  Outcome out;
  Status st =
      cluster.RunJob(graph, std::chrono::minutes(5), [&](const JobRun& job, const Controller& c) {
        if (job.state != JobState::kSucceeded) return;
        out.seconds = static_cast<double>(job.finished - job.submitted) / 1e6;
        out.lower_bound_s = ComputeMetrics(job, c.scheduler().pool()).lower_bound_s;
      });
  if (!st.ok() || out.seconds < 0) {
    cluster.Stop();  // its worker processes must not outlive the bench
    Die("job '" + graph->spec().name + "' failed: " + st.ToString());
  }
  return out;
}

class CsvOut {
 public:
  explicit CsvOut(FILE* f) : f_(f) {}
  void Row(const char* system, const char* workload, const char* metric, const char* unit, int run,
           double value) {
    std::fprintf(f_, "%s,%s,%s,%s,%d,%.6g\n", system, workload, metric, unit, run, value);
    std::fflush(f_);
  }

 private:
  FILE* f_;
};

}  // namespace
}  // namespace hmpmd

int main(int argc, char** argv) {
  using namespace hmpmd;
  CLI::App app{"bench/peers: HyperMPMD and raw ZeroMQ on the workloads of bench/peers"};
  int runs = 3, independent = 20'000, chain = 2'000, leaves = 5'000, fan_in = 8;
  int raw_batch = 64, raw_window = 2;
  int lookahead_us = -1;
  std::string multimodal, csv_path;
  bool smoke = false, no_raw = false, count_running = false, no_early = false;
  app.add_option("--runs", runs, "Timed runs per figure")->capture_default_str();
  app.add_option("--independent", independent, "Workload 1: independent noop tasks")
      ->capture_default_str();
  app.add_option("--chain", chain, "Workload 2: tasks in the dependent chain")
      ->capture_default_str();
  app.add_option("--leaves", leaves, "Workload 3: leaves of the reduction tree")
      ->capture_default_str();
  app.add_option("--fan-in", fan_in, "Workload 3: inputs per reduce task")->capture_default_str();
  app.add_option("--raw-batch", raw_batch, "Raw workload 1: task ids per message")
      ->capture_default_str();
  app.add_option("--raw-window", raw_window, "Raw workload 1: batches in flight per peer")
      ->capture_default_str();
  app.add_option("--multimodal", multimodal,
                 "Workload 4: a job spec of spin tasks (skipped if empty)");
  app.add_option("--csv", csv_path, "Append the rows to this file instead of stdout");
  app.add_option("--lookahead-us", lookahead_us,
                 "Estimated work a core may hold queued (default: the controller's, 200)");
  app.add_flag("--count-running", count_running,
               "The lookahead counts the running task's work too (the old rule: no task queues "
               "behind a task longer than the lookahead)");
  app.add_flag("--no-early-dispatch", no_early,
               "Place a task only once its inputs' results reached the controller (the "
               "controller's default dispatches a task early, queued behind producers that run "
               "on one core)");
  app.add_flag("--no-raw", no_raw, "Skip the raw ZeroMQ baseline");
  app.add_flag("--smoke", smoke, "Small sizes, one run (for CI)");
  CLI11_PARSE(app, argc, argv);
  if (smoke) {
    runs = 1;
    independent = 2'000;
    chain = 200;
    leaves = 500;
  }
  if (runs < 1 || independent < 1 || chain < 1 || leaves < 1 || fan_in < 2 || raw_batch < 1 ||
      raw_window < 1) {
    Die("--runs, --independent, --chain, --leaves, --raw-* must be >= 1 and --fan-in >= 2");
  }
  FILE* f = stdout;
  if (!csv_path.empty() && !(f = std::fopen(csv_path.c_str(), "a")))
    Die(csv_path + ": cannot write");
  CsvOut csv(f);
  spdlog::set_level(spdlog::level::warn);

  std::shared_ptr<const JobGraph> w4;
  if (!multimodal.empty()) w4 = FileJob(multimodal);  // a bad file fails before anything starts

  // Raw ZeroMQ first: it forks, which must happen before any thread starts.
  if (!no_raw) {
    RawPeers raw;
    if (!raw.Start(2)) Die("the raw ZeroMQ peers did not start");
    auto silent = [&raw] {
      raw.Stop();
      Die("a raw ZeroMQ peer went silent");
    };
    try {
      if (raw.Independent(std::min(independent, 2'000), raw_batch, raw_window) < 0 ||
          raw.Chain(std::min(chain, 200)) < 0) {
        silent();
      }
      for (int r = 0; r < runs; ++r) {
        double s = raw.Independent(independent, raw_batch, raw_window);
        if (s <= 0) silent();
        csv.Row("raw", "w1_independent", "tasks_per_s", "tasks/s", r, independent / s);
      }
      for (int r = 0; r < runs; ++r) {
        double s = raw.Chain(chain);
        if (s <= 0) silent();
        csv.Row("raw", "w2_chain", "latency_us", "us/task", r, s * 1e6 / chain);
      }
    } catch (const zmq::error_t& e) {
      raw.Stop();
      Die(std::string("raw ZeroMQ: ") + e.what());
    }
    raw.Stop();
  }

  LocalClusterOptions opts;
  opts.workers = 2;
  opts.cores = "cube=1";  // 2 x 1 lane, as Dask's 2 workers x 1 thread
  opts.worker_binary = HMPMD_WORKER_BIN;
  opts.log_level = "error";
  if (lookahead_us >= 0) opts.service.controller.scheduler.pool.lookahead_us = lookahead_us;
  if (count_running) opts.service.controller.scheduler.pool.lookahead_waiting_only = false;
  if (no_early) opts.service.controller.scheduler.early_dispatch = false;
  LocalCluster cluster(opts);
  if (Status st = cluster.Start(); !st.ok()) {
    cluster.Stop();
    Die(st.ToString());
  }

  auto w1 = IndependentJob(independent);
  RunOnce(cluster, IndependentJob(std::min(independent, 2'000)));
  for (int r = 0; r < runs; ++r) {
    csv.Row("hmpmd", "w1_independent", "tasks_per_s", "tasks/s", r,
            independent / RunOnce(cluster, w1).seconds);
  }
  auto w2 = ChainJob(chain);
  RunOnce(cluster, ChainJob(std::min(chain, 200)));
  for (int r = 0; r < runs; ++r) {
    csv.Row("hmpmd", "w2_chain", "latency_us", "us/task", r,
            RunOnce(cluster, w2).seconds * 1e6 / chain);
  }
  auto w3 = TreeJob(leaves, fan_in);
  RunOnce(cluster, TreeJob(std::min(leaves, 500), fan_in));
  for (int r = 0; r < runs; ++r) {
    csv.Row("hmpmd", "w3_tree", "makespan_ms", "ms", r, RunOnce(cluster, w3).seconds * 1e3);
  }
  if (w4) {
    RunOnce(cluster, w4);
    for (int r = 0; r < runs; ++r) {
      Outcome o = RunOnce(cluster, w4);
      csv.Row("hmpmd", "w4_multimodal", "makespan_ms", "ms", r, o.seconds * 1e3);
      csv.Row("hmpmd", "w4_multimodal", "lower_bound_ms", "ms", r, o.lower_bound_s * 1e3);
    }
  }
  cluster.Stop();
  if (f != stdout) std::fclose(f);
  return 0;
}
