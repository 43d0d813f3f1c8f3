// Controller::Submit, the one way a job gets in: what it takes (spec text,
// a built graph, or both) and when its caller hears the outcome (at once,
// or once the job's record is in the store).
#include "hmpmd/controller/controller.h"

#include <gtest/gtest.h>

#include <chrono>
#include <future>
#include <memory>
#include <thread>
#include <utility>
#include <vector>

#include "hmpmd/store/in_memory_job_store.h"

namespace hmpmd {
namespace {

constexpr char kSpec[] = R"({"name":"j","tasks":[{"id":"a","kernel":"noop"}]})";

// A controller on a free port (with `store`, if any, written every
// millisecond) whose loop runs on a thread of its own.
class SubmitTest : public ::testing::Test {
 protected:
  void Start(std::shared_ptr<JobStore> store = nullptr) {
    ControllerOptions o;
    o.listen = "tcp://127.0.0.1:0";
    o.store = std::move(store);
    o.store_writer.flush_ms = 1;
    controller_ = std::make_unique<Controller>(o);
    ASSERT_TRUE(controller_->Start().ok());
    loop_ = std::thread([this] { controller_->Run(); });
  }
  void TearDown() override {
    if (loop_.joinable()) {
      controller_->Stop();
      loop_.join();
    }
  }
  // Runs `fn` on the loop and returns what it returns.
  template <typename F>
  auto OnLoop(F fn) {
    std::promise<decltype(fn())> p;
    controller_->Post([&] { p.set_value(fn()); });
    return p.get_future().get();
  }

  // What a submit's `done` heard, and whether it had by the time Submit
  // returned.
  struct Heard {
    std::vector<Result<JobId>> outcomes;
    bool before_return = false;
  };
  // Submits on the loop; returns Submit's result and the outcomes heard.
  std::pair<Result<JobId>, std::shared_ptr<Heard>> SubmitOnLoop(JobSubmission job) {
    auto heard = std::make_shared<Heard>();
    Result<JobId> id = OnLoop([&] {
      Result<JobId> r = controller_->Submit(
          std::move(job), [heard](Result<JobId> o) { heard->outcomes.push_back(o); });
      heard->before_return = !heard->outcomes.empty();
      return r;
    });
    return {std::move(id), heard};
  }
  // Waits (bounded) on the loop until `heard` has an outcome.
  void WaitHeard(const std::shared_ptr<Heard>& heard) {
    for (int i = 0; i < 1000 && OnLoop([&] { return heard->outcomes.empty(); }); ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
  }

  std::unique_ptr<Controller> controller_;
  std::thread loop_;
};

TEST_F(SubmitTest, WithoutAStoreTheOutcomeIsHeardBeforeSubmitReturns) {
  ASSERT_NO_FATAL_FAILURE(Start());
  auto [id, heard] = SubmitOnLoop({kSpec});
  ASSERT_TRUE(id.ok()) << id.status().ToString();
  EXPECT_TRUE(heard->before_return);
  ASSERT_EQ(heard->outcomes.size(), 1u);
  EXPECT_EQ(heard->outcomes[0].value(), *id);
  EXPECT_FALSE(OnLoop([&] { return controller_->scheduler().job(*id)->held; }));
}

TEST_F(SubmitTest, AStoredJobIsHeldAndHeardOfOnceItsRecordIsWritten) {
  auto store = std::make_shared<InMemoryJobStore>();
  ASSERT_NO_FATAL_FAILURE(Start(store));
  Result<JobId> id = Status::Internal("not submitted");
  auto heard = std::make_shared<Heard>();
  bool held = false;
  // Submit and look at the job in one loop turn: the write comes after.
  OnLoop([&] {
    id = controller_->Submit({kSpec}, [heard](Result<JobId> o) { heard->outcomes.push_back(o); });
    heard->before_return = !heard->outcomes.empty();
    held = id.ok() && controller_->scheduler().job(*id)->held;
    return 0;
  });
  ASSERT_TRUE(id.ok()) << id.status().ToString();
  EXPECT_FALSE(heard->before_return);
  EXPECT_TRUE(held) << "nothing runs before its record is written";
  WaitHeard(heard);
  ASSERT_EQ(OnLoop([&] { return heard->outcomes.size(); }), 1u);
  EXPECT_EQ(heard->outcomes[0].value(), *id);
  EXPECT_FALSE(OnLoop([&] { return controller_->scheduler().job(*id)->held; }));
  EXPECT_GE(store->records_written(), 1u);
}

TEST_F(SubmitTest, AFailedWriteWithdrawsTheJobAndIsHeardOnce) {
  auto store = std::make_shared<InMemoryJobStore>();
  ASSERT_NO_FATAL_FAILURE(Start(store));
  store->FailWrites(true);  // a full disk, not yet found: the submit is taken
  auto [id, heard] = SubmitOnLoop({kSpec});
  ASSERT_TRUE(id.ok()) << id.status().ToString();
  WaitHeard(heard);
  const auto outcomes = OnLoop([&] { return heard->outcomes; });
  ASSERT_EQ(outcomes.size(), 1u);
  EXPECT_EQ(outcomes[0].status().code(), StatusCode::kUnavailable);
  EXPECT_NE(
      outcomes[0].status().message().find("job not submitted: the job store cannot be written"),
      std::string::npos)
      << outcomes[0].status().ToString();
  EXPECT_EQ(OnLoop([&] { return controller_->scheduler().job(*id)->state; }), JobState::kCancelled);
  store->FailWrites(false);
}

TEST_F(SubmitTest, ARefusalIsHeardAtOnceAndAddsNoJob) {
  ASSERT_NO_FATAL_FAILURE(Start());
  auto [id, heard] = SubmitOnLoop({R"({"tasks":[{"id":"a"}]})"});
  EXPECT_EQ(id.status().code(), StatusCode::kInvalidArgument) << id.status().ToString();
  EXPECT_TRUE(heard->before_return);
  ASSERT_EQ(heard->outcomes.size(), 1u);
  EXPECT_EQ(heard->outcomes[0].status().message(), id.status().message());
  EXPECT_TRUE(OnLoop([&] { return controller_->scheduler().jobs().empty(); }));
}

TEST_F(SubmitTest, AGraphBuiltElsewhereIsTakenAsItIsAndNotStoredWithoutItsText) {
  auto store = std::make_shared<InMemoryJobStore>();
  ASSERT_NO_FATAL_FAILURE(Start(store));
  JobSpec spec;
  spec.name = "built";
  spec.tasks.resize(1);
  spec.tasks[0].id = "a";
  spec.tasks[0].kernel = "noop";
  auto graph = JobGraph::Build(std::move(spec));
  ASSERT_TRUE(graph.ok());
  auto [id, heard] = SubmitOnLoop({"", *graph});
  ASSERT_TRUE(id.ok()) << id.status().ToString();
  EXPECT_TRUE(heard->before_return) << "a job not stored waits for no write";
  EXPECT_EQ(OnLoop([&] { return controller_->scheduler().job(*id)->graph.get(); }), graph->get());
}

}  // namespace
}  // namespace hmpmd
