// Tests for the hmpmd policy's elastic device sets
// (scheduler/device_share.{h,cc}): a sub-model with devices = N runs only on
// its set of N, idle devices move to backlogged sub-models (never while a
// task of the loser runs there, never thrashing), elastic:false pins a set,
// gangs keep distinct devices, and devices dying or joining reshape sets.
#include "hmpmd/scheduler/device_share.h"

#include <gtest/gtest.h>

#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "hmpmd/scheduler/hmpmd_policy.h"
#include "hmpmd/scheduler/scheduler.h"
#include "test_builders.h"

namespace hmpmd {
namespace {

using test::Device;
using test::SpecBuilder;
using test::TaskBuilder;
using test::VirtualLoop;

class DeviceShareTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto p = MakePolicy("hmpmd");
    ASSERT_TRUE(p.ok());
    sched_ = std::make_unique<Scheduler>(SchedulerOptions{}, std::move(*p));
  }
  const DeviceShare& share() const {
    return dynamic_cast<const HmpmdPolicy&>(sched_->policy()).share();
  }
  // `n` devices of one cube (and `vector`) core, `per_node` to a node.
  void AddDevices(uint32_t n, uint32_t per_node = 8, uint32_t vector = 0) {
    for (uint32_t i = 0; i < n; ++i) {
      DeviceDesc d = Device("d" + std::to_string(i), 1, vector);
      d.node = i / per_node;
      sched_->AddDevice(d);
    }
  }
  JobId Add(const JobSpec& spec) {
    graph_ = test::BuildGraph(spec);
    auto id = sched_->AddJob(graph_, 0);
    EXPECT_TRUE(id.ok()) << id.status().ToString();
    return id.ok() ? *id : 0;
  }
  uint32_t SubmodelOf(const Dispatch& d) const {
    return graph_->task(d.run % graph_->size()).submodel;
  }

  // The sets of every sub-model of `job` now.
  std::map<uint32_t, std::set<DeviceId>> Sets(JobId job) const {
    std::map<uint32_t, std::set<DeviceId>> sets;
    for (uint32_t s = 0; s < graph_->spec().submodels.size(); ++s) {
      const auto& v = share().DeviceSet(job, s);
      sets[s] = std::set<DeviceId>(v.begin(), v.end());
    }
    return sets;
  }

  // Replays the recorded moves from the sets at admission: every run
  // started on a device its sub-model's set held at that time, and no
  // device left a set while a run of that sub-model was on it.
  void ExpectRunsStayedInSets(JobId job, std::map<uint32_t, std::set<DeviceId>> sets,
                              const VirtualLoop& loop) {
    const auto& moves = share().moves();
    // Forward in time: apply moves at or before each dispatch.
    std::vector<const VirtualLoop::Started*> order;
    for (const auto& st : loop.log()) order.push_back(&st);
    size_t next_move = 0;
    for (const VirtualLoop::Started* st : order) {
      while (next_move < moves.size() && moves[next_move].at <= st->dispatched) {
        const DeviceMove& m = moves[next_move++];
        if (m.job != job) continue;
        if (m.from != kNoSubmodel) sets[m.from].erase(m.device);
        if (m.to != kNoSubmodel) sets[m.to].insert(m.device);
      }
      uint32_t sm = SubmodelOf(st->d);
      if (graph_->spec().submodels[sm].devices == 0) continue;
      EXPECT_TRUE(sets[sm].count(st->d.device))
          << graph_->spec_task(st->d.run % graph_->size()).id << " ran on device " << st->d.device
          << " outside its set at t=" << st->dispatched;
    }
    for (const DeviceMove& m : moves) {
      if (m.job != job || m.from == kNoSubmodel || m.to == kNoSubmodel) continue;
      for (const auto& st : loop.log()) {
        if (st.d.device != m.device || SubmodelOf(st.d) != static_cast<uint32_t>(m.from)) continue;
        EXPECT_FALSE(st.start <= m.at && m.at < st.end)
            << "device " << m.device << " left sub-model " << m.from << " at t=" << m.at
            << " while its run started at " << st.start << " ran until " << st.end;
      }
    }
  }

  std::unique_ptr<Scheduler> sched_;
  std::shared_ptr<const JobGraph> graph_;
};

// `n` independent tasks of `sm`, each spinning `us`.
void AddMany(SpecBuilder& b, const std::string& sm, int n, int64_t us) {
  for (int i = 0; i < n; ++i) b.Add(TaskBuilder(sm + std::to_string(i)).Us(us).Submodel(sm));
}

