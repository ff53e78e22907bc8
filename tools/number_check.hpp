#pragma once
// Numeric flag checks that refuse NaN and infinity. CLI11's Range and PositiveNumber let NaN
// through, because every comparison with NaN is false: `--attempt-timeout nan` would fail
// every attempt and `--max-age nan` dead-letter every failing row.
#include <cmath>
#include <sstream>
#include <string>

#include <CLI/CLI.hpp>

#include "tools/time_arg.hpp"

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

// A duration flag held in seconds: takes a unit ("500ms", "45s", "2m", "1h", "14d", "2w") or a
// plain number of seconds, and hands the option its value in seconds, within [min, max]
// seconds. A transform (`->transform(duration_in(...))`), so that it rewrites the text before
// CLI11 converts it; a --config file's values go through it too.
inline CLI::Validator duration_in(double min, double max) {
  std::ostringstream range;
  range << min << " to " << max << " s";
  return CLI::Validator(
      [min, max, text = range.str()](std::string& input) -> std::string {
        const auto seconds = parse_duration(input);
        if (!seconds) {
          return "'" + input +
                 "' is not a duration (seconds, or a number with a unit: 500ms, 45s, 2m, 1h, "
                 "14d, 2w)";
        }
        if (*seconds < min || *seconds > max) return "'" + input + "' is out of range " + text;
        std::ostringstream out;
        out.precision(17);
        out << *seconds;
        input = out.str();
        return {};
      },
      "DURATION in " + range.str());
}

}  // namespace surge::tools
