// DeviceShare: laying out the sets (rule 1: at admission and as a driver
// session grows) and following pool changes (rule 3; see device_share.h).
// Placement and task events are in device_share.cc, moves between sets in
// device_share_lend.cc.
//
// Rule 6 (beside device_share.h's 1-5): kernels. Rule 1 takes first the
// devices that run every kernel of the set's tasks (weighing more than a
// store cap or any core kind); a set left empty takes a free device that
// runs them where one is alive, and a set left on a device without them
// moves to a device that joins with them. A set on a worker without its
// kernel waited for ever, cores idle.
#include <algorithm>
#include <set>
#include <tuple>
#include <unordered_set>

#include "hmpmd/scheduler/device_share.h"
#include "hmpmd/scheduler/output_bytes.h"
#include "hmpmd/scheduler/scheduler.h"
#include "hmpmd/scheduler/state_affinity.h"

namespace hmpmd {
namespace {

constexpr DeviceId kNoDevice = UINT32_MAX;

// Rule 6: whether `d` runs every kernel of the set.
bool RunsAll(const ResourcePool& pool, DeviceId d, const std::vector<uint32_t>& kernels) {
  return std::all_of(kernels.begin(), kernels.end(),
                     [&](uint32_t k) { return pool.Supports(d, k); });
}

// Free devices grouped by node, for choosing sets that span few nodes.
struct NodeFree {
  uint32_t node = 0;
  std::vector<DeviceId> devices;  // fewest claims first
  size_t next = 0;
  size_t left() const { return devices.size() - next; }
};

// Takes `need` devices from `nodes`: among the nodes whose next device has
// the fewest claims, the smallest one that fits, else the largest (the
// first in `nodes` among equals). The nodes are kept ordered by (claims of
// their next device, devices left, place in `nodes`), so each pick costs
// O(log nodes): a scan of every node per pick made a set of n devices on
// a pool of m cost O(n m).
std::vector<DeviceId> PickDevices(std::vector<NodeFree>& nodes, uint32_t need,
                                  const std::vector<uint32_t>& claims) {
  using Key = std::tuple<uint32_t, size_t, size_t>;
  auto key = [&](size_t i) {
    const NodeFree& n = nodes[i];
    return Key{claims[n.devices[n.next]], n.left(), i};
  };
  std::set<Key> ranked;
  for (size_t i = 0; i < nodes.size(); ++i) {
    if (nodes[i].left() > 0) ranked.insert(key(i));
  }
  std::vector<DeviceId> out;
  while (need > 0 && !ranked.empty()) {
    const uint32_t claim = std::get<0>(*ranked.begin());
    // The smallest node of this claim that fits; if none does, the largest.
    auto it = ranked.lower_bound(Key{claim, need, 0});
    if (it == ranked.end() || std::get<0>(*it) != claim) {
      it = ranked.lower_bound(Key{claim, std::get<1>(*std::prev(it)), 0});
    }
    const size_t i = std::get<2>(*it);
    ranked.erase(it);
    NodeFree& best = nodes[i];
    while (need > 0 && best.left() > 0 && claims[best.devices[best.next]] == claim) {
      out.push_back(best.devices[best.next++]);
      --need;
    }
    if (best.left() > 0) ranked.insert(key(i));
  }
  return out;
}

// As PickDevices, the devices of the lowest `score` first (rule 4: a pass
// per score, lowest first); those taken leave `nodes`. Where every device
// left scores alike, PickDevices itself.
template <typename Score>
std::vector<DeviceId> PickByScore(std::vector<NodeFree>& nodes, uint32_t need,
                                  const std::vector<uint32_t>& claims, const Score& score) {
  std::vector<uint32_t> levels;
  for (const NodeFree& n : nodes) {
    for (size_t i = n.next; i < n.devices.size(); ++i) levels.push_back(score(n.devices[i]));
  }
  std::sort(levels.begin(), levels.end());
  levels.erase(std::unique(levels.begin(), levels.end()), levels.end());
  if (levels.size() <= 1) return PickDevices(nodes, need, claims);
  std::vector<DeviceId> out;
  for (uint32_t level : levels) {
    if (out.size() >= need) break;
    std::vector<NodeFree> sub;
    for (const NodeFree& n : nodes) {
      NodeFree f{n.node, {}, 0};
      for (size_t i = n.next; i < n.devices.size(); ++i) {
        if (score(n.devices[i]) == level) f.devices.push_back(n.devices[i]);
      }
      if (!f.devices.empty()) sub.push_back(std::move(f));
    }
    // Those taken leave `nodes` in one sweep (a search of every node per
    // device taken was quadratic).
    std::unordered_set<DeviceId> taken;
    for (DeviceId d : PickDevices(sub, need - static_cast<uint32_t>(out.size()), claims)) {
      taken.insert(d);
      out.push_back(d);
    }
    if (taken.empty()) continue;
    for (NodeFree& n : nodes) {
      n.devices.erase(
          std::remove_if(n.devices.begin() + static_cast<std::ptrdiff_t>(n.next), n.devices.end(),
                         [&](DeviceId d) { return taken.count(d) > 0; }),
          n.devices.end());
    }
  }
  return out;
}
}  // namespace

void DeviceShare::AddJob(const JobRun& job, const ResourcePool& pool) {
  pool_ = &pool;
  JobShare& js = jobs_[job.id];
  for (const Set& set : js.sets) wanting_ -= set.want > 0 ? 1 : 0;  // added again
  js = JobShare{};
  js.run = &job;
  GrowJob(job, pool);
}

void DeviceShare::GrowJob(const JobRun& job, const ResourcePool& pool) {
  auto it = jobs_.find(job.id);
  if (it == jobs_.end()) return;
  JobShare& js = it->second;
  js.run = &job;
  const JobGraph& g = *job.graph;
  const JobSpec& spec = g.spec();
  const size_t first = js.sets.size();
  js.sets.resize(spec.submodels.size());
  js.moved_at.resize(pool.device_count(), kNever);
  for (size_t s = first; s < js.sets.size(); ++s) {
    js.sets[s].elastic = spec.elastic && spec.submodels[s].elastic;
    const bool floats = !options_.elastic_dag_sets && StateAffinity::Floats(job, s);
    js.sets[s].want =
        KeepsState(spec.submodels[s], job.open) && !floats ? spec.submodels[s].devices : 0;
    js.sets[s].load_us = s < job.state_load_us.size() ? job.state_load_us[s] : 0;
    if (js.sets[s].want > 0) ++wanting_;
  }
  // Slack and chains only matter to sets (rule 2b/2c).
  if (first == 0 &&
      std::any_of(js.sets.begin(), js.sets.end(), [](const Set& set) { return set.want > 0; })) {
    Analyse(js);
  }
  // A collective group's members in one sub-model need distinct devices.
  // A group spanning sub-models needs as many distinct devices across
  // their sets, which may overlap (a pool smaller than their asks): each
  // of those sets holds at least the whole group, so every member finds a
  // device of its set that no other member took.
  for (const CollectiveGroup& grp : g.groups()) {
    std::unordered_map<uint32_t, uint32_t> per;
    for (uint32_t m : grp.members) ++per[g.task(m).submodel];
    const uint32_t all = static_cast<uint32_t>(grp.members.size());
    const uint32_t lead = grp.members.front();
    const CoreKind kind =
        CommToVector(g.task(lead), g.spec_task(lead)) ? CoreKind::kVector : g.spec_task(lead).core;
    for (const auto& [sm, n] : per) {
      const uint32_t floor = per.size() > 1 ? all : n;
      if (floor > js.sets[sm].floor) {
        js.sets[sm].floor = floor;
        js.sets[sm].floor_kind = kind;
      }
    }
  }
  CountTasks(js);
  Layout(js, first, pool);
  // What the pool granted each new set, and how much of it another holds.
  for (size_t s = first; s < js.sets.size(); ++s) {
    Set& set = js.sets[s];
    set.granted = static_cast<uint32_t>(set.devices.size());
    set.shared = 0;
    for (DeviceId d : set.devices) {
      for (size_t o = 0; o < js.sets.size(); ++o) {
        const Set& other = js.sets[o];
        if (o != s && !other.spans && d < other.slot.size() && other.slot[d] != 0) {
          ++set.shared;
          break;
        }
      }
    }
  }
}

std::vector<SetShortfall> DeviceShare::Shortfalls(JobId job) const {
  std::vector<SetShortfall> out;
  auto it = jobs_.find(job);
  if (it == jobs_.end() || pool_ == nullptr || pool_->alive_device_count() == 0) return out;
  for (uint32_t s = 0; s < it->second.sets.size(); ++s) {
    const Set& set = it->second.sets[s];
    if (set.want == 0 || set.spans) continue;
    // Short: fewer devices than asked, or fewer of its own once those shared
    // with other sets are left out. A set a gang grew past its ask is not.
    if (set.granted < set.want || (set.shared > 0 && set.granted - set.shared < set.want)) {
      out.push_back({s, set.want, set.granted, set.shared});
    }
  }
  return out;
}

void DeviceShare::CountTasks(JobShare& js) {
  const JobGraph& g = *js.run->graph;
  for (uint32_t i = js.tasks_counted; i < g.size() && i < js.run->est_us.size(); ++i) {
    Set& set = js.sets[g.task(i).submodel];
    if (i < js.run->kernel_ids.size()) {
      const uint32_t k = js.run->kernel_ids[i];
      if (std::find(set.kernels.begin(), set.kernels.end(), k) == set.kernels.end()) {
        set.kernels.push_back(k);
      }
    }
    // Communication goes to a vector core where the pool has one.
    set.needs |= 1u << static_cast<uint32_t>(g.spec_task(i).core);
    if (CommToVector(g.task(i), g.spec_task(i))) {
      set.needs |= 1u << static_cast<uint32_t>(CoreKind::kVector);
    }
    set.total_us += js.run->est_us[i] * g.steps();
    // Rule 5: outputs its arguments tell (inputs' sizes are not known yet).
    if (pool_ != nullptr && pool_->options().count_store && set.want > 0) {
      const TaskSpec& t = g.spec_task(i);
      const std::vector<uint64_t> inputs(t.inputs.size(), UINT64_MAX);
      const uint32_t group_size =
          g.task(i).group == kNoGroup
              ? 0
              : static_cast<uint32_t>(g.groups()[g.task(i).group].members.size());
      const OutputGuess out = GuessOutputBytes(t, inputs, group_size);
      if (out.known) set.out_bytes = std::max(set.out_bytes, out.bytes);
    }
    if (g.task(i).is_comm) {
      set.comm_us += js.run->est_us[i];
      ++set.comm_n;
    }
    js.tasks_counted = i + 1;
  }
}

void DeviceShare::Layout(JobShare& js, size_t first, const ResourcePool& pool) {
  claims_.resize(pool.device_count(), 0);
  const uint32_t alive = static_cast<uint32_t>(pool.alive_device_count());
  if (alive == 0) return;  // sets fill as devices join
  std::vector<bool> held(pool.device_count(), false);
  for (size_t s = 0; s < first; ++s) {
    if (js.sets[s].spans) continue;
    for (DeviceId d : js.sets[s].devices) held[d] = true;
  }
  auto free_nodes = [&](const Set* own) {
    std::unordered_map<uint32_t, size_t> index;
    std::vector<NodeFree> nodes;
    for (DeviceId d = 0; d < pool.device_count(); ++d) {
      if (!pool.device(d).alive || (own == nullptr && held[d])) continue;
      if (own != nullptr && d < own->slot.size() && own->slot[d] != 0) continue;
      uint32_t node = pool.device(d).desc.node;
      auto [it, fresh] = index.emplace(node, nodes.size());
      if (fresh) nodes.push_back({node, {}, 0});
      nodes[it->second].devices.push_back(d);
    }
    for (NodeFree& n : nodes) {
      std::stable_sort(n.devices.begin(), n.devices.end(),
                       [&](DeviceId a, DeviceId b) { return claims_[a] < claims_[b]; });
    }
    return nodes;
  };
  // Largest sets first, so they find whole nodes.
  std::vector<uint32_t> order;
  for (size_t s = first; s < js.sets.size(); ++s) {
    if (js.sets[s].want > 0) order.push_back(static_cast<uint32_t>(s));
  }
  std::stable_sort(order.begin(), order.end(),
                   [&](uint32_t a, uint32_t b) { return js.sets[a].want > js.sets[b].want; });
  const JobId id = js.run->id;
  std::vector<NodeFree> nodes = free_nodes(nullptr);
  for (uint32_t s : order) {
    Set& set = js.sets[s];
    // Rule 4: the kinds of its tasks a device lacks, its gang's kind
    // weighing more than all others together.
    auto lacks = [&](DeviceId d) {
      uint32_t score = 0;
      for (size_t k = 0; k < kNumCoreKinds; ++k) {
        if ((set.needs >> k & 1u) == 0 || pool.device(d).desc.cores[k] > 0) continue;
        const bool gang = set.floor > 1 && k == static_cast<size_t>(set.floor_kind);
        score += gang ? static_cast<uint32_t>(kNumCoreKinds) : 1;
      }
      // Rule 5: a store too small for its outputs weighs more than any kind.
      if (set.out_bytes > ResourcePool::StoreCap(pool.device(d).desc)) {
        score += 2 * static_cast<uint32_t>(kNumCoreKinds);
      }
      // Rule 6: a device without one of its kernels can run none of those
      // tasks (worst of all: a set laid out there would wait for ever).
      if (!RunsAll(pool, d, set.kernels)) score += 4 * static_cast<uint32_t>(kNumCoreKinds);
      return score;
    };
    uint32_t target = std::min(std::max(set.want, set.floor), alive);
    if (set.want >= alive) {
      set.spans = true;
      for (DeviceId d = 0; d < pool.device_count(); ++d) {
        if (pool.device(d).alive) Insert(id, js, s, d, pool);
      }
      continue;
    }
    std::vector<DeviceId> got = PickByScore(nodes, target, claims_, lacks);
    for (DeviceId d : got) Insert(id, js, s, d, pool);
    if (got.size() < target) {
      // The pool is full: the rest overlaps other sets of the job.
      std::vector<NodeFree> again = free_nodes(&set);
      const uint32_t rest = target - static_cast<uint32_t>(got.size());
      for (DeviceId d : PickByScore(again, rest, claims_, lacks)) {
        Insert(id, js, s, d, pool);
      }
    }
  }
}

DeviceId DeviceShare::SpareDevice(const JobShare& js, const ResourcePool& pool) const {
  std::vector<uint32_t> held(pool.device_count(), 0);
  for (const Set& s : js.sets) {
    for (DeviceId d : s.devices) ++held[d];
  }
  DeviceId best = kNoDevice;
  for (DeviceId d = 0; d < pool.device_count(); ++d) {
    if (!pool.device(d).alive) continue;
    if (best == kNoDevice || held[d] < held[best] ||
        (held[d] == held[best] && claims_[d] < claims_[best])) {
      best = d;
    }
  }
  return best;
}

void DeviceShare::OnDeviceAdded(DeviceId device, const ResourcePool& pool) {
  claims_.resize(pool.device_count(), 0);
  for (auto& [id, js] : jobs_) {
    js.moved_at.resize(pool.device_count(), kNever);
    // Spanning sets take every device up to their ask; of the others, the
    // one furthest below its ask takes it.
    int64_t best = -1;
    uint32_t best_gap = 0;
    for (uint32_t s = 0; s < js.sets.size(); ++s) {
      Set& set = js.sets[s];
      uint32_t target = std::max(set.want, set.floor);
      if (set.want == 0) continue;
      if (set.devices.size() >= target) {
        // Rule 6: a set left on a device without its kernels (none that had
        // them was alive) moves to a new one that has them.
        if (set.spans || !RunsAll(pool, device, set.kernels)) continue;
        auto lacking = std::find_if(set.devices.begin(), set.devices.end(),
                                    [&](DeviceId d) { return !RunsAll(pool, d, set.kernels); });
        if (lacking == set.devices.end()) continue;
        const DeviceId old_device = *lacking;
        Insert(id, js, s, device, pool);
        Record(id, device, kNoSubmodel, static_cast<int32_t>(s));
        Erase(id, js, s, old_device, pool);
        Record(id, old_device, static_cast<int32_t>(s), kNoSubmodel);
        continue;
      }
      if (set.spans) {
        ++set.granted;
        Insert(id, js, s, device, pool);
        Record(id, device, kNoSubmodel, static_cast<int32_t>(s));
        continue;
      }
      uint32_t gap = target - static_cast<uint32_t>(set.devices.size());
      if (gap > best_gap) {
        best = s;
        best_gap = gap;
      }
    }
    if (best >= 0) {
      ++js.sets[best].granted;
      Insert(id, js, static_cast<uint32_t>(best), device, pool);
      Record(id, device, kNoSubmodel, static_cast<int32_t>(best));
    }
  }
}

void DeviceShare::OnDeviceRemoved(DeviceId device, const ResourcePool& pool) {
  for (auto& [id, js] : jobs_) {
    for (uint32_t s = 0; s < js.sets.size(); ++s) {
      Set& set = js.sets[s];
      if (device >= set.slot.size() || set.slot[device] == 0) continue;
      Erase(id, js, s, device, pool);
      set.granted = std::min(set.granted, static_cast<uint32_t>(set.devices.size()));
      Record(id, device, static_cast<int32_t>(s), kNoSubmodel);
      if (set.devices.empty() && set.Backlog() > 0 && pool.alive_device_count() > 0) {
        DeviceId d = SpareDevice(js, pool);
        // Rule 6: rather one that runs the set's kernels.
        if (!RunsAll(pool, d, set.kernels)) {
          for (DeviceId e = 0; e < pool.device_count(); ++e) {
            if (pool.device(e).alive && RunsAll(pool, e, set.kernels)) {
              d = e;
              break;
            }
          }
        }
        Insert(id, js, s, d, pool);
        Record(id, d, kNoSubmodel, static_cast<int32_t>(s));
      }
    }
  }
}

}  // namespace hmpmd
