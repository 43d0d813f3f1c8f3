#include "hmpmd/protocol/same_secret.h"

namespace hmpmd {

bool SameSecret(std::string_view want, std::string_view got) {
  // The length is no secret (a token file's size); the bytes are. Every
  // byte is looked at, whatever differs first.
  if (want.size() != got.size()) return false;
  unsigned char diff = 0;
  for (size_t i = 0; i < want.size(); ++i) {
    diff |= static_cast<unsigned char>(want[i] ^ got[i]);
  }
  return diff == 0;
}

}  // namespace hmpmd
