// A job's summary as REST gives it (JobSummaryJson), from a controller that
// is never Run: its jobs are never dispatched.
#include "hmpmd/controller/job_report.h"

#include <gtest/gtest.h>

#include <map>
#include <nlohmann/json.hpp>

#include "hmpmd/controller/controller.h"
#include "hmpmd/controller/job_spec_parser.h"
#include "hmpmd/protocol/json_text.h"
#include "hmpmd/sim/pool_spec.h"
#include "hmpmd/sim/simulator.h"

namespace hmpmd {
namespace {

TEST(JobReportTest, AJobNotStartedOrNotEndedHasNullTimes) {
  ControllerOptions o;
  o.listen = "tcp://127.0.0.1:0";
  Controller c(o);
  auto id = c.Submit({R"({"name":"j","tasks":[{"id":"a","kernel":"noop"}]})"});
  ASSERT_TRUE(id.ok()) << id.status().ToString();
  const JobRun& job = *c.scheduler().job(*id);
  nlohmann::json j = JobSummaryJson(job, c.scheduler().pool(), false);
  EXPECT_TRUE(j["started_us"].is_null()) << j.dump();  // it said -1
  EXPECT_TRUE(j["finished_us"].is_null()) << j.dump();
  EXPECT_TRUE(j["submitted_us"].is_number_integer()) << j.dump();
  ASSERT_TRUE(c.Cancel(*id).ok());
  j = JobSummaryJson(job, c.scheduler().pool(), false);
  EXPECT_EQ(j["state"], "cancelled");
  EXPECT_TRUE(j["started_us"].is_null()) << j.dump();
  EXPECT_TRUE(j["finished_us"].is_number_integer()) << j.dump();
}

// TraceText writes the trace event by event (no document of about 2 KB a
// run): the same text as TraceJson's dump, and valid JSON.
TEST(JobReportTest, TraceTextIsTraceJsonsText) {
  SimOptions so;
  so.pool = MakePoolSpec(4);
  auto sim = Simulator::Create(so);
  ASSERT_TRUE(sim.ok()) << sim.status().ToString();
  auto spec = ParseJobSpec(R"({"name":"j","repeat":3,"tasks":[
      {"id":"a","kernel":"spin","args":{"us":100}},
      {"id":"b","kernel":"spin","args":{"us":50},"inputs":["a"],"core":"vector"},
      {"id":"\u00e9","kernel":"noop","inputs":["a","b"]}]})");
  ASSERT_TRUE(spec.ok()) << spec.status().ToString();
  auto graph = JobGraph::Build(std::move(spec).value());
  ASSERT_TRUE(graph.ok()) << graph.status().ToString();
  auto id = (*sim)->Submit(std::move(graph).value());
  ASSERT_TRUE(id.ok()) << id.status().ToString();
  ASSERT_TRUE((*sim)->Run().ok());
  const JobRun& job = *(*sim)->scheduler().job(*id);
  const ResourcePool& pool = (*sim)->scheduler().pool();
  const std::string text = TraceText(job, pool);
  EXPECT_EQ(text, JsonText(TraceJson(job, pool)));
  const nlohmann::json parsed = nlohmann::json::parse(text);
  int complete = 0;
  for (const auto& e : parsed["traceEvents"]) complete += e["ph"] == "X";
  EXPECT_EQ(complete, 9);
}

