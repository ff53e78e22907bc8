#pragma once
// Parsing the time arguments of the admin commands (`surge dead --since`).
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

// A length of time in seconds: "30d", "12h", "90m", "45s", "2w" or plain seconds; nullopt
// unless positive and finite (`surge prune --older-than`, and the ages above).
std::optional<double> parse_duration(const std::string& text);

// "2026-11-21T06:00:00Z" (whole seconds, UTC).
std::string format_utc(double unix_seconds);

}  // namespace surge::tools
