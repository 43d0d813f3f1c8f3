#include "hmpmd/protocol/strict_json.h"

#include <algorithm>
#include <string>
#include <unordered_set>
#include <utility>
#include <vector>

namespace hmpmd {
namespace {

using json = nlohmann::ordered_json;
using DomParser = nlohmann::detail::json_sax_dom_parser<json>;

// "line 3, column 7" of byte `offset` of `text` (both counted from 1).
std::string LineColumn(std::string_view text, size_t offset) {
  const std::string_view before = text.substr(0, std::min(offset, text.size()));
  const size_t line = 1 + static_cast<size_t>(std::count(before.begin(), before.end(), '\n'));
  const size_t line_start = before.rfind('\n');
  const size_t column =
      before.size() - (line_start == std::string_view::npos ? 0 : line_start + 1) + 1;
  return "line " + std::to_string(line) + ", column " + std::to_string(column);
}

// The DOM parser of nlohmann, plus a record of the keys of every open
// object and the place (object key or array index) of every open value.
// Its methods shadow the base's: json::sax_parse is a template on the
// handler type, so no virtual call is needed.
class StrictSax : public DomParser {
 public:
  StrictSax(json& out, std::string_view text)
      : DomParser(out, /*allow_exceptions=*/true), text_(text) {}

  // nlohmann's errors carry their place, except a number too large for a
  // double ("number overflow parsing '1e400'"): that one is given here.
  template <typename Exception>
  bool parse_error(std::size_t position, const std::string& token, const Exception& ex) {
    if (ex.id != 406) return DomParser::parse_error(position, token, ex);
    std::string what = ex.what();
    const size_t cut = what.find("] ");
    if (cut != std::string::npos) what = what.substr(cut + 2);
    // `position` counts the bytes read, the number included.
    const size_t start = position >= token.size() ? position - token.size() : 0;
    error_ = "invalid JSON: " + what + " at " + LineColumn(text_, start);
    return false;
  }

  bool null() { return Value() && DomParser::null(); }
  bool boolean(bool v) { return Value() && DomParser::boolean(v); }
  bool number_integer(number_integer_t v) { return Value() && DomParser::number_integer(v); }
  bool number_unsigned(number_unsigned_t v) { return Value() && DomParser::number_unsigned(v); }
  bool number_float(number_float_t v, const string_t& s) {
    return Value() && DomParser::number_float(v, s);
  }
  bool string(string_t& v) { return Value() && DomParser::string(v); }
  bool binary(binary_t& v) { return Value() && DomParser::binary(v); }
  bool start_object(std::size_t n) {
    Value();
    levels_.push_back({false, 0, {}, {}, {}});
    return DomParser::start_object(n);
  }
  bool key(string_t& k) {
    Level& l = levels_.back();
    // A linear scan while the object is small (the usual case), a set after.
    bool twice = false;
    if (l.set.empty() && l.keys.size() < 16) {
      for (const std::string& seen : l.keys) twice = twice || seen == k;
      if (!twice) l.keys.push_back(k);
    } else {
      if (l.set.empty()) l.set.insert(l.keys.begin(), l.keys.end());
      twice = !l.set.insert(k).second;
    }
    if (twice) {
      const std::string where = Path();
      error_ = (where.empty() ? "" : where + ": ") + "field '" + k + "' given twice";
      return false;
    }
    l.key = k;
    return DomParser::key(k);
  }
  bool end_object() {
    levels_.pop_back();
    return DomParser::end_object();
  }
  bool start_array(std::size_t n) {
    Value();
    levels_.push_back({true, 0, {}, {}, {}});
    return DomParser::start_array(n);
  }
  bool end_array() {
    levels_.pop_back();
    return DomParser::end_array();
  }

  const std::string& error() const { return error_; }

 private:
  struct Level {
    bool array;
    size_t next;      // arrays: index of the next element
    std::string key;  // objects: the key of the current member
    std::vector<std::string> keys;
    std::unordered_set<std::string> set;
  };

  // Called at the start of every value: counts array elements.
  bool Value() {
    if (!levels_.empty() && levels_.back().array)
      levels_.back().key = std::to_string(levels_.back().next++);
    return true;
  }
  // "tasks[2].args": where the current object sits.
  std::string Path() const {
    std::string out;
    for (size_t i = 0; i + 1 < levels_.size(); ++i) {
      const Level& l = levels_[i];
      if (l.array)
        out += "[" + l.key + "]";
      else
        out += (out.empty() ? "" : ".") + l.key;
    }
    return out;
  }

  std::string_view text_;
  std::vector<Level> levels_;
  std::string error_;
};

}  // namespace

Result<json> ParseStrictJson(std::string_view text) {
  if (text.find_first_not_of(" \t\r\n") == std::string_view::npos) {
    return Status::InvalidArgument("invalid JSON: the text is empty");
  }
  // nlohmann's lexer takes a NUL byte for the end of the input, so
  // `{...}<NUL>anything` would parse as `{...}`. JSON has no NUL outside a
  // string, and inside one it must be escaped: the byte is an error.
  if (const size_t nul = text.find('\0'); nul != std::string_view::npos) {
    return Status::InvalidArgument("invalid JSON: a NUL byte at " + LineColumn(text, nul));
  }
  json root;
  try {
    StrictSax sax(root, text);
    if (!json::sax_parse(text, &sax)) return Status::InvalidArgument(sax.error());
  } catch (const json::exception& e) {
    std::string what = e.what();
    auto pos = what.find("] ");  // drop nlohmann's "[json.exception.parse_error.101] "
    return Status::InvalidArgument("invalid JSON: " +
                                   (pos == std::string::npos ? what : what.substr(pos + 2)));
  }
  return root;
}

}  // namespace hmpmd
