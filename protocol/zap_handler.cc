#include "hmpmd/protocol/zap_handler.h"

#include <chrono>
#include <utility>

namespace hmpmd {
namespace {

constexpr int kPollMs = 50;  // how soon the destructor is noticed

}  // namespace

ZapHandler::ZapHandler(zmq::context_t* ctx, Check check) : ctx_(ctx), check_(std::move(check)) {}

ZapHandler::~ZapHandler() {
  stop_ = true;
  if (thread_.joinable()) thread_.join();
}

Status ZapHandler::Start() {
  try {
    socket_ = zmq::socket_t(*ctx_, zmq::socket_type::rep);
    socket_.set(zmq::sockopt::linger, 0);
    socket_.bind("inproc://zeromq.zap.01");
  } catch (const zmq::error_t& e) {
    return Status::Internal(std::string("ZAP handler: ") + e.what());
  }
  thread_ = std::thread([this] { Loop(); });
  return Status::Ok();
}

void ZapHandler::Loop() {
  // The socket is used by this thread only from here on.
  while (!stop_) {
    zmq::pollitem_t item{socket_.handle(), 0, ZMQ_POLLIN, 0};
    try {
      if (zmq::poll(&item, 1, std::chrono::milliseconds(kPollMs)) == 0) continue;
      // Request: version, request id, domain, address, identity, mechanism,
      // then the mechanism's credentials.
      std::vector<zmq::message_t> req;
      do {
        req.emplace_back();
        if (!socket_.recv(req.back())) break;
      } while (req.back().more());
      if (req.size() < 6) continue;  // not a ZAP request; REP needs a reply anyway
      ZapRequest r;
      r.domain = req[2].to_string();
      r.address = req[3].to_string();
      r.mechanism = req[5].to_string();
      for (size_t i = 6; i < req.size(); ++i) r.credentials.push_back(req[i].to_string());
      const bool ok = check_(r);
      if (!ok) refused_.fetch_add(1, std::memory_order_relaxed);
      socket_.send(req[0], zmq::send_flags::sndmore);  // version
      socket_.send(req[1], zmq::send_flags::sndmore);  // request id
      socket_.send(ok ? zmq::str_buffer("200") : zmq::str_buffer("400"), zmq::send_flags::sndmore);
      socket_.send(ok ? zmq::str_buffer("OK") : zmq::str_buffer("not authorized"),
                   zmq::send_flags::sndmore);
      socket_.send(zmq::str_buffer(""), zmq::send_flags::sndmore);  // user id
      socket_.send(zmq::str_buffer(""), zmq::send_flags::none);     // metadata
    } catch (const zmq::error_t& e) {
      if (e.num() == ETERM) return;
      // Nothing to log with here: the next request starts afresh.
    }
  }
  socket_.close();
}

}  // namespace hmpmd
