// Parses JSON text strictly for the spec parsers (job spec, pool spec): as
// nlohmann::ordered_json does (member order kept, UTF-8 checked), but an
// object that names a field twice is an error, not "the last one wins".
// Thread-safety: a free function; safe from any thread.
#pragma once

#include <nlohmann/json.hpp>
#include <string_view>

#include "hmpmd/protocol/status.h"

namespace hmpmd {

// InvalidArgument "invalid JSON: parse error at line L, column C: ..." or
// "tasks[2].args: field 'us' given twice" ("field 'x' given twice" at the top).
// A NUL byte anywhere is an error ("invalid JSON: a NUL byte at line L,
// column C"), not the end of the text.
Result<nlohmann::ordered_json> ParseStrictJson(std::string_view text);

}  // namespace hmpmd
