#pragma once
// Numeric flag checks that refuse NaN and infinity. CLI11's Range and PositiveNumber let NaN
// through, because every comparison with NaN is false: `--attempt-timeout nan` would fail
// every attempt and `--max-age nan` dead-letter every failing row.
#include <cmath>
#include <sstream>
#include <string>

#include <CLI/CLI.hpp>

namespace surge::tools {

inline CLI::Validator finite_in(double min, double max) {
  std::ostringstream range;
  range << min << " to " << max;
  return CLI::Validator(
      [min, max, text = range.str()](std::string& input) -> std::string {
        double value = 0;
        if (!CLI::detail::lexical_cast(input, value) || !std::isfinite(value)) {
          return "'" + input + "' is not a number (expected " + text + ")";
        }
        if (value < min || value > max) return "'" + input + "' is out of range " + text;
        return {};
      },
      "NUMBER in " + range.str());
}

}  // namespace surge::tools
