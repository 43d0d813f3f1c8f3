// Comparing shared secrets (the controller's token: worker registration,
// driver sessions, the REST API's Bearer token) without telling an attacker
// how much of a guess was right.
// Thread-safety: a free function on values; safe from any thread.
#pragma once

#include <string_view>

namespace hmpmd {

// Whether `got` equals `want`. The time taken depends on the lengths only,
// never on where the two differ. An empty `want` matches only an empty
// `got`: callers that treat an empty token as "no check" test that first.
bool SameSecret(std::string_view want, std::string_view got);

}  // namespace hmpmd
