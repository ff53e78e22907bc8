#pragma once
// Parsing the time arguments of every command: durations (`drain --lease 2m`, `prune
// --older-than 14d`) and points in time (`surge dead --since`).
#include <optional>
#include <string>
#include <string_view>

namespace surge::tools {

// A point in time as Unix seconds, from: Unix seconds ("1795240800", fractions allowed); an
// ISO-8601 time with a zone ("2026-11-21T06:00:00Z", "...+01:00", optional fraction) or a date
// alone ("2026-11-21", midnight UTC); or an age before `now` ("-45s", "-30m", "-2h", "-1d").
// nullopt for anything else, a time without a zone included: guessing local time would select
// the wrong rows silently.
std::optional<double> parse_time_arg(std::string_view text, double now);

// A length of time in seconds: a number with a unit, "250ms", "45s", "90m", "12h", "30d", "2w",
// or a plain number, which is seconds ("1.5"); fractions allowed ("1.5h"). nullopt for anything
// else, and unless finite and at least 0. The one parser of every duration flag
// (tools/number_check.hpp's duration_in) and of the ages above.
std::optional<double> parse_duration(std::string_view text);

// "2026-11-21T06:00:00Z" (whole seconds, UTC).
std::string format_utc(double unix_seconds);

}  // namespace surge::tools
