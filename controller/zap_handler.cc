#include "zap_handler.h"

#include <spdlog/spdlog.h>
#include <zmq.h>

#include <vector>

namespace hmpmd {

ZapHandler::ZapHandler(zmq::context_t* ctx, std::set<std::string> allowed)
    : ctx_(ctx), allowed_(std::move(allowed)) {}

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
      if (zmq::poll(&item, 1, std::chrono::milliseconds(100)) == 0) continue;
      // Request: version, request id, domain, address, identity, mechanism,
      // then the mechanism's credentials (CURVE: the 32-byte client key).
      std::vector<zmq::message_t> req;
      do {
        req.emplace_back();
        if (!socket_.recv(req.back())) break;
      } while (req.back().more());
      if (req.size() < 6) continue;  // not a ZAP request; REP needs a reply anyway
      std::string version = req[0].to_string(), id = req[1].to_string();
      std::string mechanism = req[5].to_string();
      bool ok = false;
      if (mechanism == "CURVE" && req.size() >= 7 && req[6].size() == 32) {
        char z85[41];
        zmq_z85_encode(z85, static_cast<const uint8_t*>(req[6].data()), 32);
        ok = allowed_.count(z85) > 0;
      }
      if (!ok) {
        ++refused_;
        spdlog::warn("refused a connection: its CURVE key is not authorized");
      }
      socket_.send(zmq::buffer(version), zmq::send_flags::sndmore);
      socket_.send(zmq::buffer(id), zmq::send_flags::sndmore);
      const std::string code = ok ? "200" : "400";
      const std::string text = ok ? "OK" : "key not authorized";
      socket_.send(zmq::buffer(code), zmq::send_flags::sndmore);
      socket_.send(zmq::buffer(text), zmq::send_flags::sndmore);
      socket_.send(zmq::str_buffer(""), zmq::send_flags::sndmore);
      socket_.send(zmq::str_buffer(""), zmq::send_flags::none);
    } catch (const zmq::error_t& e) {
      if (e.num() == ETERM) return;
      spdlog::error("ZAP handler: {}", e.what());
    }
  }
  socket_.close();
}

}  // namespace hmpmd
