// DeviceShare: lending along the critical path (rule 2b) and the growth
// limit (rule 2c); see device_share.h. The rest is in device_share.cc.
#include <algorithm>

#include "hmpmd/scheduler/device_share.h"
#include "hmpmd/scheduler/scheduler.h"

namespace hmpmd {

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
  Erase(job, js, from, d);
  Insert(job, js, to, d, pool);
  if (js.moved_at.size() <= d) js.moved_at.resize(d + 1, kNever);
  js.moved_at[d] = now;
  if (js.lent_by.size() <= d) js.lent_by.resize(d + 1, kNoSubmodel);
  // A device going back to the set that lent it is no longer on loan.
  js.lent_by[d] =
      js.lent_by[d] == static_cast<int32_t>(to) ? kNoSubmodel : static_cast<int32_t>(from);
  l.gave_at = now;
  w.received_at = now;
  Record(job, d, static_cast<int32_t>(from), static_cast<int32_t>(to));
}

DeviceId DeviceShare::Movable(const JobShare& js, const Set& l, uint32_t to, CoreKind kind,
                              const ResourcePool& pool, TimeUs now) const {
  const Set& w = js.sets[to];
  const uint32_t home = w.devices.empty() ? UINT32_MAX : pool.device(w.devices[0]).desc.node;
  DeviceId pick = UINT32_MAX;
  int rank = -1;  // 2: lent by `to`; 1: on its node; 0: any
  for (DeviceId d : l.devices) {
    if (d < w.slot.size() && w.slot[d] != 0) continue;  // already shared with w
    if (!pool.device(d).alive || pool.device(d).desc.cores[static_cast<size_t>(kind)] == 0) {
      continue;
    }
    if (d < js.moved_at.size() && now - js.moved_at[d] < options_.min_dwell_us) continue;
    if (d < l.running.size() && l.running[d] > 0) continue;  // a run of l is there
    int r = d < js.lent_by.size() && js.lent_by[d] == static_cast<int32_t>(to)
                ? 2
                : (pool.device(d).desc.node == home ? 1 : 0);
    if (r > rank) {
      pick = d;
      rank = r;
      if (r == 2) break;
    }
  }
  return pick;
}

DeviceId DeviceShare::Recall(JobId job, JobShare& js, uint32_t sm, CoreKind kind,
                             const ResourcePool& pool, TimeUs now) {
  // A device `sm` lent first (Movable() ranks those first), then any free
  // device of an elastic set above its own floor: the floors fit in the
  // pool, so every set can get back to its floor once runs end.
  for (int pass = 0; pass < 2; ++pass) {
    for (uint32_t s = 0; s < js.sets.size(); ++s) {
      const Set& l = js.sets[s];
      if (s == sm || l.want == 0 || l.spans) continue;
      if (pass == 1 && (!l.elastic || l.devices.size() <= std::max<size_t>(1, l.floor))) continue;
      const DeviceId d = Movable(js, l, sm, kind, pool, now);
      if (d == UINT32_MAX) continue;
      if (pass == 1 || (d < js.lent_by.size() && js.lent_by[d] == static_cast<int32_t>(sm))) {
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
