// Session: one connection of an HttpServer (see http_server_core.h for who
// owns what): reads requests, hands them to the handler, writes the replies,
// or streams Server-Sent Events once it turned into an SSE stream.
// Thread-safety: every method runs on the session's strand unless it says
// "any thread".
#pragma once

#include <array>
#include <atomic>
#include <boost/beast/http.hpp>
#include <deque>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "http_server_core.h"

namespace hmpmd {
namespace http_internal {

namespace http = beast::http;

// One connection. Every method runs on the session's strand unless it says
// "any thread". The SSE queue fields are guarded by core_->mu.
class Session : public std::enable_shared_from_this<Session> {
 public:
  Session(std::shared_ptr<ServerCore> core, tcp::socket socket, uint64_t id)
      : core_(std::move(core)),
        strand_(socket.get_executor()),
        stream_(std::move(socket)),
        id_(id) {}

  // Any thread.
  void Start();
  // Any thread: answers 503 and closes.
  void Reject();
  // Any thread, before Stop() joins the server threads.
  void PostClose();
  // Any thread. Dropped once Stop() has begun.
  void PostResponse(HttpResponse response);
  // REQUIRES: core_->mu held and Stop() not begun. False when the queue is
  // full; the caller then disconnects this client.
  bool EnqueueLocked(Chunk chunk);

 private:
  // Called exactly once per request, from any thread, via the HttpReply.
  // Destroying it unreplied answers 500, so a lost reply never hangs a client.
  struct ReplyState {
    explicit ReplyState(std::shared_ptr<Session> s) : session(std::move(s)) {}
    ~ReplyState() {
      if (replied.exchange(true)) return;
      try {
        session->PostResponse(ErrorResponse(500, "the request was dropped without a reply"));
      } catch (...) {  // a destructor must not throw; the client times out
      }
    }
    void Send(HttpResponse r) {
      if (!replied.exchange(true)) session->Deliver(std::move(r));
    }
    std::shared_ptr<Session> session;
    std::atomic<bool> replied{false};
  };

  // Reads the header first, so that a client waiting on
  // "Expect: 100-continue" (curl, for large bodies) is told to go on.
  void DoRead();
  void OnHeader();
  void ReadBody();
  void OnRead(beast::error_code ec);
  // Any thread: writes `r` at once when called from the handler on this
  // strand, else posts it (PostResponse).
  void Deliver(HttpResponse r);
  void WriteResponse(HttpResponse r);
  // Answers with a JSON error, then closes after draining the rest of the
  // request for up to kLinger.
  void WriteError(int status, std::string message);
  void Drain();
  // Turns this connection into an SSE stream: head, hello, then broadcasts.
  void StartSse();
  // Reads (and ignores) whatever the SSE client sends, to notice it leave.
  void WatchSse();
  void FlushSse();
  void Close();

  const std::shared_ptr<ServerCore> core_;
  const net::any_io_executor strand_;
  beast::tcp_stream stream_;
  const uint64_t id_;
  std::string peer_;  // HttpRequest::peer, found at the first request
  beast::flat_buffer buffer_;
  std::optional<http::request_parser<http::string_body>> parser_;
  std::optional<http::response<http::string_body>> res_;  // an error being written
  // The response being written: out_ owns (or shares) the body, head_buf_
  // holds the formatted head; both are reused across keep-alive requests.
  HttpResponse out_;
  std::string head_buf_;
  std::array<net::const_buffer, 2> out_buffers_;
  // The server thread running the handler for this session's request, while
  // it runs (else a default id): a reply from that thread is written at once.
  std::atomic<std::thread::id> handler_thread_{};
  std::array<char, 4096> scratch_{};  // drained or ignored input
  unsigned version_ = 11;
  bool keep_alive_ = false;
  bool head_ = false;  // the request is HEAD
  bool closed_ = false;
  // SSE, strand only.
  bool sse_writing_ = false;
  std::vector<Chunk> sse_inflight_;
  std::vector<net::const_buffer> sse_buffers_;
  // SSE, guarded by core_->mu.
  std::deque<Chunk> sse_queue_;
  bool sse_ready_ = false;  // head and hello are queued; flushing may start
  bool sse_flush_posted_ = false;
};

}  // namespace http_internal
}  // namespace hmpmd
