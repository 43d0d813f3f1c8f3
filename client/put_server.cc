#include "put_server.h"

#include <pthread.h>

#include <algorithm>
#include <chrono>
#include <iterator>
#include <zmq_addon.hpp>

#include "hmpmd/protocol/data_auth.h"
#include "hmpmd/protocol/data_frames.h"
#include "hmpmd/protocol/data_replies.h"

namespace hmpmd::client::internal {
namespace {

constexpr int kPollMs = 20;  // how soon the destructor is noticed
// A peer sends only fetch headers and run-done notices here; a larger frame
// is not one of ours.
constexpr int64_t kMaxFrameBytes = 64 * 1024;
static_assert(kMaxNoticeBytes <= kMaxFrameBytes, "a worker's notice would cut its connection");

uint64_t BytesOf(const std::vector<Buffer>& data) {
  uint64_t n = 0;
  for (const Buffer& b : data) n += b.data.size();
  return n;
}

}  // namespace

PutServer::PutServer(JobId job, DataToken token, OnDone on_done)
    : job_(job),
      token_(token),
      on_done_(std::move(on_done)),
      zap_(&ctx_, [this](const ZapRequest& r) { return SameDataToken(DataTokenOf(r), token_); }) {}

PutServer::~PutServer() {
  Stop();
  socket_.reset();
}

void PutServer::Stop() {
  stop_.store(true);
  if (thread_.joinable()) thread_.join();
}

Status PutServer::Start(const std::string& host) {
  RETURN_IF_ERROR(zap_.Start());
  socket_.emplace(ctx_, zmq::socket_type::router);
  Result<std::string> bound = BindDataServer(*socket_, host, kMaxFrameBytes);
  if (!bound.ok()) {
    socket_.reset();
    return Status::InvalidArgument("put: the driver's data socket " + bound.status().message());
  }
  endpoint_ = std::move(bound).value();
  thread_ = std::thread([this] { Loop(); });
  pthread_setname_np(thread_.native_handle(), "hmpmd-puts");
  return Status::Ok();
}

uint32_t PutServer::Add(std::vector<Buffer> data) {
  const uint64_t n = BytesOf(data);
  auto held = std::make_shared<const std::vector<Buffer>>(std::move(data));
  std::lock_guard<std::mutex> lock(mu_);
  const uint32_t id = next_id_++;
  puts_.emplace(id, std::move(held));
  bytes_ += n;
  return id;
}

void PutServer::Erase(uint32_t id) {
  std::shared_ptr<const std::vector<Buffer>> gone;  // freed after the lock
  std::lock_guard<std::mutex> lock(mu_);
  auto it = puts_.find(id);
  if (it == puts_.end()) return;
  gone = std::move(it->second);
  bytes_ -= BytesOf(*gone);
  puts_.erase(it);
}

size_t PutServer::size() const {
  std::lock_guard<std::mutex> lock(mu_);
  return puts_.size();
}

uint64_t PutServer::bytes() const {
  std::lock_guard<std::mutex> lock(mu_);
  return bytes_;
}

void PutServer::Loop() {
  try {
    Serve(*socket_);
  } catch (const zmq::error_t&) {
    // The context is going away with the server; nothing is left to serve.
  }
}

void PutServer::Serve(zmq::socket_t& s) {
  std::vector<zmq::message_t> parts;
  while (!stop_.load(std::memory_order_acquire)) {
    zmq::pollitem_t item{s.handle(), 0, ZMQ_POLLIN, 0};
    if (zmq::poll(&item, 1, std::chrono::milliseconds(kPollMs)) == 0) continue;
    for (int n = 0; n < 256; ++n) {
      parts.clear();
      if (!zmq::recv_multipart(s, std::back_inserter(parts), zmq::recv_flags::dontwait)) break;
      if (parts.size() < 2) continue;
      Result<DataHeader> h = ParseDataHeader(parts[1].data(), parts[1].size());
      if (!h.ok()) continue;
      if (h->op == static_cast<uint8_t>(DataOp::kRunDone)) {
        if (parts.size() != 3 || !SameDataToken(h->token, token_) || h->key != job_ || !on_done_) {
          continue;
        }
        Result<RunDoneNotice> notice = DecodeRunDone(parts[2].data(), parts[2].size());
        if (notice.ok()) on_done_(std::move(notice).value());
        continue;
      }
      if (parts.size() != 2) continue;
      const bool fetch = h->op == static_cast<uint8_t>(DataOp::kFetch) ||
                         h->op == static_cast<uint8_t>(DataOp::kFetchPeek);
      if (!fetch) continue;  // take-reads: a put is kept until its Future goes
      s.send(parts[0], zmq::send_flags::sndmore);
      std::shared_ptr<const std::vector<Buffer>> data;
      if (!SameDataToken(h->token, token_)) {
        SendFetchError(s, h->key, h->run, kWrongDataTokenMessage);
        continue;
      }
      if (h->key == job_) {
        std::lock_guard<std::mutex> lock(mu_);
        auto it = puts_.find(static_cast<uint32_t>(h->run));
        if (it != puts_.end() && it->first == h->run) data = it->second;
      }
      if (data == nullptr) {
        SendFetchError(s, h->key, h->run,
                       "no put " + std::to_string(h->run) + " of job " + std::to_string(h->key) +
                           " on this driver (its Future was dropped)");
        continue;
      }
      SendFetchReply(s, h->key, h->run, data);
    }
  }
}

}  // namespace hmpmd::client::internal
