// A job's end is answered by GET /api/v1/jobs/{id} only once it is in the
// job store: a client told a job ended (`hmpmd submit --wait`) must not see
// it run again after a controller crash. With the store's writes failing
// (a full disk) the ended job is answered 503, naming its state and why,
// and once the store takes writes again, with its end.
#include <gtest/gtest.h>

#include <chrono>
#include <memory>
#include <string>
#include <thread>

#include "hmpmd/store/in_memory_job_store.h"
#include "rest_api_fixture.h"

namespace hmpmd::testing {
namespace {

class JobEndStoredTest : public RestApiTest {
 protected:
  void SetUp() override {
    memory_ = std::make_shared<InMemoryJobStore>();
    store_ = memory_;
    RestApiTest::SetUp();
  }
  std::shared_ptr<InMemoryJobStore> memory_;
};

TEST_F(JobEndStoredTest, AnEndedJobIsAnsweredOnlyOnceItsEndIsStored) {
  const uint64_t id = SubmitOk(R"({"name":"short","tasks":[{"id":"a","kernel":"sleep",)"
                               R"("args":{"us":200000}}]})");
  memory_->FailWrites(true);  // the submit is stored (201); its end will not be
  const std::string target = "/api/v1/jobs/" + std::to_string(id);
  HttpResponse r;
  for (int i = 0; i < 400; ++i) {
    r = Call("GET", target);
    if (r.status != 200 || json::parse(r.body).value("state", "") != "running") break;
    std::this_thread::sleep_for(std::chrono::milliseconds(25));
  }
  EXPECT_EQ(r.status, 503) << r.body;
  EXPECT_NE(
      r.body.find("job " + std::to_string(id) + " succeeded, but the job store cannot be written"),
      std::string::npos)
      << r.body;
  memory_->FailWrites(false);  // room again: the retried batch goes in
  json j;
  for (int i = 0; i < 400; ++i) {
    r = Call("GET", target);
    if (r.status == 200) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(25));
  }
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(json::parse(r.body).value("state", ""), "succeeded") << r.body;
}

}  // namespace
}  // namespace hmpmd::testing
