#include "tools/time_arg.hpp"

#include <chrono>
#include <cmath>
#include <cstdio>
#include <map>
#include <regex>

namespace surge::tools {
namespace {

std::optional<double> to_number(const std::string& text) {
  try {
    std::size_t used = 0;
    const double value = std::stod(text, &used);
    if (used != text.size() || !std::isfinite(value)) return std::nullopt;
    return value;
  } catch (const std::exception&) {
    return std::nullopt;
  }
}

std::optional<double> parse_relative(const std::smatch& m, double now) {
  const auto age = parse_duration(m[1].str() + m[2].str());
  if (!age) return std::nullopt;
  return now - *age;
}

std::optional<double> parse_iso(const std::smatch& m) {
  using namespace std::chrono;
  const year_month_day date{year{std::stoi(m[1].str())},
                            month{static_cast<unsigned>(std::stoi(m[2].str()))},
                            day{static_cast<unsigned>(std::stoi(m[3].str()))}};
  if (!date.ok()) return std::nullopt;
  double seconds = static_cast<double>(sys_seconds{sys_days{date}}.time_since_epoch().count());
  if (!m[4].matched) return seconds;  // a date alone: midnight UTC
  const int hour = std::stoi(m[4].str());
  const int minute = std::stoi(m[5].str());
  const int second = m[6].matched ? std::stoi(m[6].str()) : 0;
  if (hour > 23 || minute > 59 || second > 59) return std::nullopt;
  seconds += hour * 3600 + minute * 60 + second;
  if (m[7].matched) seconds += std::stod("0" + m[7].str());
  const std::string zone = m[8].str();
  if (zone != "Z" && zone != "z") {
    // "+HH:MM" or "+HHMM": local time = UTC + offset.
    const int offset_hours = std::stoi(zone.substr(1, 2));
    const int offset_minutes = std::stoi(zone.substr(zone.size() - 2));
    if (offset_hours > 23 || offset_minutes > 59) return std::nullopt;
    const int sign = zone[0] == '-' ? -1 : 1;
    seconds -= sign * (offset_hours * 3600 + offset_minutes * 60);
  }
  return seconds;
}

}  // namespace

std::optional<double> parse_duration(std::string_view text) {
  // The number: digits with an optional fraction; no sign, exponent, hex, "nan" or "inf".
  static const std::regex form(R"((\d+(?:\.\d*)?|\.\d+)(ms|s|m|h|d|w)?)");
  const std::string value(text);
  std::smatch m;
  if (!std::regex_match(value, m, form)) return std::nullopt;
  const auto number = to_number(m[1].str());
  if (!number) return std::nullopt;
  static const std::map<std::string, double> seconds_per{
      {"", 1}, {"s", 1}, {"m", 60}, {"h", 3600}, {"d", 86400}, {"w", 7 * 86400}};
  // Milliseconds divide, so that "5ms" is exactly the double 0.005.
  const double seconds =
      m[2].str() == "ms" ? *number / 1000.0 : *number * seconds_per.at(m[2].str());
  if (!std::isfinite(seconds)) return std::nullopt;
  return seconds;
}

std::optional<double> parse_time_arg(std::string_view text, double now) {
  static const std::regex unix_seconds(R"(\d+(\.\d+)?)");
  static const std::regex relative(R"(-(\d+(?:\.\d+)?)([smhd]))");
  static const std::regex iso(
      R"((\d{4})-(\d{2})-(\d{2})(?:[Tt ](\d{2}):(\d{2})(?::(\d{2})(\.\d+)?)?(Z|z|[+-]\d{2}:?\d{2}))?)");
  const std::string value(text);
  std::smatch m;
  if (std::regex_match(value, m, unix_seconds)) return to_number(value);
  if (std::regex_match(value, m, relative)) return parse_relative(m, now);
  if (std::regex_match(value, m, iso)) return parse_iso(m);
  return std::nullopt;
}

std::string format_utc(double unix_seconds) {
  using namespace std::chrono;
  const sys_seconds at{seconds{static_cast<long long>(std::floor(unix_seconds))}};
  const auto day_start = floor<days>(at);
  const year_month_day date{day_start};
  const hh_mm_ss time{at - day_start};
  char out[32];
  std::snprintf(out, sizeof out, "%04d-%02u-%02uT%02d:%02d:%02dZ", static_cast<int>(date.year()),
                static_cast<unsigned>(date.month()), static_cast<unsigned>(date.day()),
                static_cast<int>(time.hours().count()), static_cast<int>(time.minutes().count()),
                static_cast<int>(time.seconds().count()));
  return out;
}

}  // namespace surge::tools
