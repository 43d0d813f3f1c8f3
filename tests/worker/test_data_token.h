// The data token tests hand out (RegisterAck, DataTokens, FetchFromPeer)
// where no controller draws one, and one that no worker accepts.
// Thread-safety: constants.
#pragma once

#include "hmpmd/protocol/data_token.h"

namespace hmpmd::testing {

inline constexpr DataToken kTestDataToken{0x7465737464617461, 0x746f6b656e000001};
inline constexpr DataToken kOtherDataToken{0x7465737464617461, 0x746f6b656e000002};

}  // namespace hmpmd::testing
