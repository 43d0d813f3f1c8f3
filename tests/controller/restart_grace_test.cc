// A restarted controller's recovery grace counts from when workers can
// register (after Bind), not from before its store load: with millions of
// stored runs the load alone took longer than the default 2 s grace, and
// dispatch resumed before any worker could come back.
#include <gtest/gtest.h>

#include <chrono>
#include <thread>

#include "controller.h"
#include "in_memory_job_store.h"

namespace hmpmd {
namespace {

// A store whose Load() takes as long as a large file's.
class SlowLoadStore : public InMemoryJobStore {
 public:
  Result<std::vector<StoredJob>> Load() override {
    std::this_thread::sleep_for(std::chrono::milliseconds(400));
    return InMemoryJobStore::Load();
  }
};

TEST(RestartGraceTest, TheGraceStartsAfterTheStoreIsLoaded) {
  auto store = std::make_shared<SlowLoadStore>();
  std::vector<StoreRecord> records;
  records.push_back(JobSubmittedRecord{
      1, "j", R"({"name":"j","tasks":[{"id":"a","kernel":"sleep","args":{"us":1000}}]})", 1});
  records.push_back(WorkerRecord{"host/123/w", true});
  ASSERT_TRUE(store->Write(records).ok());
  ControllerOptions o;
  o.listen = "tcp://127.0.0.1:0";
  o.store = store;
  o.recovery_grace_ms = 300;
  Controller c(o);
  ASSERT_TRUE(c.Start().ok());
  EXPECT_TRUE(c.recovery().open());
  EXPECT_TRUE(c.recovery().Waiting(Controller::NowUs()))
      << "the 300 ms grace ran out during the 400 ms load";
}

}  // namespace
}  // namespace hmpmd
