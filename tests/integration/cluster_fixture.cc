#include "cluster_fixture.h"

#include <algorithm>
#include <cstring>
#include <map>

#include "hmpmd/worker/builtin_kernels.h"
#include "hmpmd/worker/fetch.h"

namespace hmpmd::testing {

void ClusterTest::StartCluster(int workers, const std::string& cores,
                               ControllerOptions controller) {
  LocalClusterOptions o;
  o.service = service_options_;
  o.service.controller = std::move(controller);
  o.service.controller.listen = "tcp://127.0.0.1:0";
  o.workers = workers;
  o.cores = cores;
  o.worker_binary = HMPMD_WORKER_BIN;
  o.log_level = "warn";
  o.extra_worker_args = extra_worker_args_;
  cluster_ = std::make_unique<LocalCluster>(o);
  Status st = cluster_->Start(std::chrono::seconds(20));
  ASSERT_TRUE(st.ok()) << st.ToString();
}

void ClusterTest::TearDown() {
  if (cluster_) cluster_->Stop();
}

Status ClusterTest::Submit(const std::string& spec_json) {
  return cluster_->Call([&]() -> Status {
    auto id = cluster_->controller().Submit({spec_json});
    return id.ok() ? Status::Ok() : id.status();
  });
}

JobResult ClusterTest::RunSpec(const std::string& spec_json, int timeout_ms) {
  JobResult out;
  auto spec = ParseJobSpec(spec_json);
  EXPECT_TRUE(spec.ok()) << spec.status().ToString();
  if (!spec.ok()) return out;
  auto graph = JobGraph::Build(std::move(spec).value());
  EXPECT_TRUE(graph.ok()) << graph.status().ToString();
  if (!graph.ok()) return out;
  Status st = cluster_->RunJob(std::move(graph).value(), std::chrono::milliseconds(timeout_ms),
                               [&out](const JobRun& job, const Controller& c) {
                                 const ResourcePool& pool = c.scheduler().pool();
                                 out.id = job.id;
                                 out.state = job.state;
                                 out.error = job.error;
                                 out.graph = job.graph;
                                 const uint32_t n = job.graph->size();
                                 for (uint32_t r = 0; r < job.runs.size(); ++r) {
                                   const TaskRecord& rec = job.runs[r];
                                   RunRecord rr;
                                   rr.run = r;
                                   rr.index = r % n;
                                   rr.step = r / n;
                                   rr.state = rec.state;
                                   if (rec.core != kNoCore) {
                                     rr.core = rec.core;
                                     rr.device = pool.core(rec.core).device;
                                     rr.kind = pool.core(rec.core).kind;
                                   }
                                   rr.start = rec.start;
                                   rr.end = rec.end;
                                   out.runs.push_back(rr);
                                 }
                               });
  EXPECT_TRUE(st.ok()) << st.ToString();
  return out;
}

void ClusterTest::ExpectValidSchedule(const JobResult& r) {
  ASSERT_TRUE(r.graph);
  const JobGraph& g = *r.graph;
  const uint32_t n = g.size();
  ASSERT_EQ(r.runs.size(), g.total_runs());
  for (const RunRecord& run : r.runs) {
    ASSERT_EQ(run.state, TaskState::kDone) << g.spec_task(run.index).id;
    EXPECT_LE(run.start, run.end);
    for (uint32_t in : g.task(run.index).inputs) {
      const RunRecord& p = r.runs[run.step * n + in];
      EXPECT_GE(run.start, p.end) << "edge " << g.spec_task(in).id << " -> "
                                  << g.spec_task(run.index).id << " in step " << run.step;
    }
    // Each run ran on a core of the kind its spec asked for.
    EXPECT_EQ(run.kind, g.spec_task(run.index).core) << g.spec_task(run.index).id;
  }
  for (uint32_t s = 1; s < g.steps(); ++s) {
    TimeUs prev_end = 0, first_start = INT64_MAX;
    for (uint32_t i = 0; i < n; ++i) {
      prev_end = std::max(prev_end, r.runs[(s - 1) * n + i].end);
      first_start = std::min(first_start, r.runs[s * n + i].start);
    }
    EXPECT_GE(first_start, prev_end)
        << "step " << s << " started before step " << s - 1 << " ended";
  }
  std::map<CoreId, std::vector<std::pair<TimeUs, TimeUs>>> by_core;
  for (const RunRecord& run : r.runs) by_core[run.core].push_back({run.start, run.end});
  for (auto& [core, iv] : by_core) {
    std::sort(iv.begin(), iv.end());
    for (size_t i = 1; i < iv.size(); ++i) {
      EXPECT_GE(iv[i].first, iv[i - 1].second) << "core " << core << " ran two tasks at once";
    }
  }
}

std::vector<Buffer> ClusterTest::FetchOutputs(JobId job, uint32_t run) {
  std::string endpoint = cluster_->Call([&]() -> std::string {
    const OutputLocation* loc = cluster_->controller().OutputOf(job, run);
    return loc ? cluster_->controller().workers()[loc->worker].data_endpoint : "";
  });
  EXPECT_FALSE(endpoint.empty()) << "no location for run " << run;
  if (endpoint.empty()) return {};
  auto got = worker::FetchOutputs(endpoint, data_token(), job, run, 10000);
  EXPECT_TRUE(got.ok()) << got.status().ToString();
  return got.ok() ? std::move(got).value() : std::vector<Buffer>{};
}

std::vector<float> Floats(const Buffer& b) {
  std::vector<float> v(b.data.size() / sizeof(float));
  if (!v.empty()) std::memcpy(v.data(), b.data.data(), v.size() * sizeof(float));
  return v;
}

std::vector<float> ScaleGenerated(int64_t n, double factor) {
  for (const auto& k : worker::BuiltinKernels()) {
    if (k.name != "scale") continue;
    Args raw = {{"n", n}, {"factor", factor}};
    return Floats(k.kernel(worker::KernelArgs(raw), {})[0]);
  }
  return {};
}

}  // namespace hmpmd::testing
