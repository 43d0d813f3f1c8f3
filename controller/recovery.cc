#include "hmpmd/controller/recovery.h"

namespace hmpmd {

std::string WorkerKey(const RegisterMsg& m) {
  return m.name + "|" + std::to_string(m.pid) + "|" + m.data_endpoint;
}

void RecoveryWindow::Open(std::optional<std::vector<std::string>> expected, TimeUs deadline) {
  open_ = true;
  known_ = expected.has_value();
  deadline_ = deadline;
  expected_.clear();
  back_.clear();
  returned_ = 0;
  how_ = End::kNone;
  missing_.clear();
  if (expected) expected_.insert(expected->begin(), expected->end());
}

void RecoveryWindow::OnRegistered(const std::string& key) {
  if (!open_ || expected_.count(key) == 0) return;
  if (back_.insert(key).second) ++returned_;
}

bool RecoveryWindow::Waiting(TimeUs now) const {
  if (!open_) return false;
  if (now >= deadline_) return false;
  // Not knowing whom to expect, only the deadline ends the wait.
  return !known_ || returned_ < expected_.size();
}

bool RecoveryWindow::Close(TimeUs now) {
  if (!open_ || Waiting(now)) return false;
  open_ = false;
  how_ = known_ && returned_ == expected_.size() ? End::kWorkersBack : End::kDeadline;
  for (const std::string& key : expected_) {
    if (back_.count(key) == 0) missing_.push_back(key);
  }
  return true;
}

}  // namespace hmpmd
