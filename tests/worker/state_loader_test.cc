// StateLoader: loads begun ahead of their tasks, taken once by the lane
// that runs the task, dropped with their job.
#include "state_loader.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace hmpmd::worker {
namespace {

// A load function that counts its calls and, while `hold` is set, waits.
struct FakeLoads {
  std::atomic<int> calls{0};
  std::atomic<bool> hold{false};
  std::atomic<int> dropped{0};
  StateLoader loader{
      [this](JobId, const std::string& submodel, const std::string& from) -> Result<uint64_t> {
        ++calls;
        for (int i = 0; i < 2000 && hold.load(); ++i) {
          std::this_thread::sleep_for(std::chrono::milliseconds(1));
        }
        if (from == "gone") return Status::NotFound("no state of " + submodel);
        return uint64_t{64};
      },
      [this](JobId) { ++dropped; }};
};

TEST(StateLoaderTest, ALoadBegunAheadIsTakenOnceByItsTask) {
  FakeLoads f;
  EXPECT_FALSE(f.loader.Take(1, "stage", nullptr).has_value());  // none begun
  f.loader.Begin(1, "stage", "tcp://holder:1");
  f.loader.Begin(1, "stage", "tcp://holder:1");  // a second task of it: one load
  std::optional<StateLoader::Outcome> got = f.loader.Take(1, "stage", nullptr);
  ASSERT_TRUE(got.has_value());
  EXPECT_TRUE(got->status.ok());
  EXPECT_EQ(got->bytes, 64u);
  EXPECT_LE(got->start_us, got->end_us);
  EXPECT_EQ(f.calls.load(), 1);
  EXPECT_EQ(f.loader.begun(), 1u);
  EXPECT_FALSE(f.loader.Take(1, "stage", nullptr).has_value());  // taken
  // Keyed by job and sub-model; a failed load says why.
  f.loader.Begin(2, "stage", "gone");
  got = f.loader.Take(2, "stage", nullptr);
  ASSERT_TRUE(got.has_value());
  EXPECT_EQ(got->status.code(), StatusCode::kNotFound);
}

TEST(StateLoaderTest, AFailedLoadNoTaskTookIsAskedAgain) {
  FakeLoads f;
  f.loader.Begin(1, "stage", "gone");  // its task is cancelled: never taken
  for (int i = 0; i < 2000 && f.loader.ended() == 0; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  ASSERT_EQ(f.loader.ended(), 1u);
  f.loader.Begin(1, "stage", "tcp://holder:2");  // the next task of it, another holder
  std::optional<StateLoader::Outcome> got = f.loader.Take(1, "stage", nullptr);
  ASSERT_TRUE(got.has_value());
  EXPECT_TRUE(got->status.ok()) << got->status.ToString();
  EXPECT_EQ(f.calls.load(), 2);
}

TEST(StateLoaderTest, ATaskCancelledWhileItsStateLoadsStopsWaiting) {
  FakeLoads f;
  f.hold = true;
  f.loader.Begin(1, "stage", "tcp://holder:1");
  std::atomic<bool> cancelled{false};
  std::thread cancel([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(30));
    cancelled = true;
  });
  std::optional<StateLoader::Outcome> got = f.loader.Take(1, "stage", &cancelled);
  cancel.join();
  ASSERT_TRUE(got.has_value());
  EXPECT_EQ(got->status.code(), StatusCode::kCancelled);
  f.hold = false;
}

TEST(StateLoaderTest, AFreedJobsLoadsAreDroppedEvenOneInFlight) {
  FakeLoads f;
  f.hold = true;
  f.loader.Begin(1, "a", "tcp://holder:1");  // runs (and waits)
  f.loader.Begin(1, "b", "tcp://holder:1");  // queued behind it
  for (int i = 0; i < 2000 && f.calls.load() == 0; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  ASSERT_EQ(f.calls.load(), 1);
  f.loader.ForgetJob(1);
  f.hold = false;
  // The running one ends and what it installed is dropped; the queued one
  // never runs; neither leaves an outcome.
  for (int i = 0; i < 2000 && f.dropped.load() == 0; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  EXPECT_EQ(f.dropped.load(), 1);
  EXPECT_FALSE(f.loader.Take(1, "a", nullptr).has_value());
  EXPECT_FALSE(f.loader.Take(1, "b", nullptr).has_value());
  EXPECT_EQ(f.calls.load(), 1);
}

TEST(StateLoaderTest, StopFailsWhatIsQueued) {
  FakeLoads f;
  f.hold = true;
  f.loader.Begin(1, "a", "tcp://holder:1");
  f.loader.Begin(1, "b", "tcp://holder:1");
  for (int i = 0; i < 2000 && f.calls.load() == 0; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  std::thread stop([&] { f.loader.Stop(); });
  f.hold = false;
  stop.join();
  std::optional<StateLoader::Outcome> b = f.loader.Take(1, "b", nullptr);
  ASSERT_TRUE(b.has_value());
  EXPECT_EQ(b->status.code(), StatusCode::kUnavailable);
  f.loader.Begin(1, "c", "tcp://holder:1");  // after Stop: nothing begins
  EXPECT_FALSE(f.loader.Take(1, "c", nullptr).has_value());
}

}  // namespace
}  // namespace hmpmd::worker
