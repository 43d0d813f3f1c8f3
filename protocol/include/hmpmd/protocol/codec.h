// Encodes messages into the two frames of the versioned envelope and decodes
// them back, validating as it goes.
//
// Envelope (after the ROUTER identity frame, when there is one):
//   frame 1, header: 4 bytes 'H' 'M' version type
//   frame 2, body:   the message as a msgpack array (see messages.h)
//
// Decode never throws: bad bytes give a Corruption status naming what was
// wrong, and the caller counts and drops the frame.
// Thread-safety: free functions over values; safe from any thread.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>

#include "hmpmd/protocol/messages.h"
#include "hmpmd/protocol/status.h"

namespace hmpmd {

inline constexpr size_t kHeaderSize = 4;

// Bounds on what a decoded frame may hold; larger input is Corruption.
struct DecodeLimits {
  size_t max_body_bytes = 64u << 20;  // 64 MiB
  size_t max_batch = 65536;           // tasks or results in one batch
  size_t max_string = 1u << 20;       // any one string
  size_t max_args = 256;              // arguments of one task
};

struct EncodedFrames {
  std::string header;
  std::string body;
};

EncodedFrames Encode(const Message& message);
// Appends the encoded body to `out`; the header is EncodeHeader(type).
void EncodeBody(const Message& message, std::string* out);
std::string EncodeHeader(MsgType type);
// The exact bytes `group` takes inside an encoded SessionSubmit, counted by
// the encoder itself without building them (the driver splits its messages
// under DecodeLimits::max_body_bytes with it).
size_t EncodedSize(const SubmitGroup& group);

Result<Message> Decode(std::span<const std::byte> header, std::span<const std::byte> body,
                       const DecodeLimits& limits = {});
Result<Message> Decode(std::string_view header, std::string_view body,
                       const DecodeLimits& limits = {});

}  // namespace hmpmd
