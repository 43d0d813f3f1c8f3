// RestApi: the HTTP routes of DESIGN.md's "REST API", over the controller,
// plus the dashboard's static files (/, /dashboard/*) and the OpenAPI
// document (/api/v1/openapi.json), which are compiled into the binary and
// served without touching the loop.
//
// Handle() is called on the HTTP server's thread. Work that is pure (parsing
// and checking a submitted spec) stays there, so a large spec never stalls
// the scheduler; anything that reads or changes controller state is posted
// to the controller loop, which answers through `reply`.
// Large answers (task pages) are copied out on the loop and formatted on the
// RestApi's own formatting thread.
// Thread-safety: Handle() may be called from any thread.
#pragma once

#include <condition_variable>
#include <deque>
#include <functional>
#include <map>
#include <mutex>
#include <string>
#include <thread>

#include "controller.h"
#include "event_feed.h"
#include "http_types.h"

namespace hmpmd {

class RestApi {
 public:
  // `controller` outlives this object. `token` empty: no auth.
  RestApi(Controller* controller, std::string token, SpecLimits limits);
  // Finishes queued formatting work and joins the formatting thread.
  ~RestApi();
  RestApi(const RestApi&) = delete;
  RestApi& operator=(const RestApi&) = delete;

  // Serves /metrics from `feed` (live metrics) instead of the basic
  // counters. Call before serving; `feed` outlives this object.
  void SetEventFeed(EventFeed* feed) { feed_ = feed; }

  void Handle(HttpRequest req, HttpReply reply);

  // One-line JSON error body: {"error": "..."}.
  static HttpResponse Error(int status, const std::string& message);
  static HttpResponse Json(int status, const std::string& body);

 private:
  bool Authorised(const HttpRequest& req) const;
  void OnLoop(const HttpRequest& req, HttpReply reply);  // runs on the loop
  // Runs `fn` on the formatting thread: large answers are copied out on the
  // loop and turned into JSON there, so they cost the loop a copy only.
  void OffLoop(std::function<void()> fn);
  void FormatterLoop();

  Controller* controller_;
  std::string token_;
  SpecLimits limits_;
  EventFeed* feed_ = nullptr;
  // Ended jobs never change: their summary (with metrics, which walk every
  // run) is rendered once. Loop thread only; entries of forgotten jobs go.
  std::map<JobId, std::string> ended_summaries_;

  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::function<void()>> queue_;  // guarded by mu_
  bool stop_ = false;                        // guarded by mu_
  std::thread formatter_;
};

}  // namespace hmpmd
