#include "hmpmd/protocol/cli_checks.h"

#include <charconv>
#include <cmath>
#include <string>

namespace hmpmd {

CLI::Validator WholeRange(int64_t min, int64_t max) {
  CLI::Validator range = CLI::Range(min, max);
  return CLI::Validator(
      [range](std::string& value) mutable {
        int64_t x = 0;
        const char* end = value.data() + value.size();
        const auto [next, ec] = std::from_chars(value.data(), end, x);
        // from_chars stops at a '.', an 'e' or a space: anything left over
        // is not a whole number, as is a value past int64 either way.
        if (value.empty() || next != end ||
            (ec != std::errc() && ec != std::errc::result_out_of_range)) {
          return "Value " + value + " is not a whole number";
        }
        return range(value);
      },
      range.get_description());
}

CLI::Validator FiniteRange(double min, double max) {
  CLI::Validator range = CLI::Range(min, max);
  return CLI::Validator(
      [range](std::string& value) mutable {
        double x = 0;
        if (!CLI::detail::lexical_cast(value, x) || std::isnan(x)) {
          return "Value " + value + " is not a number";
        }
        return range(value);
      },
      range.get_description());
}

}  // namespace hmpmd
