// Text from elsewhere (a kernel's error, a spec's id) made safe to print on
// one line of a terminal or a log.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace hmpmd {

// The UTF-8 character at text[i]: sets *cp to its code point and returns
// its length in bytes; a byte that does not start a valid sequence counts
// as one character of length 1 (*cp = the byte).
size_t DecodeUtf8(std::string_view text, size_t i, uint32_t* cp);

// `text` with control characters written as \n, \r, \t or \xHH (C1
// controls and U+2028, U+2029 as \uHHHH), and bytes that are not UTF-8
// as \xHH. With `max_bytes`, text beyond that many
// bytes (cut at a character boundary) is left out and said so:
// "... (1234 more bytes)".
std::string OneLine(std::string_view text, size_t max_bytes = SIZE_MAX);

}  // namespace hmpmd
