#include "hmpmd/protocol/address_list.h"

#include <algorithm>

namespace hmpmd {

std::vector<std::string> SplitAddresses(std::string_view list) {
  std::vector<std::string> out;
  for (size_t at = 0; at <= list.size();) {
    const size_t comma = std::min(list.find(',', at), list.size());
    out.emplace_back(list.substr(at, comma - at));
    at = comma + 1;
  }
  return out;
}

}  // namespace hmpmd
