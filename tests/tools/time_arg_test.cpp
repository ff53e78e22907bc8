#include "tools/time_arg.hpp"

#include <gtest/gtest.h>

namespace surge::tools {
namespace {

constexpr double now = 1'795'240'800;  // 2026-11-21T06:00:00Z

TEST(TimeArg, UnixSeconds) {
  EXPECT_EQ(parse_time_arg("1795240800", now), 1795240800.0);
  EXPECT_EQ(parse_time_arg("1795240800.25", now), 1795240800.25);
  EXPECT_EQ(parse_time_arg("0", now), 0.0);
}

TEST(TimeArg, Iso8601WithAZone) {
  EXPECT_EQ(parse_time_arg("2026-11-21T06:00:00Z", now), now);
  EXPECT_EQ(parse_time_arg("2026-11-21t06:00:00z", now), now);
  EXPECT_EQ(parse_time_arg("2026-11-21 06:00Z", now), now);
  EXPECT_EQ(parse_time_arg("2026-11-21T06:00:00.5Z", now), now + 0.5);
  EXPECT_EQ(parse_time_arg("2026-11-21T07:30:00+01:30", now), now);
  EXPECT_EQ(parse_time_arg("2026-11-21T01:00:00-0500", now), now);
  EXPECT_EQ(parse_time_arg("2026-11-21", now), now - 6 * 3600);
  EXPECT_EQ(parse_time_arg("1970-01-01T00:00:00Z", now), 0.0);
  EXPECT_EQ(parse_time_arg("2024-02-29T00:00:00Z", now), 1709164800.0);
}

TEST(TimeArg, AgesBeforeNow) {
  EXPECT_EQ(parse_time_arg("-45s", now), now - 45);
  EXPECT_EQ(parse_time_arg("-30m", now), now - 1800);
  EXPECT_EQ(parse_time_arg("-2h", now), now - 7200);
  EXPECT_EQ(parse_time_arg("-1d", now), now - 86400);
  EXPECT_EQ(parse_time_arg("-1.5h", now), now - 5400);
}

TEST(TimeArg, EverythingElseIsRefused) {
  for (const char* bad : {"", "yesterday", "-2", "2h", "-h", "-2x", "2026-11-21T06:00:00",
                          "2026-13-01", "2026-02-30", "2026-11-21T24:00:00Z", "2026-11-21T06:60Z",
                          "2026-11-21T06:00:00+25:00", " 1795240800", "1e9", "-2h ago"}) {
    EXPECT_FALSE(parse_time_arg(bad, now).has_value()) << "'" << bad << "'";
  }
}

// Every duration flag's one parser: a unit, or a plain number of seconds.
TEST(TimeArg, DurationsTakeAUnitOrArePlainSeconds) {
  EXPECT_EQ(parse_duration("60"), 60.0);
  EXPECT_EQ(parse_duration("1.5"), 1.5);
  EXPECT_EQ(parse_duration("0"), 0.0);
  EXPECT_EQ(parse_duration("5ms"), 0.005);
  EXPECT_EQ(parse_duration("45s"), 45.0);
  EXPECT_EQ(parse_duration("2m"), 120.0);
  EXPECT_EQ(parse_duration("1.5h"), 5400.0);
  EXPECT_EQ(parse_duration("14d"), 14 * 86400.0);
  EXPECT_EQ(parse_duration("2w"), 14 * 86400.0);
  for (const char* bad : {"", "s", "ms", "-1", "-1s", "+1s", "1e3", "5 s", " 5s", "5x", "5sec",
                          "nan", "inf", "0x10", "1.2.3s", "5M"}) {
    EXPECT_FALSE(parse_duration(bad).has_value()) << bad;
  }
}

TEST(TimeArg, FormatsUtc) {
  EXPECT_EQ(format_utc(now), "2026-11-21T06:00:00Z");
  EXPECT_EQ(format_utc(now + 0.9), "2026-11-21T06:00:00Z");
  EXPECT_EQ(format_utc(0), "1970-01-01T00:00:00Z");
  EXPECT_EQ(parse_time_arg(format_utc(now - 12345), now), now - 12345);
}

}  // namespace
}  // namespace surge::tools
