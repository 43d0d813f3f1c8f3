// Data-plane authentication at connect time. A worker's data socket is a
// PLAIN server in the ZAP domain kDataZapDomain: its ZapHandler lets a
// peer connect only when the PLAIN password is a data token it accepts (as
// DataTokenHex writes it), so a peer without one never gets to send a
// frame, let alone an endless message (libzmq buffers a message's frames
// until its last one). Peers connect with SetDataCredentials and watch the
// handshake with a monitor (MonitorHandshakes): a refused one fails at
// once, with PermissionDenied, rather than at its time-out.
//
// Thread-safety: plain functions; each socket is used by its caller's
// thread only, as ZeroMQ requires.
#pragma once

#include <cstdint>
#include <string>
#include <zmq.hpp>

#include "hmpmd/protocol/data_token.h"
#include "hmpmd/protocol/status.h"
#include "hmpmd/protocol/zap_handler.h"

namespace hmpmd {

inline constexpr char kDataZapDomain[] = "hmpmd-data";
inline constexpr char kDataPlainUser[] = "hmpmd-data";
inline constexpr char kDataJobUserInfix[] = " job ";

// Client side: `s` (before it connects) presents `token`, for job `job`
// (user "hmpmd-data job N"): then `token` may be that job's
// (JobDataToken), which a worker can check only knowing the job. Job 0:
// the cluster's token. Throws zmq::error_t.
void SetDataCredentials(zmq::socket_t& s, const DataToken& token, JobId job = 0);
// Server side: `s` (before it binds) asks its context's ZAP handler about
// every peer. Throws zmq::error_t.
void MakeDataServer(zmq::socket_t& s);
// A data server's ROUTER `s` (MakeDataServer, no linger, unbounded queues,
// requests of at most `max_request_bytes`) bound to tcp://HOST:* : its
// endpoint, or why it cannot bind.
Result<std::string> BindDataServer(zmq::socket_t& s, const std::string& host,
                                   int64_t max_request_bytes);
// The token a ZAP request for a data socket presents; empty for another
// mechanism or a password that is not a token.
DataToken DataTokenOf(const ZapRequest& r);
// The job a ZAP request's token is for (SetDataCredentials); 0 for none.
JobId DataJobOf(const ZapRequest& r);

// The events MonitorHandshakes reports besides `extra`.
inline constexpr int kHandshakeEvents =
    ZMQ_EVENT_HANDSHAKE_SUCCEEDED | ZMQ_EVENT_HANDSHAKE_FAILED_AUTH |
    ZMQ_EVENT_HANDSHAKE_FAILED_PROTOCOL | ZMQ_EVENT_HANDSHAKE_FAILED_NO_DETAIL;

// A PAIR socket of `ctx` that receives `s`'s handshake events (and
// `extra` ones). Call before `s` connects. Throws zmq::error_t.
// Close it only through StopMonitor, while `s` is still open.
zmq::socket_t MonitorHandshakes(zmq::context_t& ctx, zmq::socket_t& s, int extra = 0);
// Stops `s`'s monitor, then closes `monitor` (the PAIR MonitorHandshakes
// gave); either may be empty. libzmq sends an event to the monitor with a
// blocking send from the thread that raised it, often its I/O thread: with
// the PAIR closed first, an event raised later (a handshake cut short by
// closing `s`) blocked that I/O thread for good, and with it every socket
// of the context (a worker that never registered again).
void StopMonitor(zmq::socket_t& s, zmq::socket_t& monitor);
// StopMonitor(s, monitor) when it leaves scope: declare it after both.
class MonitorStop {
 public:
  MonitorStop(zmq::socket_t& s, zmq::socket_t& monitor) : s_(s), monitor_(monitor) {}
  ~MonitorStop() { StopMonitor(s_, monitor_); }
  MonitorStop(const MonitorStop&) = delete;
  MonitorStop& operator=(const MonitorStop&) = delete;

 private:
  zmq::socket_t& s_;
  zmq::socket_t& monitor_;
};
// The next event on `monitor`, waiting up to `timeout_ms` (0: not at all);
// 0 when none came. Throws zmq::error_t.
int NextMonitorEvent(zmq::socket_t& monitor, int64_t timeout_ms);
// Waits up to `timeout_ms` for the handshake `monitor` (MonitorHandshakes)
// watches: Ok once it succeeded; PermissionDenied ("WHAT: refused: wrong
// data token") when the peer refused the credentials; Unavailable ("WHAT:
// cannot connect within N ms") when neither came in time. Other events
// are skipped. Throws zmq::error_t.
Status AwaitDataHandshake(zmq::socket_t& monitor, int64_t timeout_ms, const std::string& what);

}  // namespace hmpmd
