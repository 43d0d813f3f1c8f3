// FleetProcess: the benchmark's handle on a FakeFleet running in a child
// process (this same binary, started again with --fake-workers), so that
// the fleet's CPU and memory are not counted as the controller's.
// Thread-safety: one owner thread.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <optional>
#include <string>
#include <vector>

namespace hmpmd::bench {

class FleetProcess {
 public:
  // Starts `self` with `args` (its stdin and stdout are pipes to this object).
  FleetProcess(const std::string& self, const std::vector<std::string>& args);
  // Closes its stdin, waits up to 5 s for it to exit, then SIGKILLs it.
  ~FleetProcess();
  FleetProcess(const FleetProcess&) = delete;
  FleetProcess& operator=(const FleetProcess&) = delete;

  bool started() const { return pid_ > 0; }
  // The next line it prints, without the newline; nullopt after `timeout`
  // or at its end.
  std::optional<std::string> ReadLine(std::chrono::milliseconds timeout);
  // Sends `command` and returns the line it answers.
  std::optional<std::string> Ask(const std::string& command,
                                 std::chrono::milliseconds timeout = std::chrono::seconds(10));

 private:
  pid_t pid_ = -1;
  int to_child_ = -1;
  int from_child_ = -1;
  std::string buffered_;
};

}  // namespace hmpmd::bench
