#include "hmpmd/protocol/one_line.h"

#include <algorithm>
#include <cstdio>

namespace hmpmd {

size_t DecodeUtf8(std::string_view text, size_t i, uint32_t* cp) {
  const auto b0 = static_cast<unsigned char>(text[i]);
  size_t len = 0;  // from the lead byte's high bits: 0, 110, 1110 or 11110
  if (b0 < 0x80) {
    len = 1;
  } else if ((b0 >> 5) == 0x6) {
    len = 2;
  } else if ((b0 >> 4) == 0xe) {
    len = 3;
  } else if ((b0 >> 3) == 0x1e) {
    len = 4;
  }
  if (len == 0 || i + len > text.size()) {
    *cp = b0;
    return 1;
  }
  uint32_t v = len == 1 ? b0 : b0 & (0x7f >> len);
  for (size_t k = 1; k < len; ++k) {
    const auto b = static_cast<unsigned char>(text[i + k]);
    if ((b & 0xc0) != 0x80) {
      *cp = b0;
      return 1;
    }
    v = (v << 6) | (b & 0x3f);
  }
  *cp = v;
  return len;
}

std::string OneLine(std::string_view text, size_t max_bytes) {
  std::string out;
  out.reserve(std::min(text.size(), max_bytes));
  size_t i = 0;
  while (i < text.size()) {
    const auto c = static_cast<unsigned char>(text[i]);
    uint32_t cp = 0;
    const size_t len = DecodeUtf8(text, i, &cp);
    if (i + len > max_bytes) break;
    if (c == '\n') {
      out += "\\n";
    } else if (c == '\r') {
      out += "\\r";
    } else if (c == '\t') {
      out += "\\t";
    } else if (c < 0x20 || c == 0x7f || (len == 1 && c >= 0x80)) {
      // Control characters, and bytes that are not UTF-8 (a terminal
      // would show garbage or swallow what follows).
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\x%02x", c);
      out += buf;
    } else if ((cp >= 0x80 && cp <= 0x9f) || cp == 0x2028 || cp == 0x2029) {
      // C1 controls (U+009B starts a terminal escape sequence, as ESC [
      // does) and the line and paragraph separators, which break a line.
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\u%04x", static_cast<unsigned>(cp));
      out += buf;
    } else {
      out.append(text, i, len);
    }
    i += len;
  }
  if (i < text.size()) out += "... (" + std::to_string(text.size() - i) + " more bytes)";
  return out;
}

}  // namespace hmpmd
