// Faults inside a collective gang: a member whose worker is killed, or
// stopped (SIGSTOP) until it is declared dead and then resumed. The gang
// starts over as a whole on live devices; the stale members are cancelled
// on their workers, so no lane waits out the collective time-out and the
// job succeeds instead of failing a minute later.
#include <signal.h>

#include <nlohmann/json.hpp>
#include <thread>

#include "cluster_fixture.h"

namespace hmpmd::testing {
namespace {

class GangFailureTest : public ClusterTest {
 protected:
  // A sleep, then an all-reduce gang of `members` on vector cores, each
  // reducing `n` floats.
  static std::string GangSpec(int members, int n = 1 << 16) {
    nlohmann::json tasks = nlohmann::json::array();
    tasks.push_back({{"id", "pre"}, {"kernel", "sleep"}, {"args", {{"us", 20000}}}});
    for (int i = 0; i < members; ++i) {
      tasks.push_back({{"id", "ar" + std::to_string(i)},
                       {"kernel", "allreduce"},
                       {"core", "vector"},
                       {"inputs", {"pre"}},
                       {"args", {{"n", n}}},
                       {"collective", {{"group", "g"}, {"op", "allreduce"}, {"bytes", 1 << 18}}}});
    }
    return nlohmann::json{{"tasks", tasks}}.dump();
  }
  // The pid of the worker running gang member `ar1` once the whole gang
  // runs; -1 when that does not happen within the bounded wait.
  pid_t WorkerRunningTheGang() {
    for (int i = 0; i < 5000; ++i) {
      pid_t pid = cluster_->Call([&]() -> pid_t {
        for (const auto& [id, job] : cluster_->controller().scheduler().jobs()) {
          bool all = job.runs.size() == 4;
          for (uint32_t r = 1; all && r < 4; ++r) all = job.runs[r].state == TaskState::kRunning;
          if (!all) continue;
          const DeviceId d =
              cluster_->controller().scheduler().pool().core(job.runs[2].core).device;
          return static_cast<pid_t>(cluster_->controller().workers().OfDevice(d)->pid);
        }
        return -1;
      });
      if (pid > 0) return pid;
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
    }
    return -1;
  }
  static ControllerOptions Fast() {
    ControllerOptions c;
    c.heartbeat_ms = 50;
    c.worker_timeout_ms = 400;
    return c;
  }
};

// Without the whole gang starting over, the dead member ran again alone
// (or next to a peer on one device) and its peers waited for it until the
// collective timed out; the job failed.
TEST_F(GangFailureTest, AKilledMemberRestartsTheGangOnTheLiveWorkers) {
  StartCluster(4, "cube=1,vector=1", Fast());
  pid_t victim = -1;
  std::thread killer([&] {
    victim = WorkerRunningTheGang();
    if (victim > 0) kill(victim, SIGKILL);
  });
  JobResult r = RunSpec(GangSpec(3), 50000);
  killer.join();
  ASSERT_GT(victim, 0) << "the gang never ran";
  ASSERT_EQ(r.state, JobState::kSucceeded) << r.error;
  ExpectValidSchedule(r);
}

// A stopped worker is declared dead while it holds a gang member; the gang
// waits for a third device, which is the same worker once it resumes and
// registers again. The attempt it still holds is stale and must be stopped
// there, or the new attempt queues behind it on the same lane.
TEST_F(GangFailureTest, AStoppedMemberThatComesBackDoesNotBlockTheNewGang) {
  StartCluster(3, "cube=1,vector=1", Fast());
  pid_t victim = -1;
  std::thread stopper([&] {
    victim = WorkerRunningTheGang();
    if (victim <= 0) return;
    kill(victim, SIGSTOP);
    for (int i = 0; i < 5000; ++i) {
      if (cluster_->Call([&] { return cluster_->controller().workers().alive_count(); }) < 3) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
    }
    kill(victim, SIGCONT);
  });
  JobResult r = RunSpec(GangSpec(3, 1 << 22), 50000);
  stopper.join();
  if (victim > 0) kill(victim, SIGCONT);  // never left stopped
  ASSERT_GT(victim, 0) << "the gang never ran";
  ASSERT_EQ(r.state, JobState::kSucceeded) << r.error;
  ExpectValidSchedule(r);
}

}  // namespace
}  // namespace hmpmd::testing
