// ReadyQueue: the Scheduler's ready runs, in the order its Schedule() passes
// ask the policy about them.
//
// 1. One heap per core kind: the highest priority first, then the item
//    that became ready first (its seq). Items stay in the queue when their
//    run stops being ready: the engine skips such stale items as it takes
//    them, and they count in size() until it has.
// 2. Wait classes (Policy::WaitClass): once an item of class C is told
//    "retry later" in a pass (Block), C is blocked for that pass: its items
//    met later in the pass wait outside the heap unasked, and at the end of
//    the pass only C's best item (its lead) goes back in. When the lead
//    leaves the queue, C's next best takes its place, so C's items still
//    come out in priority order and a pass asks once per blocked class.
// 3. Sleeping items (Placement::RetryWhen(key)) wait outside the heap until
//    Wake() names their key.
// 4. Parked items (early dispatch) wait for room on one core, until that
//    core releases a run (Unpark) or leaves the pool (DropParked).
// 5. Deferred items (retry later, no class) go back to the heap when the
//    pass ends.
//
// A pass over one kind's heap: BeginPass(kind); then while HasNext(), take
// the best item with Next() and settle it with exactly one of Drop, Rekey,
// WaitInClass (when it returns true), Sleep, Block or Defer (WaitInClass
// returning false settles nothing); then EndPass(). Outside a pass only
// Push, Wake and the parking calls change the queue.
//
// Cost: O(log n) per item taken or pushed; a blocked class costs one item
// taken per pass however many items it holds.
// Thread-safety: not thread-safe; owned by the Scheduler's thread.
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <queue>
#include <span>
#include <unordered_map>
#include <utility>
#include <vector>

#include "hmpmd/protocol/types.h"
#include "hmpmd/scheduler/resource_pool.h"

namespace hmpmd {

class ReadyQueue {
 public:
  struct Item {
    double priority;
    uint64_t seq;  // NextSeq() when it became ready
    JobId job;
    uint32_t run;
    TimeUs ready_at;
    // Heap order: lower priority, then later seq, is "less".
    bool operator<(const Item& o) const {
      return priority != o.priority ? priority < o.priority : seq > o.seq;
    }
  };

  // --- adding ---
  // The seq of the next item to become ready (counts up from 0).
  uint64_t NextSeq() { return next_seq_++; }
  void Push(CoreKind kind, const Item& item) { heaps_[Index(kind)].push(item); }

  // --- sleeping items ---
  bool AnySleeping() const { return !sleeping_.empty(); }
  // Puts the items sleeping on `keys` back in their heaps.
  void Wake(std::span<const uint64_t> keys);

  // --- parked items ---
  bool AnyParked() const { return !parked_.empty(); }
  void Park(CoreId core, const Item& item) { parked_[core].push_back(item); }
  // Puts the items parked on `core` (of `kind`) back in that kind's heap.
  void Unpark(CoreId core, CoreKind kind);
  // Forgets the items parked on `core` (the engine takes their runs back).
  void DropParked(CoreId core) { parked_.erase(core); }

  // --- a pass over one kind's heap ---
  void BeginPass(CoreKind kind);
  bool HasNext() const { return !heaps_[kind_].empty(); }
  // Takes the best item of the pass's heap; it is in hand until settled.
  Item Next();
  // The item in hand leaves the queue (placed, ended or stale); if it led
  // a class, the class's next best leads.
  void Drop() { ReleaseLead(); }
  // When `priority` is below both the item's and the next item's, the item
  // goes back into the heap under it (still its class's lead): true.
  // Otherwise nothing changes and it stays in hand.
  bool Rekey(double priority);
  // The item in hand belongs to wait class `cls` (0: none). Returns true
  // when the class is blocked in this pass: the item then waits in it,
  // settled. Otherwise false; it stays in hand.
  bool WaitInClass(uint64_t cls);
  // The policy said retry when `key` wakes; the item sleeps on it. Only
  // for an item WaitInClass(0) kept in hand.
  void Sleep(uint64_t key);
  // The policy said retry later to an item of the class WaitInClass named
  // (not 0): the class is blocked until the pass ends and the item waits
  // in it. Returns the classes blocked in this pass so far.
  size_t Block();
  // The policy said retry later to an item without a class: back in the
  // heap when the pass ends. Returns the items deferred in this pass so far.
  size_t Defer();
  // Deferred items, and the leads of the classes blocked in this pass, go
  // back into the heap.
  void EndPass();

  // --- counts ---
  // Items waiting for a core of `kind`: in its heap (stale ones included),
  // set aside in its classes, or asleep. Parked items do not count.
  size_t size(CoreKind kind) const {
    const size_t k = Index(kind);
    return heaps_[k].size() + waiting_count_[k] + sleeping_count_[k];
  }

 private:
  using Heap = std::priority_queue<Item>;
  // Items of a wait class set aside outside their heap; one of them (its
  // best, the lead) stands in the heap while the class waits.
  struct WaitingClass {
    Heap items;
    size_t heap = 0;            // the heap its items come from
    bool lead_out = false;      // its lead is in that heap
    uint64_t blocked_pass = 0;  // the pass that last found it blocked
  };

  static size_t Index(CoreKind kind) { return static_cast<size_t>(kind); }
  // Puts the best item of class `cls` in its heap as the class's lead.
  void PushLead(uint64_t cls, WaitingClass& wc);
  // The item in hand no longer stands for the class it led: unless that
  // class is blocked in this pass (its lead goes back when the pass ends),
  // its next best leads, and a class left empty is forgotten.
  void ReleaseLead();

  std::array<Heap, kNumCoreKinds> heaps_;
  uint64_t next_seq_ = 0;
  std::unordered_map<uint64_t, WaitingClass> waiting_;
  // The items standing in a heap for their class, by seq -> class. Empty
  // (and not looked at) while no class waits, so Item stays small.
  std::unordered_map<uint64_t, uint64_t> leads_;
  std::array<size_t, kNumCoreKinds> waiting_count_{};
  // Items told RetryWhen(key), by key, with the heap each came from.
  std::unordered_map<uint64_t, std::vector<std::pair<size_t, Item>>> sleeping_;
  std::array<size_t, kNumCoreKinds> sleeping_count_{};
  // Items waiting for room on their producers' core, by core.
  std::map<CoreId, std::vector<Item>> parked_;

  // The pass under way.
  size_t kind_ = 0;
  uint64_t pass_ = 0;
  std::vector<Item> deferred_;
  std::vector<uint64_t> blocked_;  // classes blocked in this pass
  // The item in hand, the class it led (0: none) and that class's entry
  // while the lead is out of the heap, and the class WaitInClass found.
  Item item_{};
  uint64_t led_key_ = 0;
  WaitingClass* led_ = nullptr;
  uint64_t class_key_ = 0;
  WaitingClass* class_ = nullptr;
};

}  // namespace hmpmd
