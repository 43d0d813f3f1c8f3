// Checks on the form of a REST request, made before it is routed: its query
// string (split into name=value pairs, percent-decoded and checked against
// the names the route takes, so that a typo or a repeated parameter is a
// 400 naming it rather than silently ignored) and the media type of a body.
// Thread-safety: free functions; safe from any thread.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "hmpmd/protocol/status.h"

namespace hmpmd {

// Decoded (name, value) pairs in the order given; "name" alone has an empty
// value and empty pieces ("a=1&&b=2", a trailing '&') are skipped.
using QueryParams = std::vector<std::pair<std::string, std::string>>;

// Splits and decodes `query` (what follows '?', may be empty). `route`
// names the endpoint in errors ("GET /api/v1/jobs"); `allowed` lists the
// names it takes (none for most routes). InvalidArgument, one line:
//   "query: unknown parameter 'x': GET /api/v1/jobs takes none"
//   "query: unknown parameter 'x': GET ... takes offset, limit, state"
//   "query: parameter 'limit' given twice"
//   "query: bad percent-encoding in 'a=%zz'"
//   "query: 'a=%ff' decodes to invalid UTF-8 or a control character"
Result<QueryParams> ParseQueryParams(std::string_view query, std::string_view route,
                                     std::initializer_list<std::string_view> allowed);

// Parses "/api/v1/jobs/{id}[/{rest}]": the id (decimal digits, no sign, no
// leading zero; one past 64 bits reads as UINT64_MAX, which names no job)
// and what follows the next '/'. False when the path is not of that form:
// "/api/v1/jobs/007", "/api/v1/jobs/3/" and "/api/v1/jobs/-1" are not.
bool ParseJobPath(std::string_view path, uint64_t* id, std::string* rest);

// The id of a job path as the path writes it, for "job N: no such job"
// (exact even where it does not fit 64 bits).
std::string JobIdText(std::string_view path);

// Ok when `content_type` (the header's value, "" when absent) is
// application/json, in any case, with optional parameters of which only
// charset=utf-8 is accepted ("application/json; charset=UTF-8"). Else an
// error for a 415: "Content-Type: 'text/plain' is not application/json ...".
Status CheckJsonContentType(std::string_view content_type);

}  // namespace hmpmd
