// The request-target of an HTTP/1.1 request (RFC 9112 §3.2), turned into
// the path a router matches and the query it checks: origin-form
// ("/api/v1/jobs?x=1") as it is, absolute-form ("http://host:8080/api/v1/jobs?x=1",
// which a proxy sends) with its scheme and authority stripped, and the
// path's %XX escapes decoded, so that "/api/v1/jobs/%31" is "/api/v1/jobs/1",
// and its dot-segments removed (RFC 3986 §5.2.4): "/api/v1/x/../jobs" is
// "/api/v1/jobs".
// Thread-safety: free functions; safe from any thread.
#pragma once

#include <string>
#include <string_view>

#include "hmpmd/protocol/status.h"

namespace hmpmd {

struct HttpTarget {
  std::string origin;  // origin-form, escapes kept: "/api/v1/jobs/%31?x=1"
  std::string path;    // decoded, dot-segments removed: "/api/v1/jobs/1"; "*" for asterisk-form
  std::string query;   // after '?', escapes kept (each parameter is decoded on its own)
};

// Parses `target` as sent on the request line. Accepts origin-form,
// absolute-form with scheme http or https (any case; the authority is not
// used: the server answers for itself whatever host is named; an empty
// path is "/") and asterisk-form ("*", for OPTIONS). A fragment ('#...')
// is dropped. InvalidArgument, one line that names the problem:
//   "request target 'x': expected a path starting with '/' or an http:// URL"
//   "request target 'ftp://h/': scheme 'ftp' is not http or https"
//   "request target 'http:///x': no host"
//   "request target '/a/%zz': bad percent-encoding '%zz' in the path"
//   "request target '/a%2Fb': the path has an encoded '/' (%2F)"
//   "request target '/a%00': the path has an encoded control character (%00)"
Result<HttpTarget> ParseHttpTarget(std::string_view target);

// Decodes each %XX (hex digits in any case) of `text` into its byte; with
// `plus_is_space` (application/x-www-form-urlencoded, a query) a '+' is a
// space, else it stays '+'. InvalidArgument naming the first bad escape, a
// '%' not followed by two hex digits: "bad percent-encoding '%zz'".
Result<std::string> PercentDecode(std::string_view text, bool plus_is_space);

// Up to 64 bytes of `text` to quote in a one-line error: bytes outside
// printable ASCII as '?', and "..." when cut.
std::string ShownInError(std::string_view text);

}  // namespace hmpmd
