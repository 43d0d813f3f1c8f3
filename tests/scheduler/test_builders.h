// Builders shared by the scheduler tests: job specs, graphs, devices, and a
// tiny deterministic virtual-time loop that drives a Scheduler without
// threads or clocks.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <functional>
#include <initializer_list>
#include <memory>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "hmpmd/protocol/job_spec.h"
#include "hmpmd/scheduler/job_graph.h"
#include "hmpmd/scheduler/resource_pool.h"
#include "hmpmd/scheduler/scheduler.h"

namespace hmpmd::test {

// Prints and records a seed so a failure can be replayed.
inline void LogSeed(const char* what, uint64_t seed) {
  std::printf("[   SEED   ] %s seed=%llu\n", what, static_cast<unsigned long long>(seed));
  ::testing::Test::RecordProperty(what, std::to_string(seed));
}

// One task; defaults follow docs/job-spec.md (submodel "default", core cube).
class TaskBuilder {
 public:
  explicit TaskBuilder(std::string id, std::string kernel = "spin") {
    t_.id = std::move(id);
    t_.kernel = std::move(kernel);
  }
  TaskBuilder& Kernel(std::string k) {
    t_.kernel = std::move(k);
    return *this;
  }
  // A spin/sleep duration (args.us).
  TaskBuilder& Us(int64_t us) { return Arg("us", us); }
  TaskBuilder& Arg(std::string name, ArgValue v) {
    t_.args.push_back({std::move(name), std::move(v)});
    return *this;
  }
  TaskBuilder& Core(CoreKind k) {
    t_.core = k;
    return *this;
  }
  TaskBuilder& Vector() { return Core(CoreKind::kVector); }
  // As a spec that names its core ("core": ...).
  TaskBuilder& GivenCore(CoreKind k) {
    t_.core_given = true;
    return Core(k);
  }
  TaskBuilder& Inputs(std::initializer_list<std::string> in) {
    t_.inputs.assign(in.begin(), in.end());
    return *this;
  }
  TaskBuilder& Submodel(std::string s) {
    t_.submodel = std::move(s);
    return *this;
  }
  TaskBuilder& Flops(double f) {
    t_.cost.flops = f;
    return *this;
  }
  TaskBuilder& Bytes(double b) {
    t_.cost.bytes = b;
    return *this;
  }
  TaskBuilder& Collective(std::string group, std::string op, double bytes = 0) {
    t_.collective = CollectiveSpec{std::move(group), std::move(op), bytes};
    return *this;
  }
  const TaskSpec& spec() const { return t_; }
  operator TaskSpec() const { return t_; }  // NOLINT: builder

 private:
  TaskSpec t_;
};

class SpecBuilder {
 public:
  SpecBuilder& Name(std::string n) {
    s_.name = std::move(n);
    return *this;
  }
  SpecBuilder& Repeat(uint32_t r) {
    s_.repeat = r;
    return *this;
  }
  SpecBuilder& Submodel(std::string name, SubmodelKind kind = SubmodelKind::kGeneric,
                        uint32_t devices = 0) {
    s_.submodels.push_back({std::move(name), kind, devices});
    return *this;
  }
  SpecBuilder& Add(const TaskSpec& t) {
    s_.tasks.push_back(t);
    return *this;
  }
  // A chain ids[0] -> ids[1] -> ..., each spinning `us`.
  SpecBuilder& Chain(std::initializer_list<std::string> ids, int64_t us) {
    std::string prev;
    for (const std::string& id : ids) {
      TaskBuilder t(id);
      t.Us(us);
      if (!prev.empty()) t.Inputs({prev});
      Add(t);
      prev = id;
    }
    return *this;
  }
  JobSpec Build() const { return s_; }
  operator JobSpec() const { return s_; }  // NOLINT: builder

