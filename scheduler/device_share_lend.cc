// DeviceShare: moving devices between sets (Rebalance: rules 2, 2b, 2c and
// 2d; see device_share.h). The rest is in device_share.cc.
#include <algorithm>

#include "hmpmd/scheduler/device_share.h"
#include "hmpmd/scheduler/scheduler.h"

namespace hmpmd {

namespace {
constexpr DeviceId kNoDevice = UINT32_MAX;
}  // namespace

DeviceId DeviceShare::Rebalance(JobId job, JobShare& js, uint32_t sm, CoreKind kind,
                                const ResourcePool& pool, TimeUs now) {
  Set& w = js.sets[sm];
  const TimeUs dwell = options_.min_dwell_us;
  if (!options_.rebalance || !w.elastic || w.spans || now - w.gave_at < dwell) return kNoDevice;
  if (w.devices.size() < w.floor) {
    // 2d: below its largest gang, whatever 2c says (a gang with no compute
    // behind it has no chain to grow for, and would wait forever).
    DeviceId back = Recall(job, js, sm, kind, pool, now);
    if (back != kNoDevice) return back;
  } else if (!Grows(w)) {
    return kNoDevice;  // 2c
  }
  // Donors: elastic sets with no ready work, above their floor; the one
  // with the least backlog per device gives first. Lenders (2b): sets
  // whose ready work has more slack than W's by more than the loan's two
  // state loads; the one with the most slack lends first.
  std::vector<std::pair<double, uint32_t>> donors, lenders;
  for (uint32_t s = 0; s < js.sets.size(); ++s) {
    const Set& l = js.sets[s];
    if (s == sm || l.want == 0 || !l.elastic || l.spans) continue;
    if (now - l.received_at < dwell) continue;
    if (l.ready > 0) {
      if (Lends(l, w)) lenders.push_back({-*l.ready_slack.begin(), s});
      continue;
    }
    // 2d: a set with work ahead keeps its largest gang, unless nothing of
    // it is ready or running: then all but one device may go (and come back).
    const size_t keep = l.Backlog() <= 0 ? 0 : l.running_total == 0 ? 1 : l.floor;
    if (l.devices.size() <= keep) continue;
    // Only when W's backlog per device after the move is still above L's:
    // a set that idles for a moment but has as much work ahead keeps its
    // devices (each move costs a state load).
    const double after = l.devices.size() > 1 ? l.Backlog() / (l.devices.size() - 1.0) : 0;
    // A set with nothing ready and nothing running cannot use the device
    // before some input of its backlog is done: it gives in any case.
    const bool idle = l.running_total == 0;
    if (!idle && l.Backlog() > 0 && w.Backlog() / (w.devices.size() + 1.0) <= after) continue;
    donors.push_back({l.Backlog() / static_cast<double>(l.devices.size()), s});
  }
  std::sort(donors.begin(), donors.end());
  std::sort(lenders.begin(), lenders.end());
  donors.insert(donors.end(), lenders.begin(), lenders.end());
  for (const auto& [pressure, s] : donors) {
    DeviceId pick = Movable(js, js.sets[s], sm, kind, pool, now);
    if (pick == kNoDevice) continue;
    Move(job, js, s, sm, pick, pool, now);
    return pick;
  }
  // Every device of the lenders runs their work: the first to free comes.
  if (!lenders.empty()) js.sets[lenders.front().second].lend_to = static_cast<int32_t>(sm);
  return kNoDevice;
}

void DeviceShare::Analyse(JobShare& js) const {
  const JobRun& job = *js.run;
  const JobGraph& g = *job.graph;
  const uint32_t n = g.size();
  js.start_us.assign(n, 0);
  js.chain_us.assign(n, 0);
  js.cp_us = 0;
  if (job.open || job.est_us.size() < n || job.rank_us.size() < n) return;
  const std::vector<uint32_t>& topo = g.topo_order();
  for (uint32_t i : topo) {
    double start = 0;
    for (uint32_t in : g.task(i).inputs) start = std::max(start, js.start_us[in] + job.est_us[in]);
    js.start_us[i] = start;
    js.cp_us = std::max(js.cp_us, start + job.rank_us[i]);
  }
  // A run's compute chain inside its sub-model: its own compute plus the
  // longest chain of its consumers in the same sub-model.
  for (auto it = topo.rbegin(); it != topo.rend(); ++it) {
    const GraphTask& t = g.task(*it);
    double tail = 0;
    for (uint32_t c : t.consumers) {
      if (g.task(c).submodel == t.submodel) tail = std::max(tail, js.chain_us[c]);
    }
    js.chain_us[*it] = (t.is_comm ? 0 : job.est_us[*it]) + tail;
  }
}

double DeviceShare::Slack(const JobShare& js, uint32_t index) const {
  if (index >= js.start_us.size()) return 0;
  return std::max(0.0, js.cp_us - js.run->rank_us[index] - js.start_us[index]);
}

double DeviceShare::Chain(const JobShare& js, uint32_t index) const {
  if (index < js.chain_us.size()) return js.chain_us[index];
  return index < js.run->est_us.size() ? js.run->est_us[index] : 0;
}

bool DeviceShare::Grows(const Set& w) {
  // One more device saves ready_chain/n - ready_chain/(n+1) of W's time
  // and leaves one more communication exposed (the last on a device has
  // no compute of W behind it): worth it while n * exposed < ready_chain.
  // (State loads are weighed where a device is lent, rule 2b.)
  const double exposed = w.comm_n > 0 ? w.comm_us / w.comm_n : 0;
  return w.devices.empty() || static_cast<double>(w.devices.size()) * exposed < w.ready_chain_us;
}

bool DeviceShare::Lends(const Set& l, const Set& w) {
  if (!l.elastic || l.spans || l.want == 0 || l.ready_slack.empty() || w.ready_slack.empty()) {
    return false;
  }
  if (l.devices.size() <= std::max<size_t>(1, l.floor)) return false;
  // The loan costs W's state load now and L's when the device returns.
  const double cost = w.load_us + l.load_us;
  const double l_slack = *l.ready_slack.begin();
  // L's ready work still drains on one device fewer within its slack
  // (its most critical run first), so the loan delays none of it past it;
  // in a saturated pool (long queues) nothing is lent.
  if (l.ready_us / (static_cast<double>(l.devices.size()) - 1.0) >= l_slack - cost) return false;
  return l_slack - *w.ready_slack.begin() > cost;
}

void DeviceShare::Move(JobId job, JobShare& js, uint32_t from, uint32_t to, DeviceId d,
                       const ResourcePool& pool, TimeUs now) {
  Set& l = js.sets[from];
  Set& w = js.sets[to];
  Erase(job, js, from, d, pool);
  Insert(job, js, to, d, pool);
  if (js.moved_at.size() <= d) js.moved_at.resize(d + 1, kNever);
  js.moved_at[d] = now;
  if (js.lent_by.size() <= d) {
    js.lent_by.resize(d + 1, kNoSubmodel);
    js.lent_to.resize(d + 1, kNoSubmodel);
  }
  // A device going back to the set that lent it is no longer on loan.
  const bool back = js.lent_by[d] == static_cast<int32_t>(to);
  js.lent_by[d] = back ? kNoSubmodel : static_cast<int32_t>(from);
  js.lent_to[d] = back ? kNoSubmodel : static_cast<int32_t>(to);
  l.gave_at = now;
  w.received_at = now;
  Record(job, d, static_cast<int32_t>(from), static_cast<int32_t>(to));
}

bool DeviceShare::LentTo(const JobShare& js, DeviceId d, uint32_t lender, const Set& borrower) {
  // Sets may overlap (a pool smaller than their asks): only the set the
  // device moved into holds it on loan, not another that held it already.
  return d < js.lent_by.size() && js.lent_by[d] == static_cast<int32_t>(lender) &&
         js.lent_to[d] >= 0 && &js.sets[static_cast<size_t>(js.lent_to[d])] == &borrower;
}

DeviceId DeviceShare::Movable(const JobShare& js, const Set& l, uint32_t to, CoreKind kind,
                              const ResourcePool& pool, TimeUs now, bool urgent) const {
  const Set& w = js.sets[to];
  const uint32_t home = w.devices.empty() ? UINT32_MAX : pool.device(w.devices[0]).desc.node;
  DeviceId pick = UINT32_MAX;
  int rank = -1;  // 2: lent by `to`; 1: on its node; 0: any
  for (DeviceId d : l.devices) {
    if (d < w.slot.size() && w.slot[d] != 0) continue;  // already shared with w
    if (!pool.device(d).alive || pool.device(d).desc.cores[static_cast<size_t>(kind)] == 0) {
      continue;
    }
    if (!urgent && d < js.moved_at.size() && now - js.moved_at[d] < options_.min_dwell_us) {
      continue;
    }
    if (d < l.running.size() && l.running[d] > 0) continue;  // a run of l is there
    int r = LentTo(js, d, to, l) ? 2 : (pool.device(d).desc.node == home ? 1 : 0);
    if (r > rank) {
      pick = d;
      rank = r;
      if (r == 2) break;
    }
  }
  return pick;
}

DeviceId DeviceShare::Recall(JobId job, JobShare& js, uint32_t sm, CoreKind kind,
                             const ResourcePool& pool, TimeUs now, bool urgent) {
  // A device `sm` lent first (Movable() ranks those first), then any free
  // device of an elastic set above its own floor: the floors fit in the
  // pool, so every set can get back to its floor once runs end.
  for (int pass = 0; pass < 2; ++pass) {
    for (uint32_t s = 0; s < js.sets.size(); ++s) {
      const Set& l = js.sets[s];
      if (s == sm || l.want == 0 || l.spans) continue;
      if (pass == 1 && (!l.elastic || l.devices.size() <= std::max<size_t>(1, l.floor))) continue;
      const DeviceId d = Movable(js, l, sm, kind, pool, now, urgent);
      if (d == UINT32_MAX) continue;
      if (pass == 1 || LentTo(js, d, sm, l)) {
        Move(job, js, s, sm, d, pool, now);
        return d;
      }
    }
  }
  return UINT32_MAX;
}

void DeviceShare::MaybeLend(JobId job, JobShare& js, uint32_t l, DeviceId d,
                            const ResourcePool& pool) {
  Set& from = js.sets[l];
  if (from.lend_to == kNoSubmodel) return;
  const uint32_t to = static_cast<uint32_t>(from.lend_to);
  from.lend_to = kNoSubmodel;
  if (to >= js.sets.size() || d >= from.slot.size() || from.slot[d] == 0) return;
  if (d < from.running.size() && from.running[d] > 0) return;
  Set& w = js.sets[to];
  if (d < w.slot.size() && w.slot[d] != 0) return;
  const TimeUs now = last_now_;
  if (now - w.gave_at < options_.min_dwell_us || now - from.received_at < options_.min_dwell_us) {
    return;
  }
  if (!Lends(from, w) || !Grows(w)) return;
  Move(job, js, l, to, d, pool, now);
}

}  // namespace hmpmd
