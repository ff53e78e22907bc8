#include "proto/retry_after.hpp"

#include <array>
#include <cstdint>

namespace surge::proto {
namespace {

using std::int64_t;

constexpr std::array<std::string_view, 7> short_days = {"Mon", "Tue", "Wed", "Thu",
                                                        "Fri", "Sat", "Sun"};
constexpr std::array<std::string_view, 7> long_days = {
    "Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday"};
constexpr std::array<std::string_view, 12> months = {"Jan", "Feb", "Mar", "Apr", "May", "Jun",
                                                     "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"};

// Howard Hinnant's days_from_civil: proleptic Gregorian, no time zone database, no libc state.
constexpr int64_t days_from_civil(int64_t y, int64_t m, int64_t d) {
  y -= m <= 2;
  const int64_t era = (y >= 0 ? y : y - 399) / 400;
  const int64_t yoe = y - era * 400;
  const int64_t doy = (153 * (m + (m > 2 ? -3 : 9)) + 2) / 5 + d - 1;
  const int64_t doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
  return era * 146097 + doe - 719468;
}

struct civil_date {
  int64_t year;
  int64_t month;
  int64_t day;
};

constexpr civil_date civil_from_days(int64_t z) {
  z += 719468;
  const int64_t era = (z >= 0 ? z : z - 146096) / 146097;
  const int64_t doe = z - era * 146097;
  const int64_t yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
  const int64_t doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
  const int64_t mp = (5 * doy + 2) / 153;
  const int64_t d = doy - (153 * mp + 2) / 5 + 1;
  const int64_t m = mp < 10 ? mp + 3 : mp - 9;
  return {yoe + era * 400 + (m <= 2), m, d};
}

constexpr bool is_leap(int64_t y) { return (y % 4 == 0 && y % 100 != 0) || y % 400 == 0; }

constexpr int64_t days_in_month(int64_t y, int64_t m) {
  constexpr std::array<int64_t, 12> lengths = {31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
  return m == 2 && is_leap(y) ? 29 : lengths[static_cast<std::size_t>(m - 1)];
}

constexpr int64_t floor_div(int64_t a, int64_t b) { return a / b - (a % b != 0 && (a < 0)); }

bool is_digit(char c) { return c >= '0' && c <= '9'; }

char lower(char c) { return c >= 'A' && c <= 'Z' ? static_cast<char>(c - 'A' + 'a') : c; }

bool same_ignoring_case(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  for (std::size_t i = 0; i < a.size(); ++i) {
    if (lower(a[i]) != lower(b[i])) return false;
  }
  return true;
}

// Consumes the grammar pieces of an HTTP-date from the front of the text.
class cursor {
 public:
  explicit cursor(std::string_view text) : rest_(text) {}

  bool done() const { return rest_.empty(); }

  bool literal(std::string_view expected) {
    if (!same_ignoring_case(rest_.substr(0, expected.size()), expected)) return false;
    rest_.remove_prefix(expected.size());
    return true;
  }

  // Exactly `count` digits.
  bool number(std::size_t count, int64_t& out) {
    if (rest_.size() < count) return false;
    out = 0;
    for (std::size_t i = 0; i < count; ++i) {
      if (!is_digit(rest_[i])) return false;
      out = out * 10 + (rest_[i] - '0');
    }
    rest_.remove_prefix(count);
    return true;
  }

  // asctime's day of month: two digits or a space and one digit.
  bool padded_day(int64_t& out) {
    if (rest_.starts_with(' ')) {
      rest_.remove_prefix(1);
      return number(1, out);
    }
    return number(2, out);
  }

  template <std::size_t N>
  bool one_of(const std::array<std::string_view, N>& names, int64_t& index) {
    for (std::size_t i = 0; i < N; ++i) {
      if (literal(names[i])) {
        index = static_cast<int64_t>(i);
        return true;
      }
    }
    return false;
  }

  bool month(int64_t& out) {
    int64_t index = 0;
    if (!one_of(months, index)) return false;
    out = index + 1;
    return true;
  }

  bool time_of_day(int64_t& h, int64_t& m, int64_t& s) {
    return number(2, h) && literal(":") && number(2, m) && literal(":") && number(2, s);
  }

 private:
  std::string_view rest_;
};

struct date_time {
  int64_t year = 0, month = 0, day = 0, hour = 0, minute = 0, second = 0;

  bool valid() const {
    // Second 60 is a leap second, which the grammar allows.
    return month >= 1 && month <= 12 && day >= 1 && day <= days_in_month(year, month) &&
           hour <= 23 && minute <= 59 && second <= 60;
  }
  int64_t unix_seconds() const {
    return days_from_civil(year, month, day) * 86400 + hour * 3600 + minute * 60 + second;
  }
};

std::optional<date_time> parse_imf_fixdate(std::string_view text) {
  cursor c(text);
  date_time t;
  int64_t weekday = 0;
  if (c.one_of(short_days, weekday) && c.literal(", ") && c.number(2, t.day) && c.literal(" ") &&
      c.month(t.month) && c.literal(" ") && c.number(4, t.year) && c.literal(" ") &&
      c.time_of_day(t.hour, t.minute, t.second) && c.literal(" GMT") && c.done()) {
    return t;
  }
  return std::nullopt;
}

std::optional<date_time> parse_asctime(std::string_view text) {
  cursor c(text);
  date_time t;
  int64_t weekday = 0;
  if (c.one_of(short_days, weekday) && c.literal(" ") && c.month(t.month) && c.literal(" ") &&
      c.padded_day(t.day) && c.literal(" ") && c.time_of_day(t.hour, t.minute, t.second) &&
      c.literal(" ") && c.number(4, t.year) && c.done()) {
    return t;
  }
  return std::nullopt;
}

// RFC 9110 section 5.6.7: a two-digit year more than 50 years in the future means the most
// recent past year with those digits.
std::optional<date_time> parse_rfc850(std::string_view text, int64_t now_seconds) {
  cursor c(text);
  date_time t;
  int64_t weekday = 0;
  int64_t two_digit_year = 0;
  if (!(c.one_of(long_days, weekday) && c.literal(", ") && c.number(2, t.day) && c.literal("-") &&
        c.month(t.month) && c.literal("-") && c.number(2, two_digit_year) && c.literal(" ") &&
        c.time_of_day(t.hour, t.minute, t.second) && c.literal(" GMT") && c.done())) {
    return std::nullopt;
  }
  const int64_t now_days = floor_div(now_seconds, 86400);
  const civil_date today = civil_from_days(now_days);
  const int64_t limit = days_from_civil(today.year + 50, today.month, today.day) * 86400 +
                        (now_seconds - now_days * 86400);
  t.year = floor_div(today.year, 100) * 100 + two_digit_year;
  // Feb 29 does not exist in every candidate century, so validity is checked per candidate.
  date_time later = t;
  later.year += 100;
  if (later.valid() && later.unix_seconds() <= limit) return later;
  if (t.valid() && t.unix_seconds() <= limit) return t;
  t.year -= 100;
  return t;
}

std::string_view trim(std::string_view text) {
  constexpr std::string_view space = " \t\r\n";
  const std::size_t first = text.find_first_not_of(space);
  if (first == std::string_view::npos) return {};
  return text.substr(first, text.find_last_not_of(space) - first + 1);
}

std::optional<std::chrono::seconds> parse_delta_seconds(std::string_view text, int64_t cap) {
  int64_t value = 0;
  for (char ch : text) {
    if (!is_digit(ch)) return std::nullopt;
    // Saturate instead of overflowing: anything past the cap means the cap.
    if (value <= cap) {
      value = value > (INT64_MAX - 9) / 10 ? INT64_MAX : value * 10 + (ch - '0');
    }
  }
  return std::chrono::seconds(value < cap ? value : cap);
}

}  // namespace

std::optional<std::chrono::seconds> parse_retry_after(std::string_view value,
                                                      std::chrono::system_clock::time_point now,
                                                      std::chrono::seconds cap) {
  const int64_t cap_seconds = cap.count() > 0 ? static_cast<int64_t>(cap.count()) : 0;
  const std::string_view text = trim(value);
  if (text.empty()) return std::nullopt;
  if (is_digit(text.front())) return parse_delta_seconds(text, cap_seconds);

  const int64_t now_seconds =
      std::chrono::floor<std::chrono::seconds>(now.time_since_epoch()).count();
  std::optional<date_time> date = parse_imf_fixdate(text);
  if (!date) date = parse_rfc850(text, now_seconds);
  if (!date) date = parse_asctime(text);
  if (!date || !date->valid()) return std::nullopt;

  // Measured from the start of the current second so that a sender is never early.
  const int64_t delay = date->unix_seconds() - now_seconds;
  if (delay <= 0) return std::chrono::seconds(0);
  return std::chrono::seconds(delay < cap_seconds ? delay : cap_seconds);
}

}  // namespace surge::proto