TEST_F(DeviceShareTest, TasksOfASetRunOnlyOnItsDevicesOnFewNodes) {
  AddDevices(16, /*per_node=*/4);
  SpecBuilder b;
  b.Submodel("a", SubmodelKind::kActor, 4).Submodel("free");
  AddMany(b, "a", 20, 100);
  AddMany(b, "free", 20, 100);
  JobSpec spec = b.Build();
  spec.elastic = false;
  JobId job = Add(spec);
  const std::vector<DeviceId> set = share().DeviceSet(job, 0);
  ASSERT_EQ(set.size(), 4u);
  std::set<uint32_t> nodes;
  for (DeviceId d : set) nodes.insert(sched_->pool().device(d).desc.node);
  EXPECT_EQ(nodes.size(), 1u) << "4 devices fit on one node of 4";
  VirtualLoop loop(sched_.get());
  loop.RunToIdle();
  ASSERT_EQ(sched_->job(job)->state, JobState::kSucceeded);
  std::set<DeviceId> used_a, used_free;
  for (const auto& st : loop.log())
    (SubmodelOf(st.d) == 0 ? used_a : used_free).insert(st.d.device);
  EXPECT_EQ(used_a, std::set<DeviceId>(set.begin(), set.end()));
  EXPECT_GT(used_free.size(), 4u) << "devices = 0 runs anywhere";
  EXPECT_EQ(share().MoveCount(job), 0u);
}

// Rule 0: sub-models that keep no state between tasks (encoders, stages,
// experts, generic) float over the pool whatever their `devices` says; an
// actor's set still holds its tasks.
TEST_F(DeviceShareTest, StatelessSubmodelsFloatOverThePool) {
  AddDevices(8);
  SpecBuilder b;
  b.Submodel("enc", SubmodelKind::kEncoder, 2)
      .Submodel("exp", SubmodelKind::kExpert, 2)
      .Submodel("act", SubmodelKind::kActor, 2);
  AddMany(b, "enc", 16, 100);
  AddMany(b, "exp", 16, 100);
  AddMany(b, "act", 16, 100);
  JobId job = Add(b.Build());
  EXPECT_TRUE(share().DeviceSet(job, 0).empty());
  EXPECT_TRUE(share().DeviceSet(job, 1).empty());
  EXPECT_EQ(share().DeviceSet(job, 2).size(), 2u);
  VirtualLoop loop(sched_.get());
  loop.RunToIdle();
  ASSERT_EQ(sched_->job(job)->state, JobState::kSucceeded);
  std::map<uint32_t, std::set<DeviceId>> used;
  for (const auto& st : loop.log()) used[SubmodelOf(st.d)].insert(st.d.device);
  EXPECT_GT(used[0].size(), 2u) << "an encoder's devices = 2 is no set";
  EXPECT_GT(used[1].size(), 2u) << "an expert's devices = 2 is no set";
  EXPECT_LE(used[2].size(), 2u) << "an actor's tasks stay on its set";
}

TEST_F(DeviceShareTest, IdleDeviceMovesToTheBackloggedSubmodelNeverUnderARun) {
  AddDevices(4);
  SpecBuilder b;
  b.Submodel("busy", SubmodelKind::kActor, 2).Submodel("idle", SubmodelKind::kLearner, 2);
  AddMany(b, "busy", 12, 1000);
  // idle: one long run on one of its devices, then work after busy's.
  b.Add(TaskBuilder("i0").Us(9000).Submodel("idle"));
  b.Add(TaskBuilder("i1").Us(100).Submodel("idle").Inputs({"busy11", "i0"}));
  JobId job = Add(b.Build());
  auto initial = Sets(job);
  VirtualLoop loop(sched_.get());
  loop.RunToIdle();
  ASSERT_EQ(sched_->job(job)->state, JobState::kSucceeded);
  uint64_t to_busy = 0;
  for (const DeviceMove& m : share().moves()) to_busy += m.from == 1 && m.to == 0;
  EXPECT_GE(to_busy, 1u) << "the idle learner device should serve the actor's backlog";
  std::set<DeviceId> busy_devices;
  for (const auto& st : loop.log()) {
    if (SubmodelOf(st.d) == 0) busy_devices.insert(st.d.device);
  }
  EXPECT_GE(busy_devices.size(), 3u);
  // 12 runs of 1 ms on 2 devices take 6 ms; with a third, 4 ms.
  TimeUs busy_end = 0;
  for (const auto& st : loop.log()) {
    if (SubmodelOf(st.d) == 0) busy_end = std::max(busy_end, st.end);
  }
  EXPECT_LT(busy_end, 6000);
  ExpectRunsStayedInSets(job, initial, loop);
}

