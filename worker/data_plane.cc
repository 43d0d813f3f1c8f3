#include "data_plane.h"

#include "peer_fetch.h"

namespace hmpmd::worker {

DataPlane::DataPlane(DataPlaneOptions options, spdlog::logger* log)
    : options_(std::move(options)),
      log_(log),
      ctx_(1),
      store_(options_.cap_bytes),
      server_(&ctx_, &store_, &inbox_, log) {}

DataPlane::~DataPlane() { Stop(); }

Status DataPlane::Start() {
  RETURN_IF_ERROR(server_.Bind(options_.host));
  log_->info("data socket on {}", server_.endpoint());
  return Status::Ok();
}

void DataPlane::Stop() { server_.Stop(); }

Result<BufferList> DataPlane::GatherInputs(JobId job, const std::vector<InputRef>& inputs,
                                           uint32_t* lost_run) {
  BufferList all;
  for (const InputRef& in : inputs) {
    // A producer that made 0 bytes (no outputs, like noop or spin) kept
    // nothing: there is nothing to read.
    if (in.bytes == 0) continue;
    Status failed;
    if (in.endpoint.empty()) {
      failed = Status::NotFound("input: the controller knows no location of job " +
                                std::to_string(job) + " run " + std::to_string(in.run));
    } else if (in.endpoint == server_.endpoint()) {
      std::shared_ptr<const BufferList> local = store_.Read(job, in.run);
      if (local != nullptr) {
        all.insert(all.end(), local->begin(), local->end());
        continue;
      }
      failed = Status::NotFound("input: no outputs of job " + std::to_string(job) + " run " +
                                std::to_string(in.run) + " in this worker's store");
    } else {
      Result<BufferList> got = FetchFromPeer(&ctx_, in.endpoint, job, in.run, options_.timeout_us);
      if (got.ok()) {
        for (Buffer& b : *got) all.push_back(std::move(b));
        continue;
      }
      failed = got.status();
    }
    // Never run a kernel on a missing input: the caller fails the task.
    if (lost_run != nullptr) *lost_run = in.run;
    return failed;
  }
  return all;
}

std::unique_ptr<Communicator> DataPlane::MakeCommunicator(const GangInfo& gang) {
  return std::make_unique<Communicator>(
      &ctx_, &inbox_, GangView{gang.rank, gang.endpoints, gang.tag}, options_.timeout_us);
}

}  // namespace hmpmd::worker
