#include "proto/retry_after.hpp"

#include <gtest/gtest.h>

namespace surge::proto {
namespace {

using namespace std::chrono;
using namespace std::chrono_literals;

// The standard calendar is an oracle independent of the parser's own arithmetic.
system_clock::time_point at(int y, unsigned m, unsigned d, int hh = 0, int mm = 0, int ss = 0) {
  const sys_days date{year{y} / month{m} / day{d}};
  return system_clock::time_point(date) + hours(hh) + minutes(mm) + seconds(ss);
}

const auto rfc_example = at(1994, 11, 6, 8, 49, 37);  // Sun, 06 Nov 1994 08:49:37 GMT
constexpr seconds big_cap = hours(24 * 366 * 200);

std::optional<seconds> parse(std::string_view text, system_clock::time_point now,
                             seconds cap = big_cap) {
  return parse_retry_after(text, now, cap);
}

TEST(retry_after, example_date_is_the_known_timestamp) {
  EXPECT_EQ(duration_cast<seconds>(rfc_example.time_since_epoch()).count(), 784111777);
}

TEST(retry_after, delta_seconds) {
  const auto now = at(2024, 5, 1);
  EXPECT_EQ(parse("0", now), 0s);
  EXPECT_EQ(parse("120", now), 120s);
  EXPECT_EQ(parse("007", now), 7s);
  EXPECT_EQ(parse("  120 \t", now), 120s);
  EXPECT_EQ(parse("3600", now, 3600s), 3600s);
  EXPECT_EQ(parse("3601", now, 3600s), 3600s);
  EXPECT_EQ(parse("99999999999999999999999999999999", now, 3600s), 3600s);
  EXPECT_EQ(parse("99999999999999999999999999999999", now, seconds::max()), seconds::max());
  EXPECT_EQ(parse("9223372036854775807", now, seconds::max()), seconds(INT64_MAX));
  EXPECT_EQ(parse("5", now, -10s), 0s);
}

TEST(retry_after, garbage) {
  const auto now = at(2024, 5, 1);
  for (std::string_view bad : {"", "   ", "-1", "+1", "1.5", "12abc", "1 2", "abc", "0x10", "1e3",
                               "\xef\xbc\x91", "Sun", "GMT", "120s"}) {
    EXPECT_FALSE(parse(bad, now).has_value()) << bad;
  }
}

TEST(retry_after, imf_fixdate) {
  EXPECT_EQ(parse("Sun, 06 Nov 1994 08:49:37 GMT", rfc_example - 100s), 100s);
  EXPECT_EQ(parse("  Sun, 06 Nov 1994 08:49:37 GMT ", rfc_example - 1s), 1s);
  EXPECT_EQ(parse("Sun, 06 Nov 1994 08:49:37 GMT", rfc_example), 0s);
  EXPECT_EQ(parse("Sun, 06 Nov 1994 08:49:37 GMT", rfc_example + 1s), 0s);
  EXPECT_EQ(parse("Sun, 06 Nov 1994 08:49:37 GMT", at(2024, 1, 1)), 0s);
  EXPECT_EQ(parse("Sun, 06 Nov 1994 08:49:37 GMT", rfc_example - 2h, 3600s), 3600s);
  // Case is not significant to this parser.
  EXPECT_EQ(parse("sun, 06 NOV 1994 08:49:37 gmt", rfc_example - 5s), 5s);
}

TEST(retry_after, fractional_now_is_never_early) {
  EXPECT_EQ(parse("Sun, 06 Nov 1994 08:49:37 GMT", rfc_example - 99500ms), 100s);
  EXPECT_EQ(parse("Sun, 06 Nov 1994 08:49:37 GMT", rfc_example - 500ms), 1s);
}

TEST(retry_after, every_month_and_leap_days) {
  const char* names[] = {"Jan", "Feb", "Mar", "Apr", "May", "Jun",
                         "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"};
  for (unsigned m = 1; m <= 12; ++m) {
    const std::string text = std::string("Mon, 15 ") + names[m - 1] + " 2030 12:00:00 GMT";
    EXPECT_EQ(parse(text, at(2030, m, 15, 11, 59, 0)), 60s) << text;
  }
  EXPECT_EQ(parse("Tue, 29 Feb 2000 00:00:00 GMT", at(2000, 2, 28)), 86400s);
  EXPECT_EQ(parse("Thu, 29 Feb 2024 00:00:00 GMT", at(2024, 2, 28)), 86400s);
  EXPECT_EQ(parse("Thu, 31 Dec 2099 23:59:59 GMT", at(2099, 12, 31, 23, 59, 0)), 59s);
  EXPECT_EQ(parse("Thu, 31 Dec 2099 23:59:60 GMT", at(2099, 12, 31, 23, 59, 0)), 60s);
}

TEST(retry_after, invalid_dates) {
  const auto now = at(1994, 1, 1);
  for (std::string_view bad : {"Sun, 32 Nov 1994 08:49:37 GMT",
                               "Sun, 31 Nov 1994 08:49:37 GMT",
                               "Sun, 00 Nov 1994 08:49:37 GMT",
                               "Mon, 29 Feb 1993 08:49:37 GMT",
                               "Mon, 29 Feb 1900 08:49:37 GMT",
                               "Sun, 06 Foo 1994 08:49:37 GMT",
                               "Sun, 06 Nov 1994 24:00:00 GMT",
                               "Sun, 06 Nov 1994 08:60:37 GMT",
                               "Sun, 06 Nov 1994 08:49:61 GMT",
                               "Sun, 06 Nov 1994 08:49:37 UTC",
                               "Sun, 06 Nov 1994 08:49:37 GMT junk",
                               "Sun, 06 Nov 1994 08:49:37 GMTX",
                               "Sun, 6 Nov 1994 08:49:37 GMT",
                               "Sun,  06 Nov 1994 08:49:37 GMT",
                               "Sun 06 Nov 1994 08:49:37 GMT",
                               "Sunday, 06 Nov 1994 08:49:37 GMT",
                               "Sun, 06 Nov 94 08:49:37 GMT",
                               "Sun, 06 Nov 1994 8:49:37 GMT",
                               "Sun, 06 Nov 1994 08:49 GMT",
                               "Sun, 06 Nov 1994 08:49:37",
                               "Sun, 06 Nov 1994",
                               "Fun, 06 Nov 1994 08:49:37 GMT",
                               "Sun, 06 Nov 1994 08:49:37 GMT,",
                               "Sun, 06 Nov 1994 08:49:37 +0000",
                               "Sun, -6 Nov 1994 08:49:37 GMT"}) {
    EXPECT_FALSE(parse(bad, now).has_value()) << bad;
  }
}

TEST(retry_after, rfc850) {
  EXPECT_EQ(parse("Sunday, 06-Nov-94 08:49:37 GMT", rfc_example - 100s), 100s);
  EXPECT_EQ(parse("Sunday, 06-Nov-94 08:49:37 GMT", at(2024, 1, 1)), 0s);
  EXPECT_EQ(parse("Wednesday, 06-Nov-30 08:49:37 GMT", at(2030, 11, 6, 8, 49, 0)), 37s);
  for (std::string_view bad :
       {"Sun, 06-Nov-94 08:49:37 GMT", "Sunday, 06-Nov-1994 08:49:37 GMT",
        "Sunday, 06 Nov 94 08:49:37 GMT", "Sunday, 31-Nov-94 08:49:37 GMT",
        "Sunday, 06-Nov-94 08:49:37", "Sunday, 06-Nov-94 08:49:37 GMT x",
        "Sunday, 06-Nov-9 08:49:37 GMT", "Someday, 06-Nov-94 08:49:37 GMT"}) {
    EXPECT_FALSE(parse(bad, rfc_example).has_value()) << bad;
  }
}

TEST(retry_after, rfc850_two_digit_year_rule) {
  const auto now = at(2024, 1, 1, 0, 0, 1);
  // Exactly 50 years ahead minus one second: not more than 50 years in the future, so 2074.
  EXPECT_EQ(parse("Monday, 01-Jan-74 00:00:00 GMT", now),
            duration_cast<seconds>(at(2074, 1, 1) - now));
  // Exactly 50 years ahead is still not more than 50 years.
  EXPECT_EQ(parse("Monday, 01-Jan-74 00:00:01 GMT", now),
            duration_cast<seconds>(at(2074, 1, 1, 0, 0, 1) - now));
  // One second later is more than 50 years ahead: 1974, in the past.
  EXPECT_EQ(parse("Monday, 01-Jan-74 00:00:02 GMT", now), 0s);
  EXPECT_EQ(parse("Monday, 01-Jan-99 00:00:00 GMT", now), 0s);  // 1999
  EXPECT_EQ(parse("Monday, 01-Jan-25 00:00:00 GMT", now),
            duration_cast<seconds>(at(2025, 1, 1) - now));
  // Near the end of a century the next century's year is the nearer one.
  const auto late = at(2099, 6, 1);
  EXPECT_EQ(parse("Saturday, 01-Jan-01 00:00:00 GMT", late),
            duration_cast<seconds>(at(2101, 1, 1) - late));
  // Feb 29 exists in 2000 but not in 2100: the valid candidate is taken.
  EXPECT_EQ(parse("Tuesday, 29-Feb-00 00:00:00 GMT", at(2080, 1, 1)), 0s);
  EXPECT_FALSE(parse("Tuesday, 29-Feb-01 00:00:00 GMT", at(2080, 1, 1)).has_value());
}

TEST(retry_after, asctime) {
  EXPECT_EQ(parse("Sun Nov  6 08:49:37 1994", rfc_example - 100s), 100s);
  EXPECT_EQ(parse("Sun Nov 06 08:49:37 1994", rfc_example - 100s), 100s);
  EXPECT_EQ(parse("Wed Nov 16 08:49:37 1994", at(1994, 11, 16, 8, 49, 0)), 37s);
  EXPECT_EQ(parse("Sun Nov  6 08:49:37 1994", at(2024, 1, 1)), 0s);
  for (std::string_view bad :
       {"Sun Nov 6 08:49:37 1994", "Sun Nov   6 08:49:37 1994", "Sun Nov  6 08:49:37 94",
        "Sun Nov  6 08:49:37 1994 GMT", "Sun, Nov  6 08:49:37 1994", "Sunday Nov  6 08:49:37 1994",
        "Sun Nov 31 08:49:37 1994", "Sun Nov  6 08:49:37", "Sun Nov  6 25:49:37 1994"}) {
    EXPECT_FALSE(parse(bad, rfc_example).has_value()) << bad;
  }
}

}  // namespace
}  // namespace surge::proto
