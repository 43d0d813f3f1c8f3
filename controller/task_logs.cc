#include "hmpmd/controller/task_logs.h"

#include "hmpmd/protocol/one_line.h"

namespace hmpmd {

size_t TaskLogs::BytesOf(const Run& r) {
  size_t n = 0;
  for (const Attempt& a : r.attempts) {
    n += a.error.size() + 64;  // an entry's own cost, roughly
    for (const std::string& l : a.lines) n += l.size() + 32;
  }
  return n;
}

void TaskLogs::Add(JobId job, uint32_t run, uint32_t attempt, bool ok, std::string error,
                   std::vector<std::string> lines) {
  if (ok && lines.empty()) return;
  Attempt a{attempt, ok, std::move(error), {}};
  // A worker of another build may send more or longer lines than its own
  // TaskLog keeps: bounded here again.
  Run& r = runs_[{job, run}];
  const size_t before = BytesOf(r);
  for (std::string& l : lines) {
    if (r.lines >= kMaxLinesPerRun) {
      ++r.dropped;
      continue;
    }
    a.lines.push_back(OneLine(l, kMaxLineBytes));
    ++r.lines;
  }
  r.attempts.push_back(std::move(a));
  const size_t after = BytesOf(r);
  bytes_ += after - before;
  if (bytes_ > kMaxTotalBytes) MakeRoom(0);
}

void TaskLogs::MakeRoom(size_t room) {
  // Oldest first: job ids grow, so the map's first entries are the oldest.
  while (!runs_.empty() && bytes_ + room > kMaxTotalBytes) {
    auto it = runs_.begin();
    bytes_ -= BytesOf(it->second);
    runs_.erase(it);
  }
}

const TaskLogs::Run* TaskLogs::Find(JobId job, uint32_t run) const {
  auto it = runs_.find({job, run});
  return it == runs_.end() ? nullptr : &it->second;
}

void TaskLogs::Forget(JobId job) {
  auto it = runs_.lower_bound({job, 0});
  while (it != runs_.end() && it->first.first == job) {
    bytes_ -= BytesOf(it->second);
    it = runs_.erase(it);
  }
}

}  // namespace hmpmd