 private:
  JobSpec s_;
};

// Builds the graph and fails the test (returning nullptr) when Build rejects it.
inline std::shared_ptr<const JobGraph> BuildGraph(JobSpec spec) {
  auto g = JobGraph::Build(std::move(spec));
  EXPECT_TRUE(g.ok()) << g.status().ToString();
  return g.ok() ? *g : nullptr;
}

// A device with `cube` and `vector` cores; `kernels` empty means all.
inline DeviceDesc Device(std::string name, uint32_t cube, uint32_t vector = 0,
                         std::vector<std::string> kernels = {}) {
  DeviceDesc d;
  d.name = std::move(name);
  d.cores = {cube, vector};
  d.kernels = std::move(kernels);
  return d;
}

// Index of the first task with this id in a spec, or -1.
inline int IndexOf(const JobSpec& spec, const std::string& id) {
  for (size_t i = 0; i < spec.tasks.size(); ++i) {
    if (spec.tasks[i].id == id) return static_cast<int>(i);
  }
  return -1;
}

// Drives a Scheduler in virtual time: each dispatched run takes
// duration(job, run) microseconds and starts when dispatched (or when the
// earlier runs queued on its core end). Events are handled in (end time,
// dispatch order) order, so a run is fully deterministic.
class VirtualLoop {
 public:
  struct Started {
    Dispatch d;
    TimeUs dispatched = 0;
    TimeUs start = 0;
    TimeUs end = 0;
    uint64_t seq = 0;  // dispatch order
    bool finished = false;
    uint64_t finish_seq = 0;       // order in which results reached the scheduler
    uint64_t finished_before = 0;  // results delivered before this dispatch
  };
  using Duration = std::function<TimeUs(JobId, uint32_t run)>;

  // By default a run lasts the `us` argument of its task (at least 1).
  explicit VirtualLoop(Scheduler* s, Duration duration = nullptr)
      : s_(s), duration_(std::move(duration)) {
    if (!duration_) {
      duration_ = [this](JobId job, uint32_t run) {
        const JobRun* j = s_->job(job);
        const TaskSpec& t = j->graph->spec_task(run % j->graph->size());
        return std::max<TimeUs>(1, static_cast<TimeUs>(ArgNumber(t.args, "us", 1)));
      };
    }
  }

  TimeUs now() const { return now_; }
  // Moves virtual time forward (never back).
  void AdvanceTo(TimeUs t) { now_ = std::max(now_, t); }
  size_t pending() const { return pending_.size(); }
  const std::vector<Started>& log() const { return log_; }

  // Asks the scheduler for decisions at the current time; returns how many.
  size_t Schedule() {
    std::vector<Dispatch> out;
    s_->Schedule(now_, &out);
    for (const Dispatch& d : out) {
      Started st;
      st.d = d;
      st.dispatched = now_;
      TimeUs& free_at = core_free_[d.core];
      st.start = std::max(now_, free_at);
      st.end = st.start + duration_(d.job, d.run);
      free_at = st.end;
      st.seq = next_seq_++;
      st.finished_before = next_finish_;
      log_.push_back(st);
      pending_.push_back(log_.size() - 1);
    }
    return out.size();
  }

  // Delivers the earliest pending completion; false when none is pending.
  bool DeliverNext() {
    if (pending_.empty()) return false;
    auto it = std::min_element(pending_.begin(), pending_.end(), [this](size_t a, size_t b) {
      return std::pair(log_[a].end, log_[a].seq) < std::pair(log_[b].end, log_[b].seq);
    });
    Started& st = log_[*it];
    pending_.erase(it);
    now_ = std::max(now_, st.end);
    st.finished = true;
    st.finish_seq = next_finish_++;
    s_->OnTaskDone(st.d.job, st.d.run, st.d.attempt, st.start, st.end, now_);
    return true;
  }

  // Forgets pending completions of runs on `device` (their worker died).
  void DropPendingOn(DeviceId device) {
    std::erase_if(pending_, [&](size_t i) { return log_[i].d.device == device; });
  }

  // Schedules and delivers until nothing is pending; returns the events handled.
  int RunToIdle(int max_events = 100000) {
    int events = 0;
    Schedule();
    while (events < max_events && DeliverNext()) {
      ++events;
      Schedule();
    }
    return events;
  }

  // The log entries of one job's run, in dispatch order.
  std::vector<const Started*> RunsOf(JobId job, uint32_t run) const {
    std::vector<const Started*> out;
    for (const Started& st : log_) {
      if (st.d.job == job && st.d.run == run) out.push_back(&st);
    }
    return out;
  }

 private:
  Scheduler* s_;
  Duration duration_;
  TimeUs now_ = 0;
  std::vector<Started> log_;
  std::vector<size_t> pending_;
  std::unordered_map<CoreId, TimeUs> core_free_;
  uint64_t next_seq_ = 0;
  uint64_t next_finish_ = 0;
};

}  // namespace hmpmd::test
