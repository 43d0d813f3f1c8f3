// Checks for number flags shared by the hmpmd and hmpmd-worker command lines
// (CLI::Option::check). CLI::Range alone answers a word with "Value abc not
// in range", and lets NaN through; these say what kind of number was wanted.
// Not installed: only our binaries link CLI11.
#pragma once

#include <CLI/CLI.hpp>
#include <cstdint>

namespace hmpmd {

// A whole number in [min, max]: "Value abc is not a whole number", then
// CLI::Range's "Value 0 not in range 1 to 100".
CLI::Validator WholeRange(int64_t min, int64_t max);

// A number in [min, max], NaN refused: "Value abc is not a number".
CLI::Validator FiniteRange(double min, double max);

}  // namespace hmpmd
