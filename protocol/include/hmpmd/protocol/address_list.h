// A primary's address and its standbys' (`hmpmd controller --standby`),
// separated by commas, as workers (--controller), drivers
// (ClientOptions::controller) and `hmpmd` commands (--url) take them.
// Thread-safety: a pure function.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace hmpmd {

// The addresses of `list`, in order; an empty one (",", a trailing comma)
// is kept, for the caller's check to name.
std::vector<std::string> SplitAddresses(std::string_view list);

}  // namespace hmpmd
