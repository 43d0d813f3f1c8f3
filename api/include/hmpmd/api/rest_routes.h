// The REST routes as one table (RestApi::Routes(), defined in
// api/rest_routes.cc): per route and method, its path pattern, where its
// answer is made, whether it needs the Bearer token, what query it takes,
// and its handler. RestApi::Handle reads everything from it: routing, 404,
// 405 with its Allow header, OPTIONS, the token check and the query check.
// A new route is one row.
//
// Thread-safety: constant data and const methods; safe from any thread.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "hmpmd/api/api_snapshot.h"
#include "hmpmd/http/http_types.h"

namespace hmpmd {

class RestApi;
struct Route;

// Who may call a route when the controller has a token
// (docs/operations.md, "Access control").
enum class RouteAccess : uint8_t {
  // Anyone: the dashboard's files and the OpenAPI document, which tell
  // nothing about jobs (the dashboard must load to ask for the token).
  kOpen,
  // Holders of the token (`Authorization: Bearer TOKEN`), unless
  // --public-read or --public-metrics.
  kMetrics,
  // Holders of the token, unless --public-read.
  kRead,
  // Holders of the token, always.
  kWrite,
};

// Where a route's answer is made.
enum class RouteRuns : uint8_t {
  // On the HTTP server's thread (the compiled-in files).
  kHttpThread,
  // From the published snapshot, on the HTTP thread; a read that finds it
  // out of date waits for the loop's next refresh and is answered on the
  // hmpmd-answer thread. The loop answers what the snapshot cannot.
  kSnapshot,
  // From the snapshot and the renderings kept of ended jobs when they can
  // answer (an ended job's body is formatted on hmpmd-format); else on the
  // controller loop, which copies what heavy bodies need and has them
  // formatted on hmpmd-format.
  kSnapshotOrLoop,
  // On the controller loop.
  kLoop,
  // A JSON body (else 415, on the HTTP thread), parsed and checked on
  // hmpmd-parse, then admitted on the loop.
  kParser,
  // By the HTTP server itself (the event stream); never reaches RestApi.
  kServer,
};

// What query parameters a route takes.
enum class RouteQuery : uint8_t {
  kNone,     // any parameter is a 400 that names it
  kOwn,      // its handler checks its own (a task table's, a job's DELETE)
  kIgnored,  // the dashboard's files
};

// One request on its way through a route: what the handler gets.
struct RouteCall {
  HttpRequest req;  // HEAD arrives as GET (the server leaves the body out)
  HttpReply reply;
  const Route* route = nullptr;
  uint64_t id = 0;  // the job id of an {id} pattern
  // The one tenant whose jobs the call may see and change; nullopt: every
  // job (no tokens, an admin's token, or a read under --public-read).
  std::optional<std::string> tenant;
  // A fresh snapshot off the loop (kSnapshot, kSnapshotOrLoop); null on
  // the loop and on other threads.
  std::shared_ptr<const ApiSnapshot> snap;
};

struct Route {
  // A path; "{id}" is a job id (ParseJobPath: one spelling per job), and
  // "{asset}" is any of the compiled-in dashboard files ("/" is
  // /index.html).
  std::string_view pattern;
  // A GET row takes HEAD too, unless the server streams it (kServer).
  std::string_view method;
  RouteRuns runs = RouteRuns::kLoop;
  RouteAccess access = RouteAccess::kRead;
  RouteQuery query = RouteQuery::kNone;
  // Answers `call`, calling call.reply once, or declines (false, and the
  // reply untouched) when it runs with a snapshot that cannot answer: the
  // call then goes to the loop. Null for kServer.
  bool (RestApi::*handler)(RouteCall& call) = nullptr;
};

// The table, grouped by pattern, with what routing needs precomputed.
class RouteTable {
 public:
  // REQUIRES: the rows of one pattern are next to each other. A path is
  // matched against the patterns in order; the first that matches wins.
  explicit RouteTable(std::span<const Route> routes);

  struct Match {
    std::span<const Route> rows;  // empty: no route (404)
    std::string_view allow;       // Allow: "GET, HEAD, POST, OPTIONS"
    uint64_t id = 0;              // the job id of an {id} pattern
  };
  // The route of `path` (decoded, no query).
  Match Find(std::string_view path) const;
  // The row of `method` (HEAD: GET's, unless kServer); null when the route
  // does not take it (OPTIONS included: every route answers it alike).
  static const Route* Row(const Match& m, std::string_view method);
  // Whether a query on `method` is refused before the handler runs: the
  // row's RouteQuery::kNone; for OPTIONS, any row's of the route.
  static bool RefusesQuery(const Match& m, std::string_view method);
  // What OPTIONS * answers: every method some route takes.
  std::string_view all_methods() const { return all_; }
  std::span<const Route> rows() const { return routes_; }

 private:
  struct Group {
    std::span<const Route> rows;
    std::string allow;
  };
  static bool Matches(std::string_view pattern, std::string_view path, uint64_t* id);

  std::span<const Route> routes_;
  std::vector<Group> groups_;
  std::string all_;
};

}  // namespace hmpmd
