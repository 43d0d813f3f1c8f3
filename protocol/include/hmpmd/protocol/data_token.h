// DataToken: the shared secret of the data plane. The controller draws one
// (or keeps the one in its job store) and hands it to every worker in the
// RegisterAck and to every driver session in the SessionAck; every data
// frame header carries it (DataHeader::token), and a worker's data socket
// serves only frames that carry a token it accepts. It authenticates; it
// does not encrypt (tensors cross the wire in the clear).
//
// A job's data token (JobDataToken) opens that job's outputs only: it is
// what a tenant's client gets (REST `/outputs`, a session's SessionAck), so
// that holding it opens no other tenant's. Workers, who hold the cluster's
// token, derive any job's; nobody derives the cluster's from a job's.
//
// All zero is "no token": NewDataToken never draws it and no worker
// accepts it.
//
// Thread-safety: plain functions on values.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "hmpmd/protocol/status.h"
#include "hmpmd/protocol/types.h"

namespace hmpmd {

struct DataToken {
  uint64_t hi = 0;
  uint64_t lo = 0;

  bool empty() const { return hi == 0 && lo == 0; }
  template <typename Ar>
  void Serialize(Ar& ar) {
    ar(hi, lo);
  }
  // Not constant time: for tests and bookkeeping. Checks of a token from
  // the network use SameDataToken.
  friend bool operator==(const DataToken&, const DataToken&) = default;
};
static_assert(sizeof(DataToken) == 16);

// 16 bytes from the kernel's random source (getrandom), never all zero.
DataToken NewDataToken();
// Compares in constant time; false when either is empty.
bool SameDataToken(const DataToken& a, const DataToken& b);
// The data token of job `job` under the cluster's `cluster`: SipHash-2-4
// keyed by `cluster` (siphash.h), never empty. Empty for an empty `cluster`.
DataToken JobDataToken(const DataToken& cluster, JobId job);
// 32 lower-case hex digits (hi first), as REST gives it out.
std::string DataTokenHex(const DataToken& t);
// The inverse of DataTokenHex (either case). InvalidArgument, naming what
// is wrong, for anything but 32 hex digits that are not all zero.
Result<DataToken> ParseDataToken(std::string_view hex);

}  // namespace hmpmd
