// The job store's write latency: StoreWriter times every batch it writes,
// and /metrics (LiveMetrics) shows it as a Prometheus histogram when the
// controller has a store.
#include <gtest/gtest.h>

#include <future>
#include <memory>
#include <thread>
#include <utility>

#include "hmpmd/api/live_metrics.h"
#include "hmpmd/store/in_memory_job_store.h"
#include "hmpmd/store/store_writer.h"

namespace hmpmd {
namespace {

constexpr char kSpec[] = R"({"name":"j","tasks":[{"id":"a","kernel":"noop"}]})";

std::vector<StoreRecord> OneRecord(JobId id) {
  std::vector<StoreRecord> r(1);  // built in place: GCC 12 saw a moved variant as uninitialized
  r[0] = JobSubmittedRecord{id, "j", kSpec, 1};
  return r;
}

// A controller on a free port writing to `store` every millisecond.
ControllerOptions WithStore(std::shared_ptr<JobStore> store) {
  ControllerOptions o;
  o.listen = "tcp://127.0.0.1:0";
  o.store = std::move(store);
  o.store_writer.flush_ms = 1;
  return o;
}

TEST(StoreMetricsTest, EveryWrittenBatchIsTimedFailedOnesIncluded) {
  InMemoryJobStore store;
  // Flush() writes at once; the long period keeps the failed batch from
  // being retried (and timed again) before the counts are read.
  StoreWriter writer(&store, StoreWriterOptions{60'000, 8192});
  EXPECT_EQ(writer.write_latency().count, 0u);
  for (JobId id = 1; id <= 3; ++id) {
    auto records = OneRecord(id);
    writer.Append(&records);
    ASSERT_TRUE(writer.Flush().ok());
  }
  store.FailWrites(true);
  auto records = OneRecord(4);
  writer.Append(&records);
  EXPECT_FALSE(writer.Flush().ok());
  StoreWriteLatency l = writer.write_latency();
  EXPECT_EQ(l.count, 4u);
  uint64_t in_buckets = 0;
  for (uint64_t c : l.counts) in_buckets += c;
  EXPECT_EQ(in_buckets, 4u);
  EXPECT_GE(l.sum_s, 0.0);
  EXPECT_EQ(writer.batches_written(), 3u);
  EXPECT_EQ(writer.write_errors(), 1u);

  std::string text;
  AppendStoreMetrics(&text, l, writer.batches_written(), writer.write_errors());
  for (const char* want :
       {"# TYPE hmpmd_store_write_latency_seconds histogram\n",
        "hmpmd_store_write_latency_seconds_bucket{le=\"0.0001\"} ",
        "hmpmd_store_write_latency_seconds_bucket{le=\"+Inf\"} 4\n",
        "hmpmd_store_write_latency_seconds_count 4\n", "hmpmd_store_write_latency_seconds_sum ",
        "hmpmd_store_batches_written_total 3\n", "hmpmd_store_write_errors_total 1\n"}) {
    EXPECT_NE(text.find(want), std::string::npos) << want << "\n" << text;
  }
  store.FailWrites(false);  // the failed batch is written on the way out
}

TEST(StoreMetricsTest, MetricsShowTheControllersStoreWrites) {
  Controller c(WithStore(std::make_shared<InMemoryJobStore>()));
  ASSERT_TRUE(c.Start().ok());
  std::thread loop([&c] { c.Run(); });
  // The loop hands the submitted job to the writer; poll (bounded) until a
  // batch is written, then read the metrics on the loop.
  std::promise<Status> submitted;
  c.Post([&] { submitted.set_value(c.Submit({kSpec}).status()); });
  ASSERT_TRUE(submitted.get_future().get().ok());
  for (int i = 0; i < 500 && c.store_writer()->batches_written() == 0; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  std::promise<std::string> text;
  c.Post([&] { text.set_value(LiveMetrics(&c).PrometheusText(Controller::NowUs(), "")); });
  std::string m = text.get_future().get();
  c.Stop();
  loop.join();
  EXPECT_NE(m.find("hmpmd_store_write_latency_seconds_count 1\n"), std::string::npos) << m;
  EXPECT_NE(m.find("hmpmd_store_batches_written_total 1\n"), std::string::npos) << m;
}

TEST(StoreMetricsTest, SubmitsAreRefusedWhileTheStoreCannotBeWritten) {
  auto store = std::make_shared<InMemoryJobStore>();
  Controller c(WithStore(store));
  ASSERT_TRUE(c.Start().ok());
  std::thread loop([&c] { c.Run(); });
  auto submit = [&c] {
    std::promise<Status> done;
    c.Post([&] { done.set_value(c.Submit({kSpec}).status()); });
    return done.get_future().get();
  };
  store->FailWrites(true);  // a full disk
  // Not known yet: accepted, held (nothing runs) until its write is in,
  // and its answer (the REST 201) waits for the store.
  std::promise<Status> answer;
  std::promise<JobId> first;
  c.Post([&] {
    auto id = c.Submit({kSpec});
    EXPECT_TRUE(id.ok()) << id.status().ToString();
    EXPECT_TRUE(c.scheduler().job(*id)->held);
    c.WhenDurable([&](const Status& st) { answer.set_value(st); });
    first.set_value(*id);
  });
  const JobId withdrawn = first.get_future().get();
  // The write fails: the waiter is told (a 503, not a client timeout), and
  // the job, which never ran, ends cancelled saying why.
  const Status told = answer.get_future().get();
  EXPECT_FALSE(told.ok());
  EXPECT_NE(told.message().find("writes fail"), std::string::npos) << told.ToString();
  auto state = [&c](JobId id) {
    std::promise<std::pair<JobState, std::string>> p;
    c.Post([&] {
      const JobRun* j = c.scheduler().job(id);
      p.set_value({j->state, j->error});
    });
    return p.get_future().get();
  };
  auto [st, why] = state(withdrawn);
  EXPECT_EQ(st, JobState::kCancelled);
  EXPECT_NE(why.find("job not submitted: the job store cannot be written"), std::string::npos)
      << why;

  const Status refused = submit();
  EXPECT_EQ(refused.code(), StatusCode::kUnavailable) << refused.ToString();
  EXPECT_NE(refused.message().find("job not submitted: the job store cannot be written"),
            std::string::npos)
      << refused.message();
  store->FailWrites(false);  // room again: the waiting batch is written
  for (int i = 0; i < 500 && !c.store_writer()->last_write().ok(); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  EXPECT_TRUE(submit().ok());
  c.Stop();
  loop.join();
  // The withdrawn job's records were kept: it is in the store as it ended.
  auto jobs = store->Load();
  ASSERT_TRUE(jobs.ok());
  ASSERT_EQ(jobs->size(), 2u);
  EXPECT_EQ((*jobs)[0].id, withdrawn);
  EXPECT_EQ((*jobs)[0].state, JobState::kCancelled);
}

TEST(StoreMetricsTest, ACancelTheStoreCannotKeepIsRefused) {
  auto store = std::make_shared<InMemoryJobStore>();
  Controller c(WithStore(store));
  ASSERT_TRUE(c.Start().ok());
  std::thread loop([&c] { c.Run(); });
  std::promise<JobId> submitted;
  c.Post([&] {
    auto id = c.Submit({kSpec});
    c.WhenDurable([&, id = *id](const Status&) { submitted.set_value(id); });
  });
  const JobId id = submitted.get_future().get();
  store->FailWrites(true);  // a full disk, found by the next write
  c.Post([&c] { (void)c.Submit({kSpec}); });
  for (int i = 0; i < 500 && c.store_writer()->write_errors() == 0; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  std::promise<std::pair<Status, JobState>> cancel;
  c.Post([&] {
    Status st = c.Cancel(id);
    cancel.set_value({st, c.scheduler().job(id)->state});
  });
  auto [st, state] = cancel.get_future().get();
  EXPECT_EQ(st.code(), StatusCode::kUnavailable) << st.ToString();
  EXPECT_NE(st.message().find("not cancelled: the job store cannot be written"), std::string::npos)
      << st.message();
  EXPECT_NE(state, JobState::kCancelled) << "nothing changed";
  store->FailWrites(false);
  c.Stop();
  loop.join();
}

TEST(StoreMetricsTest, AForgetTheStoreCannotKeepIsRefusedAndOneItKeepsLeavesTheFile) {
  auto store = std::make_shared<InMemoryJobStore>();
  Controller c(WithStore(store));
  ASSERT_TRUE(c.Start().ok());
  std::thread loop([&c] { c.Run(); });
  auto on_loop = [&c](auto fn) {
    std::promise<decltype(fn())> p;
    c.Post([&] { p.set_value(fn()); });
    return p.get_future().get();
  };
  auto durable = [&] {
    std::promise<Status> p;
    c.Post([&] { c.WhenDurable([&](const Status& st) { p.set_value(st); }); });
    return p.get_future().get();
  };
  const JobId id = on_loop([&] { return *c.Submit({kSpec}); });
  ASSERT_TRUE(on_loop([&] { return c.Cancel(id); }).ok());  // no workers: it ends here
  ASSERT_TRUE(durable().ok());
  store->FailWrites(true);  // a full disk, found by the next write
  c.Post([&c] { (void)c.Submit({kSpec}); });
  for (int i = 0; i < 500 && c.store_writer()->write_errors() == 0; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  auto refused = on_loop([&] { return c.Forget(id).status(); });
  EXPECT_EQ(refused.code(), StatusCode::kUnavailable) << refused.ToString();
  EXPECT_NE(refused.message().find("job " + std::to_string(id) +
                                   " not forgotten: the job store cannot be written"),
            std::string::npos)
      << refused.message();
  EXPECT_TRUE(on_loop([&] { return c.scheduler().job(id) != nullptr; })) << "nothing changed";
  store->FailWrites(false);
  for (int i = 0; i < 500 && !c.store_writer()->last_write().ok(); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  auto forgot = on_loop([&] { return c.Forget(id); });
  ASSERT_TRUE(forgot.ok()) << forgot.status().ToString();
  EXPECT_EQ(*forgot, 0u) << "it never ran: no outputs";
  ASSERT_TRUE(durable().ok());
  EXPECT_TRUE(on_loop([&] { return c.scheduler().job(id) == nullptr; }));
  c.Stop();
  loop.join();
  auto jobs = store->Load();
  ASSERT_TRUE(jobs.ok());
  for (const StoredJob& j : *jobs) EXPECT_NE(j.id, id) << "forgotten, yet in the file";
}

TEST(StoreMetricsTest, NoStoreNoStoreMetrics) {
  ControllerOptions o;
  o.listen = "tcp://127.0.0.1:0";
  Controller c(o);
  std::string m = LiveMetrics(&c).PrometheusText(Controller::NowUs(), "");
  EXPECT_NE(m.find("hmpmd_tasks_dispatched_total"), std::string::npos);
  EXPECT_EQ(m.find("hmpmd_store_"), std::string::npos);
}

}  // namespace
}  // namespace hmpmd