TEST_F(DeviceShareTest, ElasticFalsePinsTheSets) {
  for (bool job_level : {true, false}) {
    SetUp();
    AddDevices(4);
    SpecBuilder b;
    b.Submodel("busy", SubmodelKind::kActor, 2).Submodel("idle", SubmodelKind::kLearner, 2);
    AddMany(b, "busy", 12, 1000);
    b.Add(TaskBuilder("i1").Us(100).Submodel("idle").Inputs({"busy11"}));
    JobSpec spec = b.Build();
    if (job_level) {
      spec.elastic = false;
    } else {
      spec.submodels[0].elastic = false;
      spec.submodels[1].elastic = false;
    }
    JobId job = Add(spec);
    const std::vector<DeviceId> set = share().DeviceSet(job, 0);
    VirtualLoop loop(sched_.get());
    loop.RunToIdle();
    ASSERT_EQ(sched_->job(job)->state, JobState::kSucceeded);
    EXPECT_EQ(share().MoveCount(job), 0u) << "job_level=" << job_level;
    std::set<DeviceId> used;
    for (const auto& st : loop.log()) {
      if (SubmodelOf(st.d) == 0) used.insert(st.d.device);
    }
    EXPECT_EQ(used, std::set<DeviceId>(set.begin(), set.end())) << "job_level=" << job_level;
  }
}

TEST_F(DeviceShareTest, SteadyWorkloadDoesNotThrash) {
  AddDevices(8);
  SpecBuilder b;
  b.Submodel("a", SubmodelKind::kActor, 4).Submodel("b", SubmodelKind::kReward, 4);
  // Both always have ready work: chains of one task per device, 50 deep.
  for (const char* sm : {"a", "b"}) {
    for (int lane = 0; lane < 4; ++lane) {
      std::string prev;
      for (int k = 0; k < 50; ++k) {
        std::string id = std::string(sm) + std::to_string(lane) + "_" + std::to_string(k);
        TaskBuilder t(id);
        t.Us(100 + 37 * ((lane + k) % 5)).Submodel(sm);
        if (!prev.empty()) t.Inputs({prev});
        b.Add(t);
        prev = id;
      }
    }
  }
  JobId job = Add(b.Build());
  auto initial = Sets(job);
  VirtualLoop loop(sched_.get());
  loop.RunToIdle();
  ASSERT_EQ(sched_->job(job)->state, JobState::kSucceeded);
  // Each chain finishes at its own time; a finished sub-model's idle
  // devices may go to the other, nothing else moves.
  EXPECT_LE(share().MoveCount(job), 4u);
  ExpectRunsStayedInSets(job, initial, loop);
}

TEST_F(DeviceShareTest, GangMembersTakeDistinctDevicesOfTheSet) {
  AddDevices(6, 8, /*vector=*/2);
  SpecBuilder b;
  b.Submodel("tp", SubmodelKind::kLearner, 2).Submodel("other");
  b.Add(TaskBuilder("c0").Us(100).Submodel("tp"));
  b.Add(TaskBuilder("c1").Us(100).Submodel("tp").Inputs({"c0"}));
  for (const char* in : {"c0", "c1"}) {
    b.Add(TaskBuilder(std::string("ar_") + in, "allreduce")
              .Vector()
              .Submodel("tp")
              .Inputs({"c1"})
              .Collective("g", "allreduce", 1 << 20));
  }
  AddMany(b, "other", 6, 50);
  JobId job = Add(b.Build());
  const std::vector<DeviceId> set = share().DeviceSet(job, 0);
  ASSERT_EQ(set.size(), 2u);
  VirtualLoop loop(sched_.get());
  loop.RunToIdle();
  ASSERT_EQ(sched_->job(job)->state, JobState::kSucceeded);
  std::set<DeviceId> members;
  for (const auto& st : loop.log()) {
    const std::string& id = graph_->spec_task(st.d.run % graph_->size()).id;
    if (id.rfind("ar_", 0) == 0) members.insert(st.d.device);
  }
  EXPECT_EQ(members, std::set<DeviceId>(set.begin(), set.end()));
}

