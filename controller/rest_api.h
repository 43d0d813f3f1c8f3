// RestApi: the HTTP routes of DESIGN.md's "REST API", over the controller.
//
// Handle() is called on the HTTP server's thread. Work that is pure (parsing
// and checking a submitted spec) stays there, so a large spec never stalls
// the scheduler; anything that reads or changes controller state is posted
// to the controller loop, which answers through `reply`.
// Thread-safety: Handle() may be called from any thread.
#pragma once

#include <string>

#include "controller.h"
#include "http_types.h"

namespace hmpmd {

class RestApi {
 public:
  // `controller` outlives this object. `token` empty: no auth.
  RestApi(Controller* controller, std::string token, SpecLimits limits);

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
};

// Prometheus text exposition of the controller's counters. Loop thread.
std::string PrometheusText(const Controller& c);

}  // namespace hmpmd
