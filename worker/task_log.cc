#include "hmpmd/worker/task_log.h"

#include "hmpmd/protocol/one_line.h"

namespace hmpmd::worker {

void TaskLog::Add(std::string_view line) {
  // Made one line here, outside the lock: the controller shows each entry
  // as one line, and a kernel may pass anything.
  std::string kept = OneLine(line, kMaxLineBytes);
  std::lock_guard<std::mutex> lock(mu_);
  if (taken_) return;
  if (lines_.size() >= kMaxLines || bytes_ + kept.size() > kMaxBytes) {
    ++dropped_;
    return;
  }
  bytes_ += kept.size();
  lines_.push_back(std::move(kept));
}

std::vector<std::string> TaskLog::Take() {
  std::lock_guard<std::mutex> lock(mu_);
  taken_ = true;
  std::vector<std::string> out = std::move(lines_);
  if (dropped_ > 0) {
    out.push_back("[" + std::to_string(dropped_) + " more line(s) dropped: a task run keeps " +
                  std::to_string(kMaxLines) + " lines, " + std::to_string(kMaxBytes) + " bytes]");
  }
  return out;
}

}  // namespace hmpmd::worker
