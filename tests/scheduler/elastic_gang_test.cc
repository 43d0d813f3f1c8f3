// Elastic sets and gangs on pools too small for what the job asks: a gang
// bound to a set placed before members that may go anywhere, a set below
// its gang's floor taking its devices back, sets short of their ask
// reported on the job. (Found by sim_random_test.)
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "hmpmd/sim/simulator.h"
#include "test_builders.h"

namespace hmpmd {
namespace {

// Runs `spec` under `policy` on `devices` devices of 1 cube and 2 vector
// cores; the job must succeed.
void ExpectSucceeds(const JobSpec& spec, const std::string& policy, uint32_t devices) {
  SimOptions o;
  o.policy = policy;
  o.pool = MakePoolSpec(devices);
  o.pool.cores = {1, 2};
  auto sim = Simulator::Create(o);
  ASSERT_TRUE(sim.ok());
  auto id = (*sim)->Submit(test::BuildGraph(spec));
  ASSERT_TRUE(id.ok()) << id.status().message();
  Status st = (*sim)->Run();
  ASSERT_TRUE(st.ok()) << st.message();
  EXPECT_EQ((*sim)->scheduler().job(*id)->state, JobState::kSucceeded);
}

// Regression (found by the test above): an elastic set lent all but one
// device while idle; its 3-member gang then became ready with nothing else
// running, and each member was offered the last device's second vector
// core, which another member holds: stuck until time moved past the
// dwell, which nothing moved.
TEST(ElasticGang, SetBelowItsGangTakesDevicesBackWhenNothingRuns) {
  test::SpecBuilder b;
  b.Submodel("learner", SubmodelKind::kLearner, 3).Submodel("reward", SubmodelKind::kReward, 1);
  for (int i = 0; i < 6; ++i) {
    b.Add(test::TaskBuilder("r" + std::to_string(i)).Us(100).Submodel("reward"));
  }
  for (int m = 0; m < 3; ++m) {
    b.Add(test::TaskBuilder("g" + std::to_string(m), "allgather")
              .Vector()
              .Submodel("learner")
              .Inputs({"r0", "r1", "r2", "r3", "r4", "r5"})
              .Collective("g", "allgather", 4096));
  }
  ExpectSucceeds(b.Build(), "hmpmd", 4);
}

// Regression (found by the test above): a gang's members bound to a small
// set came after members that may go anywhere, which took the set's
// devices first; the gang was offered the same way every pass.
TEST(ElasticGang, GangMemberBoundToASetIsPlacedFirstWhenOthersTookItsDevices) {
  test::SpecBuilder b;
  b.Submodel("actor", SubmodelKind::kActor, 1).Submodel("free");
  for (int m = 0; m < 4; ++m) {
    b.Add(test::TaskBuilder("g" + std::to_string(m), "broadcast")
              .Submodel(m == 3 ? "actor" : "free")
              .Collective("g", "broadcast", 4096));
  }
  for (uint32_t devices : {4u, 5u, 8u}) ExpectSucceeds(b.Build(), "hmpmd", devices);
}

// Two stateful sub-models asking 5 + 5 devices of 8 overlap; the shortfall
// is on the job (JobRun::short_sets: hmpmd sim's short_sets, the job's JSON,
// hmpmd status).
TEST(ElasticGang, ElasticSetsShortOfTheirAskAreReported) {
  test::SpecBuilder b;
  b.Submodel("a", SubmodelKind::kActor, 5).Submodel("b", SubmodelKind::kActor, 5);
  b.Add(test::TaskBuilder("x").Us(10).Submodel("a"));
  b.Add(test::TaskBuilder("y").Us(10).Submodel("b"));
  for (uint32_t devices : {8u, 10u}) {
    SimOptions o;
    o.pool = MakePoolSpec(devices);
    auto sim = Simulator::Create(o);
    ASSERT_TRUE(sim.ok());
    auto id = (*sim)->Submit(test::BuildGraph(b.Build()));
    ASSERT_TRUE(id.ok());
    ASSERT_TRUE((*sim)->Run().ok());
    const std::vector<SetShortfall>& f = (*sim)->scheduler().job(*id)->short_sets;
    if (devices == 10) {
      EXPECT_TRUE(f.empty());  // room for both: disjoint, nothing to report
      continue;
    }
    ASSERT_EQ(f.size(), 2u);
    for (const SetShortfall& s : f) {
      EXPECT_EQ(s.asked, 5u);
      EXPECT_EQ(s.got, 5u);
      EXPECT_EQ(s.shared, 2u);  // 5 + 5 on 8: two devices in both sets
    }
  }
}

// A gang spanning two sets of one device each grows one of them past its
// ask; that set is not short (it read "asked 1 and got 2").
TEST(ElasticGang, ASetAGangGrewPastItsAskIsNotReportedShort) {
  test::SpecBuilder b;
  b.Submodel("a", SubmodelKind::kActor, 1).Submodel("b", SubmodelKind::kLearner, 1);
  for (const char* sm : {"a", "b"}) {
    b.Add(test::TaskBuilder(std::string("m") + sm, "allreduce")
              .Submodel(sm)
              .Collective("g", "allreduce", 256));
  }
  SimOptions o;
  o.pool = MakePoolSpec(3);
  auto sim = Simulator::Create(o);
  ASSERT_TRUE(sim.ok());
  auto id = (*sim)->Submit(test::BuildGraph(b.Build()));
  ASSERT_TRUE(id.ok());
  ASSERT_TRUE((*sim)->Run().ok());
  for (const SetShortfall& f : (*sim)->scheduler().job(*id)->short_sets) {
    ADD_FAILURE() << "set " << f.submodel << " asked " << f.asked << ", got " << f.got << " ("
                  << f.shared << " shared)";
  }
}

// Live, a job admitted before its workers join gets each joining device on
// the set furthest below its ask: 4 + 4 of 5 + 5, disjoint, and reported.
TEST(ElasticGang, SetsFilledByJoiningDevicesReportWhatTheyGot) {
  test::SpecBuilder b;
  b.Submodel("a", SubmodelKind::kActor, 5).Submodel("b", SubmodelKind::kActor, 5);
  b.Add(test::TaskBuilder("x").Us(10).Submodel("a"));
  b.Add(test::TaskBuilder("y").Us(10).Submodel("b"));
  auto policy = MakePolicy("hmpmd");
  ASSERT_TRUE(policy.ok());
  Scheduler sched(SchedulerOptions{}, std::move(policy).value());
  auto id = sched.AddJob(test::BuildGraph(b.Build()), 0);
  ASSERT_TRUE(id.ok()) << id.status().message();
  EXPECT_TRUE(sched.job(*id)->short_sets.empty());  // no device yet: nothing to say
  for (int d = 0; d < 8; ++d) sched.AddDevice(test::Device("w" + std::to_string(d), 1, 1));
  const std::vector<SetShortfall>& f = sched.job(*id)->short_sets;
  ASSERT_EQ(f.size(), 2u);
  for (const SetShortfall& s : f) {
    EXPECT_EQ(s.asked, 5u);
    EXPECT_EQ(s.got, 4u);
    EXPECT_EQ(s.shared, 0u);
  }
  sched.AddDevice(test::Device("w8", 1, 1));
  sched.AddDevice(test::Device("w9", 1, 1));
  EXPECT_TRUE(sched.job(*id)->short_sets.empty());  // both got their ask
}

}  // namespace
}  // namespace hmpmd
