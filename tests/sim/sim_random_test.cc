// Randomized robustness of the simulator and every policy: seeded random
// job specs (pipelines with mb/pass, shards with program orders, collective
// gangs of every op and many sizes, both core kinds, stateful sub-models
// with and without devices and state_bytes, sends, repeated steps, two jobs
// at once) on random pools (1-64 devices, 0-2 cores per kind). Every run
// either completes every task or is refused with a one-line error (at
// admission, or for spmd-1f1b at time 0); no policy beats the lower bound;
// a gang's members start and end together.
#include <gtest/gtest.h>

#include <random>
#include <string>
#include <vector>

#include "hmpmd/scheduler/hmpmd_policy.h"
#include "hmpmd/sim/simulator.h"
#include "test_builders.h"

namespace hmpmd {
namespace {

using Rng = std::mt19937_64;

uint32_t Uniform(Rng& rng, uint32_t lo, uint32_t hi) {
  return std::uniform_int_distribution<uint32_t>(lo, hi)(rng);
}
bool Chance(Rng& rng, double p) { return std::bernoulli_distribution(p)(rng); }

constexpr SubmodelKind kKinds[] = {SubmodelKind::kGeneric, SubmodelKind::kEncoder,
                                   SubmodelKind::kExpert,  SubmodelKind::kActor,
                                   SubmodelKind::kReward,  SubmodelKind::kLearner};
constexpr const char* kOps[] = {"allreduce", "allgather", "reduce_scatter", "alltoall",
                                "broadcast"};

struct Gen {
  Rng& rng;
  JobSpec spec;
  bool bad_orders = false;  // orders at random, not in program order
  uint32_t order = 0;