// A job reloaded after a restart: the scheduler holds its done runs
// without a core; the trace takes their place from the job's history, on
// devices of their own, says where history is missing, and a clock_sync
// event gives ts 0 on the wall clock.
TEST(JobReportTest, RunsDoneBeforeARestartAreTracedFromTheirHistory) {
  SimOptions so;
  so.pool = MakePoolSpec(2);
  auto sim = Simulator::Create(so);
  ASSERT_TRUE(sim.ok()) << sim.status().ToString();
  auto spec = ParseJobSpec(R"({"name":"j","tasks":[
      {"id":"a","kernel":"spin","args":{"us":100}},
      {"id":"b","kernel":"spin","args":{"us":50},"inputs":["a"],"core":"vector"},
      {"id":"c","kernel":"noop","inputs":["b"]}]})");
  ASSERT_TRUE(spec.ok()) << spec.status().ToString();
  auto graph = JobGraph::Build(std::move(spec).value());
  ASSERT_TRUE(graph.ok()) << graph.status().ToString();
  auto id = (*sim)->Submit(std::move(graph).value());
  ASSERT_TRUE(id.ok()) << id.status().ToString();
  ASSERT_TRUE((*sim)->Run().ok());
  JobRun job = *(*sim)->scheduler().job(*id);
  const ResourcePool& pool = (*sim)->scheduler().pool();
  // Runs a and b were reloaded: no core. a's place was stored, b's not.
  job.runs[0].core = kNoCore;
  job.runs[1].core = kNoCore;
  auto h = std::make_shared<JobHistory>();
  h->submitted_unix_us = 1'700'000'000'000'000;
  PastRun a;
  a.run = 0;
  a.placed = true;
  a.worker = 0;
  h->workers = {"old-host:1"};
  a.device = 7;
  a.kind = CoreKind::kVector;
  a.lane = 1;
  a.start_unix_us = 1'700'000'000'000'010;
  a.end_unix_us = a.start_unix_us + (job.runs[0].end - job.runs[0].start);
  PastRun b;
  b.run = 1;
  h->runs = {a, b};
  h->unplaced = 1;
  const JobClock clock{WallClock{job.runs[2].start, 1'700'000'000'100'000}, h};
  const nlohmann::json t = nlohmann::json::parse(TraceText(job, pool, nullptr, &clock));
  std::map<std::string, nlohmann::json> x;
  nlohmann::json sync, missing;
  std::map<int, std::string> names;
  for (const auto& e : t["traceEvents"]) {
    if (e["ph"] == "X") x[e["name"]] = e;
    if (e["name"] == "clock_sync") sync = e;
    if (e["name"] == "history_missing") missing = e;
    if (e["name"] == "process_name") names[e["pid"]] = e["args"]["name"];
  }
  ASSERT_EQ(x.size(), 2u) << t.dump();
  ASSERT_TRUE(x.count("a") && x.count("c")) << t.dump();
  EXPECT_GE(x["a"]["pid"].get<int>(), static_cast<int>(pool.device_count()))
      << "a past device is not one of this pool's";
  EXPECT_EQ(x["a"]["tid"], 1001);
  EXPECT_EQ(names[x["a"]["pid"]], "device 7 old-host:1 (before a controller restart)");
  EXPECT_EQ(x["a"]["ts"], 0) << "the first run starts the trace";
  EXPECT_EQ(x["c"]["ts"], 1'700'000'000'100'000 - a.start_unix_us);
  EXPECT_EQ(sync["args"]["ts0_unix_us"], a.start_unix_us) << t.dump();
  EXPECT_EQ(sync["args"]["ts0"], Rfc3339(a.start_unix_us));
  EXPECT_EQ(missing["args"]["runs"], 1) << t.dump();
  // The summary keeps the stored submit time and says what is missing.
  const nlohmann::json s = JobSummaryJson(job, pool, false, nullptr, &clock);
  EXPECT_EQ(s["submitted_unix_us"], h->submitted_unix_us);
  EXPECT_EQ(s["submitted_at"], "2023-11-14T22:13:20.000000Z");
  EXPECT_TRUE(s["history_missing"].is_string()) << s.dump();
  // Without a clock (a simulation) the trace is as before: placed runs only.
  const nlohmann::json plain = TraceJson(job, pool);
  int complete = 0;
  for (const auto& e : plain["traceEvents"]) complete += e["ph"] == "X";
  EXPECT_EQ(complete, 1);
}

}  // namespace
}  // namespace hmpmd
