#include "hmpmd/scheduler/ready_queue.h"

namespace hmpmd {

void ReadyQueue::Wake(std::span<const uint64_t> keys) {
  for (uint64_t key : keys) {
    auto it = sleeping_.find(key);
    if (it == sleeping_.end()) continue;
    for (const auto& [k, item] : it->second) {
      heaps_[k].push(item);
      --sleeping_count_[k];
    }
    sleeping_.erase(it);
  }
}

void ReadyQueue::Unpark(CoreId core, CoreKind kind) {
  auto it = parked_.find(core);
  if (it == parked_.end()) return;
  Heap& heap = heaps_[Index(kind)];
  for (const Item& item : it->second) heap.push(item);  // stale ones are skipped there
  parked_.erase(it);
}

void ReadyQueue::BeginPass(CoreKind kind) {
  kind_ = Index(kind);
  deferred_.clear();
  blocked_.clear();
  ++pass_;
}

ReadyQueue::Item ReadyQueue::Next() {
  Heap& heap = heaps_[kind_];
  item_ = heap.top();
  heap.pop();
  led_key_ = 0;
  led_ = nullptr;
  class_key_ = 0;
  class_ = nullptr;
  // A class's lead left the heap: unless it goes back to its class, the
  // class's next best takes its place (ReleaseLead).
  if (!leads_.empty()) {
    auto l = leads_.find(item_.seq);
    if (l != leads_.end()) {
      led_key_ = l->second;
      leads_.erase(l);
      auto w = waiting_.find(led_key_);
      if (w != waiting_.end()) {
        led_ = &w->second;
        led_->lead_out = false;
      }
    }
  }
  return item_;
}

void ReadyQueue::ReleaseLead() {
  if (led_ == nullptr || led_->blocked_pass == pass_) return;  // re-armed at EndPass
  PushLead(led_key_, *led_);
  if (!led_->lead_out) waiting_.erase(led_key_);  // drained
  led_ = nullptr;
}

bool ReadyQueue::Rekey(double priority) {
  Heap& heap = heaps_[kind_];
  if (!(priority < item_.priority && !heap.empty() && priority < heap.top().priority)) {
    return false;
  }
  item_.priority = priority;
  if (led_ != nullptr) {
    leads_[item_.seq] = led_key_;  // still its class's lead
    led_->lead_out = true;
  }
  heap.push(item_);
  return true;
}

bool ReadyQueue::WaitInClass(uint64_t cls) {
  if (cls != led_key_) ReleaseLead();  // its class changed
  if (cls == 0) return false;
  // The class's entry exists from its first item on, blocked or not: a
  // lookup per item is what a pass pays, not an insert and an erase.
  class_key_ = cls;
  class_ = &waiting_[cls];
  class_->heap = kind_;
  if (class_->blocked_pass != pass_) return false;
  class_->items.push(item_);
  ++waiting_count_[kind_];
  return true;
}

void ReadyQueue::Sleep(uint64_t key) {
  ReleaseLead();
  sleeping_[key].push_back({kind_, item_});
  ++sleeping_count_[kind_];
}

size_t ReadyQueue::Block() {
  class_->blocked_pass = pass_;
  class_->items.push(item_);
  ++waiting_count_[kind_];
  blocked_.push_back(class_key_);
  return blocked_.size();
}

size_t ReadyQueue::Defer() {
  ReleaseLead();
  deferred_.push_back(item_);
  return deferred_.size();
}

void ReadyQueue::EndPass() {
  Heap& heap = heaps_[kind_];
  for (const Item& d : deferred_) heap.push(d);
  // Each class blocked in this pass goes back to the heap as its lead.
  for (uint64_t cls : blocked_) {
    auto w = waiting_.find(cls);
    if (w == waiting_.end()) continue;
    PushLead(cls, w->second);
    if (w->second.items.empty() && !w->second.lead_out) waiting_.erase(w);
  }
}

void ReadyQueue::PushLead(uint64_t cls, WaitingClass& wc) {
  if (wc.lead_out || wc.items.empty()) return;
  Item lead = wc.items.top();
  wc.items.pop();
  --waiting_count_[wc.heap];
  leads_[lead.seq] = cls;
  wc.lead_out = true;
  heaps_[wc.heap].push(lead);
}

}  // namespace hmpmd