  std::string AnySubmodel() {
    return spec.submodels[Uniform(rng, 0, static_cast<uint32_t>(spec.submodels.size()) - 1)].name;
  }
  CoreKind AnyCore() { return Chance(rng, 0.7) ? CoreKind::kCube : CoreKind::kVector; }
  void MaybeOrder(TaskSpec& t) {
    if (!Chance(rng, 0.6)) return;
    t.args.push_back({"shard", int64_t{Uniform(rng, 0, 9)}});
    if (Chance(rng, 0.6)) {
      t.args.push_back({"order", int64_t{bad_orders ? Uniform(rng, 0, 20) : order++}});
    }
  }
  std::vector<std::string> Inputs(uint32_t most) {
    std::vector<std::string> in;
    for (uint32_t k = Uniform(rng, 0, most); k > 0 && !spec.tasks.empty(); --k) {
      const std::string& id =
          spec.tasks[Uniform(rng, 0, static_cast<uint32_t>(spec.tasks.size()) - 1)].id;
      if (std::find(in.begin(), in.end(), id) == in.end()) in.push_back(id);
    }
    return in;
  }
  void Plain(const std::string& id) {
    TaskSpec t;
    t.id = id;
    t.submodel = AnySubmodel();
    t.core = AnyCore();
    switch (Uniform(rng, 0, 3)) {
      case 0:
        t.kernel = "spin";
        t.args.push_back({"us", int64_t{Uniform(rng, 1, 500)}});
        break;
      case 1:
        t.kernel = "gemm";
        t.cost.flops = Uniform(rng, 1, 1000) * 1e6;
        break;
      case 2:
        t.kernel = "send";
        t.core = CoreKind::kVector;
        t.cost.bytes = Uniform(rng, 0, 1 << 22);
        break;
      default:
        t.kernel = "noop";
        break;
    }
    t.inputs = Inputs(2);
    MaybeOrder(t);
    spec.tasks.push_back(std::move(t));
  }
  void Gang(const std::string& name) {
    const uint32_t members = Uniform(rng, 1, Chance(rng, 0.2) ? 12 : 5);
    const std::string op = kOps[Uniform(rng, 0, 4)];
    const std::string sm = AnySubmodel();
    const CoreKind core = AnyCore();
    const double bytes = Uniform(rng, 1, 1 << 20);
    const size_t before = spec.tasks.size();  // members read only earlier tasks
    for (uint32_t m = 0; m < members; ++m) {
      TaskSpec t;
      t.id = name + "_" + std::to_string(m);
      t.kernel = op;
      t.submodel = Chance(rng, 0.9) ? sm : AnySubmodel();
      t.core = core;
      t.collective = CollectiveSpec{name, op, bytes};
      for (uint32_t k = Uniform(rng, 0, 1); k > 0 && before > 0; --k) {
        // Not a send or another gang's member: their data would set this
        // member's size apart from the others' (refused, as a worker
        // would fail it); spin, noop and gemm (sized by flops) do not.
        const TaskSpec& in = spec.tasks[Uniform(rng, 0, static_cast<uint32_t>(before) - 1)];
        if (in.kernel != "send" && !in.collective) t.inputs.push_back(in.id);
      }
      if (Chance(rng, 0.7)) {
        t.args.push_back({"shard", int64_t{Chance(rng, 0.8) ? m : Uniform(rng, 0, 9)}});
        if (Chance(rng, 0.5)) t.args.push_back({"order", int64_t{bad_orders ? m : order}});
      }
      spec.tasks.push_back(std::move(t));
    }
    ++order;
  }
  void Pipeline(uint32_t stages, uint32_t mbs) {
    const size_t first = spec.submodels.size();
    for (uint32_t s = 0; s < stages; ++s) {
      SubmodelSpec sm;
      sm.name = "stage" + std::to_string(s);
      sm.kind = SubmodelKind::kPipelineStage;
      sm.devices = Uniform(rng, 0, 3);
      spec.submodels.push_back(sm);
    }
    auto id = [](char p, uint32_t s, uint32_t j) {
      return std::string(1, p) + std::to_string(s) + "_" + std::to_string(j);
    };
    for (int pass = 0; pass < 2; ++pass) {
      for (uint32_t j = 0; j < mbs; ++j) {
        for (uint32_t si = 0; si < stages; ++si) {
          const uint32_t s = pass == 0 ? si : stages - 1 - si;
          const char c = pass == 0 ? 'f' : 'b';
          TaskSpec t;
          t.id = id(c, s, j);
          t.submodel = spec.submodels[first + s].name;
          t.kernel = "spin";
          t.args = {{"us", int64_t{Uniform(rng, 10, 300)}},
                    {"shard", int64_t{0}},
                    {"mb", int64_t{j}},
                    {"pass", std::string(1, c)}};
          if (pass == 0 && s > 0) t.inputs = {id('f', s - 1, j)};
          if (pass == 1) {
            t.inputs = {id('f', s, j)};
            if (s + 1 < stages) t.inputs.push_back(id('b', s + 1, j));
          }
          spec.tasks.push_back(t);
          if (Chance(rng, 0.3)) {  // the hand-off, in the slot of its compute
            TaskSpec tx;
            tx.id = t.id + "_tx";
            tx.submodel = t.submodel;
            tx.kernel = "send";
            tx.core = CoreKind::kVector;
            tx.cost.bytes = Uniform(rng, 0, 1 << 20);
            tx.inputs = {t.id};
            tx.args = {{"shard", int64_t{0}}, {"mb", int64_t{j}}, {"pass", std::string(1, c)}};
            spec.tasks.push_back(tx);
          }
        }
      }
    }
  }
};

JobSpec RandomSpec(Rng& rng, const std::string& name) {
  Gen g{rng, {}};
  g.spec.name = name;
  g.spec.repeat = Uniform(rng, 1, 3);
  g.spec.elastic = Chance(rng, 0.8);
  g.bad_orders = Chance(rng, 0.1);
  for (uint32_t s = Uniform(rng, 1, 4); s > 0; --s) {
    SubmodelSpec sm;
    sm.name = "sm" + std::to_string(g.spec.submodels.size());
    sm.kind = kKinds[Uniform(rng, 0, 5)];
    sm.devices = Chance(rng, 0.5) ? 0 : Uniform(rng, 1, 10);
    sm.elastic = Chance(rng, 0.8);
    if (Chance(rng, 0.5)) sm.state_bytes = Uniform(rng, 1, 1000) * 1e5;
    g.spec.submodels.push_back(sm);
  }
  if (Chance(rng, 0.4)) g.Pipeline(Uniform(rng, 1, 3), Uniform(rng, 1, 4));
  const uint32_t tasks = Uniform(rng, 1, 30), gangs = Uniform(rng, 0, 3);
  for (uint32_t i = 0; i < tasks + gangs; ++i) {
    if (Uniform(rng, 0, tasks + gangs - 1) < gangs) {
      g.Gang("g" + std::to_string(i));
    } else {
      g.Plain("t" + std::to_string(i));
    }
  }
  return g.spec;
}

PoolSpec RandomPool(Rng& rng) {
  const uint32_t devices = Uniform(rng, 1, 64);
  PoolSpec p = MakePoolSpec(devices);
  p.devices_per_node = Uniform(rng, 1, 8);
  p.nodes = std::max(1u, devices / p.devices_per_node);
  p.cores = {Uniform(rng, 1, 2), Uniform(rng, 1, 2)};
  if (Chance(rng, 0.15)) p.cores[Uniform(rng, 0, 1)] = 0;  // a pool lacking a kind
  return p;
}

// The spec in short, to replay a failure by hand.
std::string Describe(const JobSpec& spec) {
  std::string out = "job " + spec.name + " repeat " + std::to_string(spec.repeat) +
                    (spec.elastic ? "" : " pinned") + "\n";
  for (const SubmodelSpec& sm : spec.submodels) {
    out += "  submodel " + sm.name + " " + std::string(SubmodelKindName(sm.kind)) + " devices " +
           std::to_string(sm.devices) + (sm.elastic ? "" : " pinned") + " state " +
           std::to_string(sm.state_bytes) + "\n";
  }
  for (const TaskSpec& t : spec.tasks) {
    out +=
        "  " + t.id + " " + t.submodel + " " + t.kernel + " " + std::string(CoreKindName(t.core));
    if (t.collective) out += " group " + t.collective->group;
    for (const auto& [k, v] : t.args) {
      out += " " + k + "=";
      if (const auto* i = std::get_if<int64_t>(&v)) out += std::to_string(*i);
      if (const auto* str = std::get_if<std::string>(&v)) out += *str;
    }
    out += " <-";
    for (const std::string& in : t.inputs) out += " " + in;
    out += "\n";
  }
  return out;
}

std::string OneLine(const std::string& s) {
  return s.find('\n') == std::string::npos && !s.empty() ? "" : "not one line: " + s;
}

TEST(SimRandom, EveryPolicyCompletesOrRefusesClearly) {
  constexpr uint64_t kSeed = 20261122;
  constexpr int kCases = 1000;
  test::LogSeed("sim_random", kSeed);
  Rng rng(kSeed);
  int completed = 0, refused = 0;
  for (int c = 0; c < kCases; ++c) {
    const PoolSpec pool = RandomPool(rng);
    std::vector<JobSpec> specs{RandomSpec(rng, "a")};
    if (Chance(rng, 0.25)) specs.push_back(RandomSpec(rng, "b"));
    const std::string where = "case " + std::to_string(c) + " (" + std::to_string(pool.devices()) +
                              " devices, cores " + std::to_string(pool.cores[0]) + "/" +
                              std::to_string(pool.cores[1]) + ")";
    std::vector<std::shared_ptr<const JobGraph>> graphs;
    for (const JobSpec& s : specs) {
      auto g = JobGraph::Build(s);
      ASSERT_TRUE(g.ok()) << where << ": generator made a bad spec: " << g.status().message();
      graphs.push_back(*g);
    }
    for (const std::string& policy : PolicyNames()) {
      SimOptions o;
      o.policy = policy;
      o.pool = pool;
      auto sim = Simulator::Create(o);
      ASSERT_TRUE(sim.ok()) << where << ": " << sim.status().message();
      std::vector<JobId> ids;
      for (const auto& g : graphs) {
        auto id = (*sim)->Submit(g);
        if (!id.ok()) {
          EXPECT_EQ(OneLine(id.status().message()), "") << where;
          ++refused;
          continue;
        }
        ids.push_back(*id);
      }
      const std::string at = where + " " + policy;
      Status st = (*sim)->Run();
      EXPECT_TRUE(st.ok()) << at << ": " << st.message() << "\n"
                           << Describe(specs[0]) << (specs.size() > 1 ? Describe(specs[1]) : "");
      if (!st.ok()) {
        for (JobId id : ids) {  // what waits, to replay by hand
          const JobRun& job = *(*sim)->scheduler().job(id);
          if (const auto* hp = dynamic_cast<const HmpmdPolicy*>(&(*sim)->scheduler().policy())) {
            for (uint32_t sm = 0; sm < job.graph->spec().submodels.size(); ++sm) {
              std::printf("  set %u:", sm);
              for (DeviceId d : hp->share().DeviceSet(id, sm)) std::printf(" %u", d);
              std::printf("\n");
            }
            for (const DeviceMove& mv : hp->share().moves()) {
              std::printf("  move at %lld dev %u %d -> %d\n", static_cast<long long>(mv.at),
                          mv.device, mv.from, mv.to);
            }
          }
          for (uint32_t r = 0; r < job.runs.size(); ++r) {
            if (job.runs[r].state == TaskState::kDone) continue;
            std::printf("  job %u run %u '%s' state %d\n", static_cast<unsigned>(id), r,
                        job.graph->spec_task(r % job.graph->size()).id.c_str(),
                        static_cast<int>(job.runs[r].state));
          }
        }
        continue;
      }
      const ResourcePool& rp = (*sim)->scheduler().pool();
      for (JobId id : ids) {
        const JobRun& job = *(*sim)->scheduler().job(id);
        if (job.state != JobState::kSucceeded) {
          // Only spmd-1f1b refuses a plan it cannot follow, at time 0, and
          // the baselines built on its plan (spmd-eplb).
          EXPECT_EQ(policy.rfind("spmd-", 0), 0u) << at << ": " << job.error;
          EXPECT_EQ(job.finished, 0) << at << ": " << job.error;
          EXPECT_NE(job.error.find("spmd-1f1b"), std::string::npos) << at << ": " << job.error;
          EXPECT_EQ(OneLine(job.error), "") << at;
          ++refused;
          continue;
        }
        ++completed;
        const JobGraph& g = *job.graph;
        ScheduleMetrics m = ComputeMetrics(job, rp);
        EXPECT_EQ(m.tasks, uint64_t{g.size()} * g.steps()) << at;
        EXPECT_GE(m.makespan_s, m.lower_bound_s * (1 - 1e-9)) << at;
        for (uint32_t step = 0; step < g.steps(); ++step) {
          for (const CollectiveGroup& grp : g.groups()) {
            const TaskRecord& first = job.runs[step * g.size() + grp.members.front()];
            for (uint32_t mb : grp.members) {
              const TaskRecord& r = job.runs[step * g.size() + mb];
              EXPECT_EQ(r.start, first.start) << at << " gang " << grp.name;
              EXPECT_EQ(r.end, first.end) << at << " gang " << grp.name;
            }
          }
        }
      }
    }
  }
  // The generator exercises both outcomes.
  EXPECT_GT(completed, kCases);
  EXPECT_GT(refused, 0);
  std::printf("completed %d job runs, refused %d\n", completed, refused);
}

using test::SpecBuilder;
using test::TaskBuilder;

// Runs `spec` on `devices` devices (8 per node, else one node) under every
// policy: each must complete every task.
void RunsToTheEnd(const JobSpec& spec, uint32_t devices) {
  auto g = JobGraph::Build(spec);
  ASSERT_TRUE(g.ok()) << g.status().message();
  for (const std::string& policy : PolicyNames()) {
    SimOptions o;
    o.policy = policy;
    o.pool = MakePoolSpec(devices);
    auto sim = Simulator::Create(o);
    ASSERT_TRUE(sim.ok()) << sim.status().message();
    auto id = (*sim)->Submit(*g);
    ASSERT_TRUE(id.ok()) << policy << ": " << id.status().message();
    Status st = (*sim)->Run();
    EXPECT_TRUE(st.ok()) << policy << ": " << st.message();
    EXPECT_EQ((*sim)->scheduler().job(*id)->state, JobState::kSucceeded) << policy;
  }
}

TaskSpec Member(const std::string& id, const std::string& group, const std::string& op,
                uint32_t size, const std::string& submodel) {
  TaskSpec t = TaskBuilder(id, op).Vector().Submodel(submodel).Collective(group, op, 1);
  if (op == "alltoall") {
    std::string sizes;
    for (uint32_t m = 0; m < size; ++m) sizes += m ? ",1" : "1";
    t.args = {{"n", int64_t{size}}, {"sizes", sizes}};
  } else {
    t.args = {{"n", int64_t{8} * size}};
  }
  return t;
}

// Found by probing `hmpmd sim` with generated specs (rand24 on 8 devices):
// overlapping device sets (the sets ask for 12 of 8 devices), a device of
// reward set sm0 lent to learner sm5, also held since admission by the
// pinned learner sm2. Recalling the loan took the device from the first
// set holding it, the pinned sm2 (never the borrower), which was left with
// 2 devices for its 3-member gang: "simulation stuck at t=3220 us". A loan
// now comes back only from the set it moved into (DeviceShare::LentTo).
TEST(SimRandom, ARecalledLoanIsNotTakenFromAPinnedSetThatAlsoHoldsIt) {
  SpecBuilder b;
  b.Repeat(3)
      .Submodel("sm0", SubmodelKind::kReward, 1)
      .Submodel("sm2", SubmodelKind::kLearner, 1)
      .Submodel("sm5", SubmodelKind::kLearner, 3);
  JobSpec spec = b.Build();
  spec.submodels[1].elastic = false;
  for (int m = 0; m < 3; ++m) {
    spec.tasks.push_back(Member("a" + std::to_string(m), "g3", "allgather", 3, "sm2"));
  }
  spec.tasks.push_back(TaskBuilder("t79").Vector().Us(1000));
  for (int m = 0; m < 6; ++m) {
    spec.tasks.push_back(Member("b" + std::to_string(m), "g5", "alltoall", 6, "sm0"));
  }
  for (int m = 0; m < 3; ++m) {
    spec.tasks.push_back(Member("c" + std::to_string(m), "g9", "reduce_scatter", 3, "sm5"));
  }
  spec.tasks.push_back(
      TaskBuilder("t129", "sleep").Vector().Us(100).Inputs({"b5"}).Submodel("sm5"));
  RunsToTheEnd(spec, 8);
}

// Found the same way (set348 on 4 and 8 devices): gang g6 has 3 members in
// actor s3 (asks 1 device, floor 3) and 1 in reward s2 (asks 3); the four
// sets ask for 11 devices, so they overlap, and s2's set lay inside s3's:
// the gang needed 4 distinct devices of s3 and s2 together and there were
// 3, for good (pinned or elastic): "simulation stuck". Now every set a
// group spans holds at least the whole group (device_share_layout.cc).
TEST(SimRandom, AGangSpanningOverlappingSetsFindsDistinctDevices) {
  for (bool elastic : {false, true}) {
    SpecBuilder b;
    b.Submodel("s0", SubmodelKind::kReward, 1)
        .Submodel("s1", SubmodelKind::kActor, 1)
        .Submodel("s2", SubmodelKind::kReward, 3)
        .Submodel("s3", SubmodelKind::kActor, 1);
    JobSpec spec = b.Build();
    spec.elastic = elastic;
    for (int m = 0; m < 4; ++m) {
      TaskSpec t =
          Member("g6_" + std::to_string(m), "g6", "reduce_scatter", 4, m == 1 ? "s2" : "s3");
      t.core = CoreKind::kCube;
      spec.tasks.push_back(t);
    }
    for (int m = 0; m < 2; ++m) {
      TaskSpec t = Member("g16_" + std::to_string(m), "g16", "allgather", 2, "s1");
      t.core = CoreKind::kCube;
      spec.tasks.push_back(t);
    }
    for (int m = 0; m < 3; ++m) {
      TaskSpec t = Member("g17_" + std::to_string(m), "g17", "reduce_scatter", 3, "s0");
      t.core = CoreKind::kCube;
      spec.tasks.push_back(t);
    }
    for (uint32_t devices : {4u, 8u}) {
      SCOPED_TRACE((elastic ? "elastic, " : "pinned, ") + std::to_string(devices) + " devices");
      RunsToTheEnd(spec, devices);
    }
  }
}

}  // namespace
}  // namespace hmpmd
