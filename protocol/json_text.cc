#include "hmpmd/protocol/json_text.h"

namespace hmpmd {

std::string JsonText(const nlohmann::json& value, int indent) {
  return value.dump(indent, ' ', /*ensure_ascii=*/false, nlohmann::json::error_handler_t::replace);
}

}  // namespace hmpmd
