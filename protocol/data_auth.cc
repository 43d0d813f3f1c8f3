#include "hmpmd/protocol/data_auth.h"

#include <atomic>
#include <chrono>
#include <cstring>

#include "hmpmd/protocol/data_frames.h"

namespace hmpmd {
namespace {

// Names each monitor's inproc endpoint apart.
std::atomic<uint64_t> monitor_seq{0};

int64_t NowMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

}  // namespace

void SetDataCredentials(zmq::socket_t& s, const DataToken& token, JobId job) {
  s.set(zmq::sockopt::plain_username,
        job == 0 ? std::string(kDataPlainUser)
                 : std::string(kDataPlainUser) + kDataJobUserInfix + std::to_string(job));
  s.set(zmq::sockopt::plain_password, DataTokenHex(token));
}

void MakeDataServer(zmq::socket_t& s) {
  s.set(zmq::sockopt::plain_server, 1);
  s.set(zmq::sockopt::zap_domain, kDataZapDomain);
}

Result<std::string> BindDataServer(zmq::socket_t& s, const std::string& host,
                                   int64_t max_request_bytes) {
  try {
    MakeDataServer(s);
    s.set(zmq::sockopt::linger, 0);
    s.set(zmq::sockopt::rcvhwm, 0);
    s.set(zmq::sockopt::sndhwm, 0);
    s.set(zmq::sockopt::maxmsgsize, max_request_bytes);
    s.bind("tcp://" + host + ":*");
    return s.get(zmq::sockopt::last_endpoint);
  } catch (const zmq::error_t& e) {
    return Status::InvalidArgument("cannot bind tcp://" + host + ":*: " + e.what());
  }
}

DataToken DataTokenOf(const ZapRequest& r) {
  if (r.mechanism != "PLAIN" || r.credentials.size() != 2) return {};
  Result<DataToken> t = ParseDataToken(r.credentials[1]);
  return t.ok() ? *t : DataToken{};
}

JobId DataJobOf(const ZapRequest& r) {
  if (r.mechanism != "PLAIN" || r.credentials.size() != 2) return 0;
  const std::string prefix = std::string(kDataPlainUser) + kDataJobUserInfix;
  const std::string& user = r.credentials[0];
  if (!user.starts_with(prefix) || user.size() > prefix.size() + 10) return 0;
  uint64_t job = 0;
  for (size_t i = prefix.size(); i < user.size(); ++i) {
    if (user[i] < '0' || user[i] > '9') return 0;
    job = job * 10 + static_cast<uint64_t>(user[i] - '0');
  }
  return job <= UINT32_MAX ? static_cast<JobId>(job) : 0;
}

zmq::socket_t MonitorHandshakes(zmq::context_t& ctx, zmq::socket_t& s, int extra) {
  const std::string endpoint = "inproc://hmpmd-handshakes-" + std::to_string(monitor_seq++);
  if (zmq_socket_monitor(s.handle(), endpoint.c_str(), kHandshakeEvents | extra) != 0) {
    throw zmq::error_t();
  }
  zmq::socket_t monitor(ctx, zmq::socket_type::pair);
  monitor.set(zmq::sockopt::linger, 0);
  // No queue limit: a full one would block the monitored socket's I/O
  // thread (StopMonitor); events are small and read or dropped with it.
  monitor.set(zmq::sockopt::rcvhwm, 0);
  monitor.connect(endpoint);
  return monitor;
}

void StopMonitor(zmq::socket_t& s, zmq::socket_t& monitor) {
  if (s.handle() != nullptr && monitor.handle() != nullptr) {
    (void)zmq_socket_monitor(s.handle(), nullptr, 0);
  }
  monitor.close();
}

int NextMonitorEvent(zmq::socket_t& monitor, int64_t timeout_ms) {
  zmq::pollitem_t item{monitor.handle(), 0, ZMQ_POLLIN, 0};
  if (zmq::poll(&item, 1, std::chrono::milliseconds(timeout_ms)) == 0) return 0;
  // Two frames: 2 bytes of event and 4 of value, then the endpoint.
  zmq::message_t head, endpoint;
  if (!monitor.recv(head, zmq::recv_flags::dontwait)) return 0;
  if (head.more()) (void)monitor.recv(endpoint);
  if (head.size() < sizeof(uint16_t)) return 0;
  uint16_t event = 0;
  std::memcpy(&event, head.data(), sizeof(event));
  return event;
}

Status AwaitDataHandshake(zmq::socket_t& monitor, int64_t timeout_ms, const std::string& what) {
  const int64_t deadline = NowMs() + timeout_ms;
  for (;;) {
    const int64_t left = deadline - NowMs();
    if (left < 0) break;
    const int event = NextMonitorEvent(monitor, left);
    if (event == ZMQ_EVENT_HANDSHAKE_SUCCEEDED) return Status::Ok();
    if (event == ZMQ_EVENT_HANDSHAKE_FAILED_AUTH) {
      return Status::PermissionDenied(what + ": " + std::string(kWrongDataTokenMessage));
    }
  }
  return Status::Unavailable(what + ": cannot connect within " + std::to_string(timeout_ms) +
                             " ms");
}

}  // namespace hmpmd
