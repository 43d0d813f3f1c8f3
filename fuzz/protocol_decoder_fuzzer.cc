// libFuzzer harness for the protocol decoder: the first 4 bytes are the
// header frame, the rest the msgpack body. Decode must never crash, hang or
// leak, whatever the bytes; a message it accepts must encode, decode and
// encode again to the same bytes (bytes, not ==, so a NaN argument passes).
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>

#include "hmpmd/protocol/codec.h"

namespace {

void DecodeAndRoundTrip(std::string_view header, std::string_view body) {
  hmpmd::DecodeLimits limits;
  limits.max_body_bytes = 1 << 20;
  auto message = hmpmd::Decode(header, body, limits);
  if (!message.ok()) return;
  hmpmd::EncodedFrames again = hmpmd::Encode(*message);
  auto round = hmpmd::Decode(again.header, again.body, limits);
  if (!round.ok()) std::abort();
  hmpmd::EncodedFrames third = hmpmd::Encode(*round);
  if (third.header != again.header || third.body != again.body) std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 4) return 0;
  std::string_view all(reinterpret_cast<const char*>(data), size);
  DecodeAndRoundTrip(all.substr(0, 4), all.substr(4));
  // The same bytes under the current version, so corpus entries written
  // under an older one still reach the body decoders after a bump.
  std::string header(all.substr(0, 4));
  header[2] = static_cast<char>(hmpmd::kProtocolVersion);
  if (header != all.substr(0, 4)) DecodeAndRoundTrip(header, all.substr(4));
  return 0;
}
