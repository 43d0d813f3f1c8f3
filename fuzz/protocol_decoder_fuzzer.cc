// libFuzzer harness for the protocol decoder: the first 4 bytes are the
// header frame, the rest the msgpack body. Decode must never crash, hang or
// leak, whatever the bytes; a message it accepts must encode, decode and
// encode again to the same bytes (bytes, not ==, so a NaN argument passes).
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "hmpmd/protocol/codec.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 4) return 0;
  std::string_view all(reinterpret_cast<const char*>(data), size);
  hmpmd::DecodeLimits limits;
  limits.max_body_bytes = 1 << 20;
  auto message = hmpmd::Decode(all.substr(0, 4), all.substr(4), limits);
  if (!message.ok()) return 0;
  hmpmd::EncodedFrames again = hmpmd::Encode(*message);
  auto round = hmpmd::Decode(again.header, again.body, limits);
  if (!round.ok()) std::abort();
  hmpmd::EncodedFrames third = hmpmd::Encode(*round);
  if (third.header != again.header || third.body != again.body) std::abort();
  return 0;
}
