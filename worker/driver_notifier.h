// DriverNotifier: tells a driver session of its runs done straight from
// this worker (DataOp::kRunDone), beside the DoneBatch to the controller, so
// that the driver's Future resolves one hop sooner. The controller learns
// of the run as before and stays the authority: its SessionUpdate confirms
// the end, or moves the outputs (a rebuild elsewhere).
//
// One DEALER per (driver socket, job), presenting the job's own data token
// (the driver's socket lets in only that); at most kMaxLinks, the least
// recently used closed first. A notice that cannot be queued at once is
// dropped: the controller's update still comes.
//
// Thread-safety: the I/O thread's alone.
#pragma once

#include <spdlog/logger.h>

#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <zmq.hpp>

#include "data_tokens.h"
#include "hmpmd/protocol/data_frames.h"
#include "hmpmd/protocol/types.h"

namespace hmpmd::worker {

class DriverNotifier {
 public:
  static constexpr size_t kMaxLinks = 64;

  // `ctx` and `tokens` must outlive this.
  DriverNotifier(zmq::context_t* ctx, const DataTokens* tokens, spdlog::logger* log)
      : ctx_(ctx), tokens_(tokens), log_(log) {}

  // Tells the driver at `endpoint` that the runs of `notice` (at most
  // kMaxNoticeRuns) of its session `job` are done.
  void Notify(const std::string& endpoint, JobId job, const RunDoneNotice& notice);
  // `job` ended here (freed, cancelled): its links close.
  void Forget(JobId job);
  void Clear() { links_.clear(); }
  size_t links() const { return links_.size(); }

 private:
  struct Link {
    zmq::socket_t socket;
    uint64_t used = 0;
  };
  zmq::socket_t* LinkTo(const std::string& endpoint, JobId job);

  zmq::context_t* const ctx_;
  const DataTokens* const tokens_;
  spdlog::logger* const log_;
  std::map<std::pair<std::string, JobId>, Link> links_;
  uint64_t uses_ = 0;
};

}  // namespace hmpmd::worker
