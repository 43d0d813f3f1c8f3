// The methods each REST route takes, in one table, so that every route
// answers a method it does not take alike: 405 with an Allow header naming
// what it takes, and OPTIONS with 204 and the same Allow header. (Methods
// the server implements on no route, such as TRACE or CONNECT, never get
// here: HttpServer answers them 501.)
// Thread-safety: free functions over constant data; safe from any thread.
#pragma once

#include <string_view>

namespace hmpmd {

// What OPTIONS * (the server as a whole) answers in Allow: every method
// some route takes.
inline constexpr std::string_view kAllServedMethods = "GET, HEAD, POST, DELETE, OPTIONS";

// The Allow value of the route at `path` (a decoded path, no query), e.g.
// "GET, HEAD, POST, OPTIONS" for /api/v1/jobs; empty when `path` is no
// route (a 404). Every route takes OPTIONS; every GET route but the event
// stream takes HEAD.
std::string_view RouteMethods(std::string_view path);

// Whether `method` is one of the methods listed in `allow` (as
// RouteMethods writes it).
bool MethodAllowed(std::string_view allow, std::string_view method);

}  // namespace hmpmd