TEST_F(DeviceShareTest, SetsFillAsDevicesJoinAndShrinkWhenOneDies) {
  // Admitted on an empty pool (a live controller before workers register).
  SpecBuilder b;
  b.Submodel("a", SubmodelKind::kActor, 3).Submodel("b", SubmodelKind::kLearner, 2);
  AddMany(b, "a", 9, 100);
  AddMany(b, "b", 4, 100);
  JobId job = Add(b.Build());
  EXPECT_TRUE(share().DeviceSet(job, 0).empty());
  AddDevices(2);
  EXPECT_EQ(share().DeviceSet(job, 0).size() + share().DeviceSet(job, 1).size(), 2u);
  AddDevices(4);
  ASSERT_EQ(share().DeviceSet(job, 0).size(), 3u);
  ASSERT_EQ(share().DeviceSet(job, 1).size(), 2u);
  std::set<DeviceId> all;
  for (uint32_t s = 0; s < 2; ++s) {
    for (DeviceId d : share().DeviceSet(job, s)) EXPECT_TRUE(all.insert(d).second) << "disjoint";
  }
  VirtualLoop loop(sched_.get());
  loop.Schedule();
  DeviceId dead = share().DeviceSet(job, 0).front();
  sched_->RemoveDevice(dead, loop.now());
  loop.DropPendingOn(dead);
  EXPECT_EQ(share().DeviceSet(job, 0).size(), 2u);
  for (DeviceId d : share().DeviceSet(job, 0)) EXPECT_NE(d, dead);
  loop.RunToIdle();
  ASSERT_EQ(sched_->job(job)->state, JobState::kSucceeded);
  bool left = false;
  for (const DeviceMove& m : share().moves()) left |= m.device == dead && m.to == kNoSubmodel;
  EXPECT_TRUE(left) << "the dead device's leaving is recorded";
  for (const auto& st : loop.log()) {
    if (st.dispatched > 0) {
      EXPECT_NE(st.d.device, dead);
    }
  }
}

TEST_F(DeviceShareTest, SubmodelAskingForThePoolSpansItAndOthersPartitionIt) {
  AddDevices(8);
  SpecBuilder b;
  b.Submodel("dense", SubmodelKind::kLearner, 8)
      .Submodel("e0", SubmodelKind::kActor, 4)
      .Submodel("e1", SubmodelKind::kActor, 4);
  AddMany(b, "dense", 8, 100);
  AddMany(b, "e0", 4, 100);
  AddMany(b, "e1", 4, 100);
  JobId job = Add(b.Build());
  EXPECT_EQ(share().DeviceSet(job, 0).size(), 8u);
  std::set<DeviceId> e0(share().DeviceSet(job, 1).begin(), share().DeviceSet(job, 1).end());
  for (DeviceId d : share().DeviceSet(job, 2)) EXPECT_FALSE(e0.count(d)) << "experts disjoint";
  VirtualLoop loop(sched_.get());
  loop.RunToIdle();
  EXPECT_EQ(sched_->job(job)->state, JobState::kSucceeded);
}

// Rule 1's choice of nodes, on nodes of 3, 5, 2 and 6 devices: a set takes
// the smallest node it fits in, else the largest and then the rest the same
// way; another job's set takes the devices fewest sets hold first. The
// layout was rewritten to cost O(log nodes) per pick (it scanned every node
// per pick); these are the picks it made before.
TEST_F(DeviceShareTest, LayoutTakesTheSmallestNodeThatFitsElseTheLargest) {
  const uint32_t sizes[] = {3, 5, 2, 6};
  DeviceId id = 0;
  for (uint32_t node = 0; node < 4; ++node) {
    for (uint32_t i = 0; i < sizes[node]; ++i, ++id) {
      DeviceDesc d = Device("d" + std::to_string(id), 1, 0);
      d.node = node;
      sched_->AddDevice(d);
    }
  }
  SpecBuilder b;
  b.Submodel("a", SubmodelKind::kActor, 8)
      .Submodel("b", SubmodelKind::kActor, 4)
      .Submodel("c", SubmodelKind::kActor, 3);
  AddMany(b, "a", 1, 100);
  AddMany(b, "b", 1, 100);
  AddMany(b, "c", 1, 100);
  const JobId job = Add(b.Build());
  const auto set = [&](JobId j, uint32_t sm) {
    const auto& v = share().DeviceSet(j, sm);
    return std::set<DeviceId>(v.begin(), v.end());
  };
  // 8 fits no node: the 6 (devices 10-15), then the 2 (8-9), the smallest
  // that holds the other 2.
  EXPECT_EQ(set(job, 0), (std::set<DeviceId>{8, 9, 10, 11, 12, 13, 14, 15}));
  EXPECT_EQ(set(job, 1), (std::set<DeviceId>{3, 4, 5, 6})) << "4 fit the 5, not the 3";
  EXPECT_EQ(set(job, 2), (std::set<DeviceId>{0, 1, 2})) << "3 fit the 3 exactly";
  // Device 7 alone holds no set; then every device holds one, and the
  // smallest node that holds the last device is the 2.
  SpecBuilder other;
  other.Submodel("d", SubmodelKind::kActor, 2);
  AddMany(other, "d", 1, 100);
  const JobId second = Add(other.Build());
  EXPECT_EQ(set(second, 0), (std::set<DeviceId>{7, 8}));
}

}  // namespace
}  // namespace hmpmd
