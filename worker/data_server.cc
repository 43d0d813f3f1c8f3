#include "data_server.h"

#include <pthread.h>

#include <algorithm>
#include <cstring>
#include <iterator>
#include <vector>
#include <zmq_addon.hpp>

#include "communicator.h"
#include "hmpmd/protocol/data_auth.h"
#include "hmpmd/protocol/data_frames.h"
#include "hmpmd/protocol/data_replies.h"

namespace hmpmd::worker {
namespace {

constexpr int kPollMs = 20;  // how soon Stop() is noticed
// How long a connection made before the worker's first token waits for it
// (registration takes milliseconds; a longer wait only delays Stop()).
constexpr int64_t kFirstTokenWaitUs = 2'000'000;

// What a peer sends here: fetch requests and take-reads (one header frame
// of sizeof(DataHeader) bytes) and collective frames (a header and a
// payload of at most Communicator::kChunkBytes: the Communicator cuts every
// transfer into chunks of that size, and its other frames are 8-byte sizes
// or a forwarded chunk). Fetch replies, in frames of kFetchChunkBytes, go
// the other way. So nothing legitimate comes near twice the chunk size,
// which leaves room to grow the chunks a little; a bigger frame is an
// attacker's (or a foreign protocol's), and ZeroMQ drops its connection
// instead of allocating what its length prefix claims.
static_assert(static_cast<size_t>(DataServer::kMaxFrameBytes) >= 2 * Communicator::kChunkBytes);
static_assert(static_cast<size_t>(DataServer::kMaxFrameBytes) >= 64 * sizeof(DataHeader));

// True for the 1st, 2nd, 4th, 8th... event: when a count is logged.
bool LogCount(uint64_t count) { return (count & (count - 1)) == 0; }

}  // namespace

DataServer::DataServer(ObjectStore* store, const ActorStates* states, CollectiveInbox* inbox,
                       const DataTokens* tokens, spdlog::logger* log)
    : store_(store),
      states_(states),
      inbox_(inbox),
      tokens_(tokens),
      log_(log),
      zap_(&ctx_, [this](const ZapRequest& r) { return Admit(r); }) {}

DataServer::~DataServer() { Stop(); }

Status DataServer::Bind(const std::string& host) {
  RETURN_IF_ERROR(zap_.Start());
  socket_.emplace(ctx_, zmq::socket_type::router);
  Result<std::string> bound = BindDataServer(*socket_, host, kMaxFrameBytes);
  if (!bound.ok()) {
    socket_.reset();
    return Status::InvalidArgument("data socket: " + bound.status().message());
  }
  endpoint_ = std::move(bound).value();
  thread_ = std::thread([this] { Loop(); });
  pthread_setname_np(thread_.native_handle(), "hmpmd-data");
  return Status::Ok();
}

void DataServer::Stop() {
  stop_.store(true);
  if (thread_.joinable()) thread_.join();
  socket_.reset();
}

void DataServer::Loop() {
  try {
    Serve();
  } catch (const zmq::error_t& e) {
    if (!stop_.load()) log_->error("data socket {} failed: {}", endpoint_, e.what());
  }
}

void DataServer::Serve() {
  zmq::socket_t& s = *socket_;
  std::vector<zmq::message_t> parts;
  while (!stop_.load(std::memory_order_acquire)) {
    zmq::pollitem_t item{s.handle(), 0, ZMQ_POLLIN, 0};
    if (zmq::poll(&item, 1, std::chrono::milliseconds(kPollMs)) == 0) continue;
    for (int n = 0; n < 1024; ++n) {
      parts.clear();
      if (!zmq::recv_multipart(s, std::back_inserter(parts), zmq::recv_flags::dontwait)) break;
      if (parts.size() < 2) {
        Malformed("a message without a header frame");
        continue;
      }
      Result<DataHeader> h = ParseDataHeader(parts[1].data(), parts[1].size());
      if (!h.ok()) {
        Malformed(h.status().message());
        continue;
      }
      // The token first: nothing of a refused message is looked at further.
      // A job's own token opens that job's outputs; a collective's frames
      // and other jobs' outputs take the cluster's.
      const bool of_outputs = h->op != static_cast<uint8_t>(DataOp::kCollective);
      if (of_outputs && h->key <= UINT32_MAX
              ? !tokens_->AcceptsFor(h->token, static_cast<JobId>(h->key))
              : !tokens_->Accepts(h->token)) {
        Refused(*h);
        if (h->op == static_cast<uint8_t>(DataOp::kFetch) ||
            h->op == static_cast<uint8_t>(DataOp::kFetchPeek) ||
            h->op == static_cast<uint8_t>(DataOp::kFetchState)) {
          // The fetcher fails at once with a clear reason, not at its
          // time-out; the reply names nothing the request did not.
          s.send(parts[0], zmq::send_flags::sndmore);
          SendFetchError(s, h->key, h->run, kWrongDataTokenMessage);
        }
        continue;
      }
      if (h->op == static_cast<uint8_t>(DataOp::kCollective) && parts.size() == 3) {
        inbox_->Deliver(h->key, h->src, std::move(parts[2]));
      } else if (h->op == static_cast<uint8_t>(DataOp::kTakeRead)) {
        (void)store_->Read(static_cast<JobId>(h->key), static_cast<uint32_t>(h->run));
      } else if (h->op == static_cast<uint8_t>(DataOp::kFetch) ||
                 h->op == static_cast<uint8_t>(DataOp::kFetchPeek)) {
        const JobId job = static_cast<JobId>(h->key);
        const uint32_t run = static_cast<uint32_t>(h->run);
        std::shared_ptr<const BufferList> outputs = h->op == static_cast<uint8_t>(DataOp::kFetch)
                                                        ? store_->Read(job, run)
                                                        : store_->Peek(job, run);
        s.send(parts[0], zmq::send_flags::sndmore);
        if (outputs == nullptr) {
          SendFetchError(s, h->key, h->run,
                         "no outputs of job " + std::to_string(job) + " run " +
                             std::to_string(run) + " on this worker");
          continue;
        }
        SendFetchReply(s, h->key, h->run, outputs);
      } else if (h->op == static_cast<uint8_t>(DataOp::kFetchState)) {
        ServeState(s, parts[0], *h);
      } else {
        Malformed("op " + std::to_string(h->op) + " with " + std::to_string(parts.size()) +
                  " frames");
      }
    }
  }
}

void DataServer::ServeState(zmq::socket_t& s, zmq::message_t& peer, const DataHeader& h) {
  const JobId job = static_cast<JobId>(h.key);
  std::shared_ptr<ActorState> state = states_->FindByKey(job, h.run);
  // The state's snapshots, sent without a copy: the kernels may go on
  // writing the state meanwhile, which replaces them.
  Result<std::vector<std::shared_ptr<const Buffer>>> exported =
      state == nullptr ? Status::NotFound("no state of that sub-model of job " +
                                          std::to_string(job) + " on this worker")
                       : state->Export();
  s.send(peer, zmq::send_flags::sndmore);
  if (!exported.ok()) {
    const bool not_copyable = exported.status().code() == StatusCode::kInvalidArgument;
    return SendFetchError(s, h.key, h.run,
                          not_copyable
                              ? std::string(kStateNotCopyableMessage) + exported.status().message()
                              : exported.status().message());
  }
  SendFetchReply(s, h.key, h.run, *exported);
}

void DataServer::Refused(const DataHeader& h) {
  const uint64_t count = refused_.fetch_add(1, std::memory_order_relaxed) + 1;
  if (!LogCount(count)) return;
  log_->warn("data socket {}: refused a message with op {} and a wrong data token ({} so far)",
             endpoint_, h.op, count);
}

bool DataServer::Admit(const ZapRequest& r) {
  // A worker binds before it registers, and peers may connect (a gang's
  // first frames) before its registration ack has brought the token: the
  // answer waits for it, a while, rather than refuse (a refused peer's
  // socket gives up for good, as ZeroMQ does after a refusal).
  (void)tokens_->WaitForFirst(kFirstTokenWaitUs);
  // The domain is always ours: this context has no other server socket.
  const JobId job = DataJobOf(r);
  if (job != 0 ? tokens_->AcceptsFor(DataTokenOf(r), job) : tokens_->Accepts(DataTokenOf(r))) {
    return true;
  }
  // The handler counts the refusal once this returns.
  const uint64_t count = zap_.refused() + 1;
  if (LogCount(count)) {
    // Not endpoint_: Bind() may still be writing it.
    log_->warn("data socket: refused a connection from {} with a wrong data token ({} so far)",
               r.address, count);
  }
  return false;
}

void DataServer::Malformed(const std::string& why) {
  const uint64_t count = malformed_.fetch_add(1, std::memory_order_relaxed) + 1;
  if (!LogCount(count)) return;
  log_->warn("data socket {}: dropped a malformed message: {} ({} so far)", endpoint_, why, count);
}

}  // namespace hmpmd::worker
