// JsonText: the one way the service writes JSON text (REST answers, event
// stream chunks, stored figures, CLI output). Strings that are not valid
// UTF-8 (a kernel's error, a name from the wire) are written with U+FFFD in
// their place instead of throwing, so rendering an answer never fails on
// the data in it.
// Thread-safety: a free function on values; safe from any thread.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

namespace hmpmd {

// `value` as JSON text: compact (indent < 0, the default) or indented by
// `indent` spaces, non-ASCII characters kept as UTF-8.
std::string JsonText(const nlohmann::json& value, int indent = -1);

}  // namespace hmpmd
