// RecoveryWindow: after a restart, the controller dispatches nothing until
// the workers that were alive when it died have registered again and
// reported what they hold (running tasks, stored outputs); otherwise it
// would start their tasks a second time and rebuild outputs that still
// exist. The window ends as soon as every expected worker is back, and at
// the latest at a deadline (the recovery grace), for workers that died too.
// Which workers to expect comes from the store (WorkerRecord); when the
// store cannot tell, the window lasts until the deadline.
//
// Thread-safety: not thread-safe; the controller loop owns it.
#pragma once

#include <optional>
#include <set>
#include <string>
#include <vector>

#include "hmpmd/protocol/messages.h"
#include "hmpmd/protocol/types.h"

namespace hmpmd {

// Names one worker process across controller restarts: what it registers
// with (name, pid and data endpoint) is the same every time it registers.
std::string WorkerKey(const RegisterMsg& m);

class RecoveryWindow {
 public:
  enum class End { kNone, kWorkersBack, kDeadline };

  // Opens the window until `deadline`, waiting for the workers in
  // `expected` (nullopt: not known; then only the deadline ends it).
  void Open(std::optional<std::vector<std::string>> expected, TimeUs deadline);
  // Moves the deadline of an open window (the grace counts from when
  // workers can reach the controller, not from before a long store load).
  void set_deadline(TimeUs deadline) { deadline_ = deadline; }
  TimeUs deadline() const { return deadline_; }
  // A worker registered (during the window or not).
  void OnRegistered(const std::string& key);
  // True while the window is open and has not ended by `now`.
  bool Waiting(TimeUs now) const;
  // True once, when the window is open and no longer Waiting(now): closes
  // it. After it, how() says why it ended and missing() who never came.
  bool Close(TimeUs now);

  bool open() const { return open_; }
  End how() const { return how_; }
  const std::vector<std::string>& missing() const { return missing_; }
  size_t expected_count() const { return expected_.size(); }
  size_t returned_count() const { return returned_; }

 private:
  bool open_ = false;
  bool known_ = false;
  TimeUs deadline_ = 0;
  std::set<std::string> expected_;
  std::set<std::string> back_;  // expected ones that registered
  size_t returned_ = 0;
  End how_ = End::kNone;
  std::vector<std::string> missing_;
};

}  // namespace hmpmd
