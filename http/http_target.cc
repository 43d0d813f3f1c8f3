#include "hmpmd/http/http_target.h"

#include <algorithm>
#include <cctype>
#include <vector>

namespace hmpmd {
namespace {

int HexDigit(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

// RFC 3986: scheme = ALPHA *( ALPHA / DIGIT / "+" / "-" / "." ).
bool IsScheme(std::string_view s) {
  if (s.empty() || !std::isalpha(static_cast<unsigned char>(s.front()))) return false;
  for (char c : s) {
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '+' && c != '-' && c != '.') {
      return false;
    }
  }
  return true;
}

std::string Lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

// RFC 3986 §5.2.4, on a decoded path: "." segments go, ".." takes the
// segment before it with it (never above the root), so
// "/api/v1/jobs/../pool" is "/api/v1/pool" as a browser or curl sends it.
std::string RemoveDotSegments(std::string_view path) {
  std::vector<std::string_view> kept;
  bool ends_dir = false;  // "/a/." and "/a/.." name a directory: "/a/", "/"
  size_t start = 1;       // after the leading '/'
  while (start <= path.size()) {
    const size_t end = std::min(path.find('/', start), path.size());
    const std::string_view segment = path.substr(start, end - start);
    ends_dir = false;
    if (segment == "..") {
      if (!kept.empty()) kept.pop_back();
      ends_dir = true;
    } else if (segment == ".") {
      ends_dir = true;
    } else if (end < path.size() || !segment.empty()) {
      kept.push_back(segment);
    } else {
      ends_dir = true;  // a trailing '/'
    }
    start = end + 1;
  }
  std::string out;
  for (std::string_view s : kept) {
    out += '/';
    out += s;
  }
  if (out.empty() || ends_dir) out += '/';
  return out;
}

}  // namespace

std::string ShownInError(std::string_view text) {
  std::string shown;
  for (char c : text.substr(0, 64)) {
    const auto u = static_cast<unsigned char>(c);
    shown += u >= 0x20 && u < 0x7f ? c : '?';
  }
  return text.size() > 64 ? shown + "..." : shown;
}

Result<std::string> PercentDecode(std::string_view text, bool plus_is_space) {
  std::string out;
  out.reserve(text.size());
  for (size_t i = 0; i < text.size(); ++i) {
    if (text[i] == '+' && plus_is_space) {
      out += ' ';
    } else if (text[i] != '%') {
      out += text[i];
    } else {
      const int hi = i + 2 < text.size() ? HexDigit(text[i + 1]) : -1;
      const int lo = hi >= 0 ? HexDigit(text[i + 2]) : -1;
      if (lo < 0) {
        return Status::InvalidArgument("bad percent-encoding '" + ShownInError(text.substr(i, 3)) +
                                       "'");
      }
      out += static_cast<char>(hi * 16 + lo);
      i += 2;
    }
  }
  return out;
}

Result<HttpTarget> ParseHttpTarget(std::string_view target) {
  auto bad = [&](const std::string& why) {
    return Status::InvalidArgument("request target '" + ShownInError(target) + "': " + why);
  };
  if (target == "*") return HttpTarget{"*", "*", ""};
  std::string_view origin = target.substr(0, target.find('#'));
  if (!origin.starts_with('/')) {
    const size_t sep = origin.find("://");
    if (sep == std::string_view::npos || !IsScheme(origin.substr(0, sep))) {
      return bad("expected a path starting with '/' or an http:// URL");
    }
    const std::string scheme = Lower(origin.substr(0, sep));
    if (scheme != "http" && scheme != "https") {
      return bad("scheme '" + ShownInError(scheme) + "' is not http or https");
    }
    origin.remove_prefix(sep + 3);
    const size_t path_start = std::min(origin.find_first_of("/?"), origin.size());
    if (path_start == 0) return bad("no host");
    origin.remove_prefix(path_start);
  }
  HttpTarget out;
  out.origin = origin.starts_with('/') ? std::string(origin) : "/" + std::string(origin);
  const size_t q = out.origin.find('?');
  const std::string_view raw_path = std::string_view(out.origin).substr(0, q);
  if (q != std::string::npos) out.query = out.origin.substr(q + 1);
  auto path = PercentDecode(raw_path, /*plus_is_space=*/false);
  if (!path.ok()) return bad(path.status().message() + " in the path");
  // Checked on the escapes, not the bytes: a raw '/' is a separator, an
  // encoded one would make a segment that routing would split anew.
  for (size_t i = 0; i + 2 < raw_path.size(); ++i) {
    if (raw_path[i] != '%') continue;
    const auto byte =
        static_cast<unsigned char>(HexDigit(raw_path[i + 1]) * 16 + HexDigit(raw_path[i + 2]));
    const std::string escape = ShownInError(raw_path.substr(i, 3));
    if (byte == '/') return bad("the path has an encoded '/' (" + escape + ")");
    if (byte < 0x20 || byte == 0x7f) {
      return bad("the path has an encoded control character (" + escape + ")");
    }
    i += 2;
  }
  out.path = RemoveDotSegments(*path);
  return out;
}

}  // namespace hmpmd
