// RestApi: the HTTP routes of DESIGN.md's "REST API", over the controller,
// plus the dashboard's static files (/, /dashboard/*) and the OpenAPI
// document (/api/v1/openapi.json), which are compiled into the binary and
// served without touching the loop.
//
// Handle() is called on the HTTP server's thread. Work that is pure (parsing
// and checking a submitted spec) stays there, so a large spec never stalls
// the scheduler; anything that reads or changes controller state is posted
// to the controller loop, which answers through `reply`.
// Thread-safety: Handle() may be called from any thread.
#pragma once

#include <string>

#include "controller.h"
#include "event_feed.h"
#include "http_types.h"

namespace hmpmd {

class RestApi {
 public:
  // `controller` outlives this object. `token` empty: no auth.
  RestApi(Controller* controller, std::string token, SpecLimits limits);

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

  Controller* controller_;
  std::string token_;
  SpecLimits limits_;
  EventFeed* feed_ = nullptr;
};

// Prometheus text exposition of the controller's counters. Loop thread.
std::string PrometheusText(const Controller& c);

}  // namespace hmpmd
