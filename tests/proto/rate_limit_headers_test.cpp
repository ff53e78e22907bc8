#include "proto/rate_limit_headers.hpp"

#include <cmath>
#include <initializer_list>
#include <limits>
#include <string>
#include <utility>

#include <gtest/gtest.h>

#include "proto/announced_pace.hpp"

namespace surge::proto {
namespace {

using namespace std::chrono;
using namespace std::chrono_literals;

using header = std::pair<std::string_view, std::string_view>;

const system_clock::time_point now = system_clock::time_point(seconds(1'700'000'000));

std::optional<announced_quota> parse(std::initializer_list<header> headers,
                                     system_clock::time_point at = now,
                                     quota_parse_options options = {}) {
  quota_fields fields;
  for (const auto& [name, value] : headers) {
    fields.add(name, value);
  }
  return parse_announced_quota(fields, at, options);
}

// The fields of the quota compared one by one, so a failure names the one that differs.
void expect_quota(const std::optional<announced_quota>& quota, quota_form form,
                  std::uint64_t remaining, seconds reset_after,
                  std::optional<std::uint64_t> limit = std::nullopt,
                  std::optional<seconds> window = std::nullopt) {
  ASSERT_TRUE(quota.has_value());
  EXPECT_EQ(quota->form, form);
  EXPECT_EQ(quota->remaining, remaining);
  EXPECT_EQ(quota->reset_after, reset_after);
  EXPECT_EQ(quota->reset_at, now + reset_after);
  EXPECT_EQ(quota->limit, limit);
  EXPECT_EQ(quota->window, window);
}

// ---- Collecting the fields ----------------------------------------------------------------------

TEST(RateLimitQuotaFields, NamesAreComparedWithoutRegardToCase) {
  quota_fields fields;
  EXPECT_TRUE(fields.add("RateLimit-Policy", "a"));
  EXPECT_TRUE(fields.add("ratelimit", "b"));
  EXPECT_TRUE(fields.add("RATELIMIT", "c"));
  EXPECT_TRUE(fields.add("X-RateLimit-Limit", "1"));
  EXPECT_TRUE(fields.add("x-ratelimit-remaining", "2"));
  EXPECT_TRUE(fields.add("X-RATELIMIT-RESET", "3"));
  // Older drafts' names and near misses are not quota fields here.
  EXPECT_FALSE(fields.add("RateLimit-Limit", "9"));
  EXPECT_FALSE(fields.add("RateLimit-Remaining", "9"));
  EXPECT_FALSE(fields.add("X-RateLimit", "9"));
  EXPECT_FALSE(fields.add("RateLimit-Policies", "9"));
  EXPECT_FALSE(fields.add("Retry-After", "9"));

  ASSERT_EQ(fields.lines(quota_field::ratelimit).size(), 2u);
  EXPECT_EQ(fields.lines(quota_field::ratelimit)[0], "b");
  EXPECT_EQ(fields.lines(quota_field::ratelimit)[1], "c");
  ASSERT_EQ(fields.lines(quota_field::ratelimit_policy).size(), 1u);
  EXPECT_EQ(fields.lines(quota_field::x_limit)[0], "1");
  EXPECT_EQ(fields.lines(quota_field::x_remaining)[0], "2");
  EXPECT_EQ(fields.lines(quota_field::x_reset)[0], "3");
}

TEST(RateLimitQuotaFields, FieldsAreNamedWithoutRegardToCase) {
  EXPECT_EQ(quota_field_named("RateLimit-Policy"), quota_field::ratelimit_policy);
  EXPECT_EQ(quota_field_named("ratelimit"), quota_field::ratelimit);
  EXPECT_EQ(quota_field_named("X-RATELIMIT-LIMIT"), quota_field::x_limit);
  EXPECT_EQ(quota_field_named("x-ratelimit-remaining"), quota_field::x_remaining);
  EXPECT_EQ(quota_field_named("X-RateLimit-Reset"), quota_field::x_reset);
  EXPECT_FALSE(quota_field_named("X-RateLimit-Used").has_value());
  EXPECT_FALSE(quota_field_named("").has_value());

  quota_fields fields;
  fields.add(quota_field::x_reset, "30");
  ASSERT_EQ(fields.lines(quota_field::x_reset).size(), 1u);
  EXPECT_EQ(fields.lines(quota_field::x_reset)[0], "30");
}

TEST(RateLimitQuotaFields, AFieldWithTooManyLinesIsIgnored) {
  quota_fields fields;
  for (std::size_t i = 0; i < quota_fields::max_lines; ++i) {
    fields.add("RateLimit", "\"a\";r=1;t=10");
  }
  EXPECT_EQ(fields.lines(quota_field::ratelimit).size(), quota_fields::max_lines);
  fields.add("RateLimit", "\"a\";r=1;t=10");
  EXPECT_TRUE(fields.lines(quota_field::ratelimit).empty());
  EXPECT_FALSE(parse_announced_quota(fields, now).has_value());
}

// ---- The draft's own examples (draft-ietf-httpapi-ratelimit-headers-11) ------------------------

TEST(RateLimitHeaders, DraftRateLimitExample) {
  expect_quota(parse({{"RateLimit", "\"default\";r=50;t=30"}}), quota_form::ratelimit, 50, 30s);
}

TEST(RateLimitHeaders, DraftPolicyExamplesAlone) {
  expect_quota(parse({{"RateLimit-Policy", "\"default\";q=100;w=10"}}),
               quota_form::ratelimit_policy, 100, 10s, 100, 10s);
  // 100 per minute or 1000 per day: the day's quota is the slower one (0.0116/s against 1.67/s).
  expect_quota(parse({{"RateLimit-Policy", "\"burst\";q=100;w=60,\"daily\";q=1000;w=86400"}}),
               quota_form::ratelimit_policy, 1000, 86400s, 1000, 86400s);
  // 50 per minute against 1000 per hour: 0.83/s against 0.28/s.
  expect_quota(parse({{"RateLimit-Policy", "\"permin\";q=50;w=60,\"perhr\";q=1000;w=3600"}}),
               quota_form::ratelimit_policy, 1000, 3600s, 1000, 3600s);
  expect_quota(parse({{"RateLimit-Policy", "\"peruser\";q=100;w=60;pk=:cHsdsRa894==:"}}),
               quota_form::ratelimit_policy, 100, 60s, 100, 60s);
  // Content bytes are not requests.
  EXPECT_FALSE(parse({{"RateLimit-Policy",
                       "\"peruser\";q=65535;qu=\"content-bytes\";w=10;pk=:sdfjLJUOUH==:"}})
                   .has_value());
}

TEST(RateLimitHeaders, DraftServiceLimitExamples) {
  // No time window and no policy to take one from: nothing to pace by.
  EXPECT_FALSE(parse({{"RateLimit", "\"default\";r=999;pk=:dHJpYWwxMjEzMjM=:"}}).has_value());
  expect_quota(parse({{"RateLimit", "\"default\";r=300000000;t=60;pk=:QXBwLTk5OQ==:"}}),
               quota_form::ratelimit, 300000000, 60s);
  expect_quota(parse({{"RateLimit", "\"default\";r=0;t=50"}}), quota_form::ratelimit, 0, 50s);
  expect_quota(parse({{"RateLimit", "\"problemPolicy\";r=0;t=10"}}), quota_form::ratelimit, 0, 10s);
}

TEST(RateLimitHeaders, DraftExampleWithItsPolicy) {
  expect_quota(parse({{"RateLimit", "\"fixedwindow\";r=99;t=50"},
                      {"RateLimit-Policy", "\"fixedwindow\";q=100;w=60"}}),
               quota_form::ratelimit, 99, 50s, 100, 60s);
  expect_quota(
      parse({{"RateLimit-Policy", "\"basic\";q=100;w=60"}, {"RateLimit", "\"basic\";r=20;t=56"}}),
      quota_form::ratelimit, 20, 56s, 100, 60s);
}

TEST(RateLimitHeaders, DraftExampleWithMultipleWindows) {
  // The hour's policy has no RateLimit item: a full hour from now, 0.28/s. The day has 100 units
  // left for 10 hours, 0.0028/s, which is what constrains.
  expect_quota(parse({{"RateLimit-Policy", "\"hour\";q=1000;w=3600, \"day\";q=5000;w=86400"},
                      {"RateLimit", "\"day\";r=100;t=36000"}}),
               quota_form::ratelimit, 100, 36000s, 5000, 86400s);
}

TEST(RateLimitHeaders, DraftExampleWithPoliciesOnSeveralLines) {
  // The FAQ's example: two RateLimit-Policy lines and an unknown `burst` parameter.
  // sliding: 50 units in 44 s (1.14/s); fixed alone: 5000 in 3600 s (1.39/s).
  expect_quota(parse({{"RateLimit-Policy", "\"sliding\";q=100;w=60;burst=1000"},
                      {"RateLimit-Policy", "\"fixed\";q=5000;w=3600;burst=0"},
                      {"RateLimit", "\"sliding\";r=50;t=44"}}),
               quota_form::ratelimit, 50, 44s, 100, 60s);
}

// ---- Several policies and items -----------------------------------------------------------------

TEST(RateLimitHeaders, TheItemThatConstrainsMostWins) {
  // 10 in 10 s (1/s) against 5 in 100 s (0.05/s).
  expect_quota(parse({{"RateLimit", "\"a\";r=10;t=10, \"b\";r=5;t=100"}}), quota_form::ratelimit, 5,
               100s);
  expect_quota(parse({{"RateLimit", "\"b\";r=5;t=100, \"a\";r=10;t=10"}}), quota_form::ratelimit, 5,
               100s);
  // None left for 2 s beats a slow pace for an hour.
  expect_quota(parse({{"RateLimit", "\"a\";r=1;t=3600, \"b\";r=0;t=2"}}), quota_form::ratelimit, 0,
               2s);
}

TEST(RateLimitHeaders, TiesGoToTheLongerWindowThenTheFirstListed) {
  expect_quota(parse({{"RateLimit", "\"a\";r=10;t=10, \"b\";r=20;t=20"}}), quota_form::ratelimit,
               20, 20s);
  expect_quota(parse({{"RateLimit-Policy", "\"a\";q=1;w=99, \"b\";q=2;w=99"},
                      {"RateLimit", "\"b\";r=10;t=10, \"a\";r=10;t=10"}}),
               quota_form::ratelimit, 10, 10s, 2, 99s);
  // A RateLimit item comes before a policy alone that paces the same.
  expect_quota(parse({{"RateLimit-Policy", "\"p\";q=10;w=10"}, {"RateLimit", "\"a\";r=10;t=10"}}),
               quota_form::ratelimit, 10, 10s);
}

TEST(RateLimitHeaders, RepeatedFieldsAreOneList) {
  expect_quota(parse({{"RateLimit", "\"a\";r=10;t=10"}, {"RateLimit", "\"b\";r=1;t=10"}}),
               quota_form::ratelimit, 1, 10s);
  expect_quota(parse({{"RateLimit-Policy", "\"a\";q=7;w=70"},
                      {"RateLimit", "\"b\";r=100;t=10"},
                      {"RateLimit-Policy", "\"b\";q=500;w=600"}}),
               quota_form::ratelimit_policy, 7, 70s, 7, 70s);
  // An empty line adds nothing.
  expect_quota(parse({{"RateLimit", ""}, {"RateLimit", "\"a\";r=3;t=30"}, {"RateLimit", "  "}}),
               quota_form::ratelimit, 3, 30s);
  // One line that does not parse takes the whole field with it.
  EXPECT_FALSE(
      parse({{"RateLimit", "\"a\";r=3;t=30"}, {"RateLimit", "\"b\";r=1;t=10,"}}).has_value());
}

TEST(RateLimitHeaders, QuotedAndTokenNames) {
  // The draft wants Strings; Tokens are read too, and a Token names the String of the same text.
  expect_quota(parse({{"RateLimit", "default;r=50;t=30"}}), quota_form::ratelimit, 50, 30s);
  expect_quota(
      parse({{"RateLimit-Policy", "burst;q=100;w=60"}, {"RateLimit", "\"burst\";r=10;t=30"}}),
      quota_form::ratelimit, 10, 30s, 100, 60s);
  expect_quota(
      parse({{"RateLimit-Policy", "\"burst\";q=100;w=60"}, {"RateLimit", "burst;r=10;t=30"}}),
      quota_form::ratelimit, 10, 30s, 100, 60s);
  // Escapes are compared unescaped.
  expect_quota(
      parse({{"RateLimit-Policy", R"("a\"b\\";q=5;w=10)"}, {"RateLimit", R"("a\"b\\";r=1;t=10)"}}),
      quota_form::ratelimit, 1, 10s, 5, 10s);
  // Names are case-sensitive: "Burst" is not "burst", so the item has no policy, and the policy
  // alone (1.67/s) paces faster than the item (0.33/s).
  expect_quota(
      parse({{"RateLimit-Policy", "\"burst\";q=100;w=60"}, {"RateLimit", "\"Burst\";r=10;t=30"}}),
      quota_form::ratelimit, 10, 30s);
}

TEST(RateLimitHeaders, AnItemWithoutTTakesItsPolicysWindow) {
  expect_quota(parse({{"RateLimit-Policy", "\"a\";q=100;w=60"}, {"RateLimit", "\"a\";r=30"}}),
               quota_form::ratelimit, 30, 60s, 100, 60s);
  // A policy without w: the item has no time, the policy no window; nothing is usable.
  EXPECT_FALSE(
      parse({{"RateLimit-Policy", "\"a\";q=100"}, {"RateLimit", "\"a\";r=30"}}).has_value());
  expect_quota(parse({{"RateLimit-Policy", "\"a\";q=100"}, {"RateLimit", "\"a\";r=30;t=5"}}),
               quota_form::ratelimit, 30, 5s, 100);
}

TEST(RateLimitHeaders, QuotaUnits) {
  expect_quota(parse({{"RateLimit-Policy", "\"a\";q=10;w=10;qu=\"requests\""}}),
               quota_form::ratelimit_policy, 10, 10s, 10, 10s);
  expect_quota(parse({{"RateLimit-Policy", "\"a\";q=10;w=10;qu=\"request\""}}),
               quota_form::ratelimit_policy, 10, 10s, 10, 10s);
  // Items naming a policy of another unit are skipped with it.
  EXPECT_FALSE(parse({{"RateLimit-Policy", "\"c\";q=10;w=10;qu=\"concurrent-requests\""},
                      {"RateLimit", "\"c\";r=0;t=10"}})
                   .has_value());
  expect_quota(parse({{"RateLimit-Policy", "\"c\";q=10;w=10;qu=\"content-bytes\", \"r\";q=50;w=60"},
                      {"RateLimit", "\"c\";r=0;t=10, \"r\";r=40;t=30"}}),
               quota_form::ratelimit, 40, 30s, 50, 60s);
  // qu must be a String: a Token makes the policy malformed, so it is dropped.
  EXPECT_FALSE(parse({{"RateLimit-Policy", "\"a\";q=10;w=10;qu=requests"}}).has_value());
}

// ---- Malformed items and fields -----------------------------------------------------------------

TEST(RateLimitHeaders, MalformedItemsAreDroppedAndTheOthersKept) {
  for (std::string_view bad : {
           "\"a\";r=-1;t=10",           // negative
           "\"a\";r=1.5;t=10",          // a Decimal
           "\"a\";r=1;t=-3",            // negative t
           "\"a\";r=1;t=2.0",           // a Decimal t
           "\"a\";t=10",                // no r
           "\"a\";r=\"1\";t=10",        // a String r
           "\"a\";r;t=10",              // a Boolean r
           "\"a\";r=?0;t=10",           // a Boolean r
           "\"a\";r=@1700000000;t=10",  // a Date r
           "\"a\";r=1;t=ten",           // a Token t
           "1;r=1;t=10",                // an Integer name
           "?1;r=1;t=10",               // a Boolean name
           ":YWJj:;r=1;t=10",           // a Byte Sequence name
           "(\"a\" \"b\");r=1;t=10",    // an inner list
       }) {
    const std::string field = std::string(bad) + ", \"ok\";r=5;t=10";
    expect_quota(parse({{"RateLimit", field}}), quota_form::ratelimit, 5, 10s);
    EXPECT_FALSE(parse({{"RateLimit", bad}}).has_value()) << bad;
  }
  for (std::string_view bad : {
           "\"a\";q=1;w=0",       // a zero window
           "\"a\";q=1;w=-5",      // negative
           "\"a\";q=1;w=1.5",     // a Decimal
           "\"a\";w=10",          // no q
           "\"a\";q=-1;w=10",     // negative q
           "\"a\";q=1.0;w=10",    // a Decimal q
           "\"a\";q=\"1\";w=10",  // a String q
           "1;q=1;w=10",          // an Integer name
       }) {
    const std::string field = std::string(bad) + ", \"ok\";q=5;w=10";
    expect_quota(parse({{"RateLimit-Policy", field}}), quota_form::ratelimit_policy, 5, 10s, 5,
                 10s);
    EXPECT_FALSE(parse({{"RateLimit-Policy", bad}}).has_value()) << bad;
  }
}

TEST(RateLimitHeaders, AFieldThatDoesNotParseIsIgnoredAsAWhole) {
  for (std::string_view bad : {
           "\"a\";r=+1;t=10",                 // a '+' sign
           "\"a\";R=1;t=10",                  // keys are lowercase
           "\"a;r=1;t=10",                    // an unterminated String
           "\"a\";r=1;t=10 \"b\";r=1;t=10",   // no comma between members
           "\"a\";r=1;t=10,",                 // a trailing comma
           ",\"a\";r=1;t=10",                 // a leading comma
           "\"a\";r=1;t=10,,\"b\";r=2;t=10",  // an empty member
           "\"a\";r=1;t=10;",                 // a parameter without a key
           "\"a\";r=1e3;t=10",                // no exponents
           "\"a\";r=1.;t=10",                 // a Decimal without fraction digits
           "\"a\";r=1.2345;t=10",             // four fraction digits
           "\"a\";r=0x10;t=10",               // no hexadecimal
           "\"a\";r=1000000000000000;t=10",   // 16 digits
           "\"\\x\";r=1;t=10",                // an unknown escape
           "\"a\xc3\xa9\";r=1;t=10",          // non-ASCII in a String
           "\"a\";r= 1;t=10",                 // a space after '='
           "{\"a\"};r=1;t=10",                // not a bare item
       }) {
    const std::string field = std::string("\"ok\";r=5;t=10, ") + std::string(bad);
    EXPECT_FALSE(parse({{"RateLimit", field}}).has_value()) << bad;
  }
  // The other field is still read when one is ignored.
  expect_quota(parse({{"RateLimit-Policy", "\"a\";q=100;w=60"}, {"RateLimit", "\"a\";r=1;t=10,"}}),
               quota_form::ratelimit_policy, 100, 60s, 100, 60s);
}

TEST(RateLimitHeaders, OtherParametersAndWhitespace) {
  // pk of any type, unknown parameters, a key repeated (its last value counts), spaces around
  // the field, after ';' and around commas.
  expect_quota(parse({{"RateLimit", "  \"a\";r=9;t=10;pk=1;acme-x=?1; r=4 ,\t\"b\";r=50;t=30\t"}}),
               quota_form::ratelimit, 4, 10s);
}

// ---- Large numbers ------------------------------------------------------------------------------

TEST(RateLimitHeaders, HugeNumbersNeitherOverflowNorStopDeliveriesForDays) {
  expect_quota(parse({{"RateLimit", "\"a\";r=999999999999999;t=10"}}), quota_form::ratelimit,
               999999999999999u, 10s);
  expect_quota(parse({{"RateLimit-Policy", "\"a\";q=999999999999999;w=86400"}}),
               quota_form::ratelimit_policy, 999999999999999u, 86400s, 999999999999999u, 86400s);
  // The ratio comparison neither rounds nor overflows at the largest values.
  expect_quota(
      parse({{"RateLimit", "\"a\";r=999999999999999;t=86400, \"b\";r=999999999999998;t=86400"}}),
      quota_form::ratelimit, 999999999999998u, 86400s);
  // A day is the default bound on a reset.
  expect_quota(parse({{"RateLimit", "\"a\";r=1;t=86400"}}), quota_form::ratelimit, 1, 86400s);
  EXPECT_FALSE(parse({{"RateLimit", "\"a\";r=1;t=86401"}}).has_value());
  EXPECT_FALSE(parse({{"RateLimit", "\"a\";r=0;t=999999999999999"}}).has_value());
  // Too far away is skipped, not fatal: the next item is still read.
  expect_quota(parse({{"RateLimit", "\"a\";r=0;t=999999999999999, \"b\";r=5;t=50"}}),
               quota_form::ratelimit, 5, 50s);
  // A policy alone with too long a window is skipped the same way.
  EXPECT_FALSE(parse({{"RateLimit-Policy", "\"month\";q=100;w=2592000"}}).has_value());
}

TEST(RateLimitHeaders, TheResetBoundIsAnOption) {
  const quota_parse_options ten_seconds{.max_reset = 10s};
  EXPECT_TRUE(parse({{"RateLimit", "\"a\";r=1;t=10"}}, now, ten_seconds).has_value());
  EXPECT_FALSE(parse({{"RateLimit", "\"a\";r=1;t=11"}}, now, ten_seconds).has_value());
  // At most ten years (of 366 days) are taken from it.
  const quota_parse_options forever{.max_reset = seconds::max()};
  expect_quota(parse({{"RateLimit", "\"a\";r=1;t=316224000"}}, now, forever), quota_form::ratelimit,
               1, 316224000s);
  EXPECT_FALSE(parse({{"RateLimit", "\"a\";r=1;t=316224001"}}, now, forever).has_value());
  EXPECT_FALSE(parse({{"RateLimit", "\"a\";r=1;t=1"}}, now, {.max_reset = -5s}).has_value());
}

TEST(RateLimitHeaders, AWindowThatEndsNowConstrainsNothing) {
  EXPECT_FALSE(parse({{"RateLimit", "\"a\";r=0;t=0"}}).has_value());
  expect_quota(parse({{"RateLimit", "\"a\";r=0;t=0, \"b\";r=100;t=100"}}), quota_form::ratelimit,
               100, 100s);
}

// ---- X-RateLimit-* ------------------------------------------------------------------------------

TEST(RateLimitHeaders, XRateLimitWithDelaySeconds) {
  expect_quota(parse({{"X-RateLimit-Limit", "100"},
                      {"X-RateLimit-Remaining", "40"},
                      {"X-RateLimit-Reset", "30"}}),
               quota_form::x_ratelimit, 40, 30s, 100);
  // Limit is informative.
  expect_quota(parse({{"x-ratelimit-remaining", " 40 "}, {"x-ratelimit-reset", "30"}}),
               quota_form::x_ratelimit, 40, 30s);
  expect_quota(parse({{"X-RateLimit-Limit", "lots"},
                      {"X-RateLimit-Remaining", "0"},
                      {"X-RateLimit-Reset", "86400"}}),
               quota_form::x_ratelimit, 0, 86400s);
}

TEST(RateLimitHeaders, XRateLimitWithAnEpochReset) {
  expect_quota(parse({{"X-RateLimit-Limit", "5000"},
                      {"X-RateLimit-Remaining", "4999"},
                      {"X-RateLimit-Reset", "1700003600"}}),
               quota_form::x_ratelimit, 4999, 3600s, 5000);
  // Within a second: the reset instant is the announced one, and reset_after rounds up.
  const auto later = now + 500ms;
  const auto quota =
      parse({{"X-RateLimit-Remaining", "1"}, {"X-RateLimit-Reset", "1700000060"}}, later);
  ASSERT_TRUE(quota.has_value());
  EXPECT_EQ(quota->reset_at, system_clock::time_point(seconds(1700000060)));
  EXPECT_EQ(quota->reset_after, 60s);
  // The threshold: 10^9 and up is a Unix time (here long past), below it a delay (here absurd).
  EXPECT_FALSE(
      parse({{"X-RateLimit-Remaining", "1"}, {"X-RateLimit-Reset", "1000000000"}}).has_value());
  EXPECT_FALSE(
      parse({{"X-RateLimit-Remaining", "1"}, {"X-RateLimit-Reset", "999999999"}}).has_value());
  const auto in_2001 = system_clock::time_point(seconds(999'999'990));
  const auto early =
      parse({{"X-RateLimit-Remaining", "1"}, {"X-RateLimit-Reset", "1000000000"}}, in_2001);
  ASSERT_TRUE(early.has_value());
  EXPECT_EQ(early->reset_after, 10s);
}

TEST(RateLimitHeaders, XRateLimitResetsInThePastOrTooFarAreIgnored) {
  for (std::string_view reset : {
           "0",              // now
           "1699999999",     // a second ago
           "1700000000",     // this very second
           "1700086401",     // a day and a second away
           "86401",          // the same as a delay
           "1700000060000",  // Unix milliseconds: read as seconds, 53,000 years away
       }) {
    EXPECT_FALSE(parse({{"X-RateLimit-Remaining", "5"}, {"X-RateLimit-Reset", reset}}).has_value())
        << reset;
  }
  expect_quota(parse({{"X-RateLimit-Remaining", "5"}, {"X-RateLimit-Reset", "1700086400"}}),
               quota_form::x_ratelimit, 5, 86400s);
}

TEST(RateLimitHeaders, XRateLimitValuesAreStrictIntegers) {
  for (std::string_view bad : {"-1", "+1", "1.5", "1e3", "0x10", "", " ", "1 2", "12abc",
                               "1000000000000000", "\xef\xbc\x91"}) {
    EXPECT_FALSE(parse({{"X-RateLimit-Remaining", bad}, {"X-RateLimit-Reset", "30"}}).has_value())
        << bad;
    EXPECT_FALSE(parse({{"X-RateLimit-Remaining", "5"}, {"X-RateLimit-Reset", bad}}).has_value())
        << bad;
  }
  // Fractional resets (some APIs send them) are not read.
  EXPECT_FALSE(
      parse({{"X-RateLimit-Remaining", "5"}, {"X-RateLimit-Reset", "1700000030.5"}}).has_value());
  // Both Remaining and Reset are needed.
  EXPECT_FALSE(parse({{"X-RateLimit-Limit", "5"}, {"X-RateLimit-Reset", "30"}}).has_value());
  EXPECT_FALSE(parse({{"X-RateLimit-Limit", "5"}, {"X-RateLimit-Remaining", "3"}}).has_value());
  expect_quota(parse({{"X-RateLimit-Remaining", "999999999999999"}, {"X-RateLimit-Reset", "30"}}),
               quota_form::x_ratelimit, 999999999999999u, 30s);
}

TEST(RateLimitHeaders, XRateLimitRepeatedCountsAtItsMostConstraining) {
  expect_quota(parse({{"X-RateLimit-Limit", "100, 60"},
                      {"X-RateLimit-Remaining", "40, 30"},
                      {"X-RateLimit-Reset", "30"}}),
               quota_form::x_ratelimit, 30, 30s, 60);
  expect_quota(parse({{"X-RateLimit-Remaining", "40"},
                      {"X-RateLimit-Remaining", "50"},
                      {"X-RateLimit-Reset", "30"},
                      {"X-RateLimit-Reset", "60"}}),
               quota_form::x_ratelimit, 40, 60s);
  // A delay and a Unix time together: the later instant.
  expect_quota(parse({{"X-RateLimit-Remaining", "1"}, {"X-RateLimit-Reset", "30, 1700000100"}}),
               quota_form::x_ratelimit, 1, 100s);
  // One bad value spoils the field.
  EXPECT_FALSE(
      parse({{"X-RateLimit-Remaining", "40, x"}, {"X-RateLimit-Reset", "30"}}).has_value());
  EXPECT_FALSE(parse({{"X-RateLimit-Remaining", "4"}, {"X-RateLimit-Reset", "30,"}}).has_value());
}

// ---- Both forms ---------------------------------------------------------------------------------

TEST(RateLimitHeaders, TheDraftFormWinsOverXRateLimit) {
  // Even when X-RateLimit says less is left.
  expect_quota(parse({{"X-RateLimit-Remaining", "0"},
                      {"X-RateLimit-Reset", "60"},
                      {"RateLimit", "\"a\";r=50;t=30"}}),
               quota_form::ratelimit, 50, 30s);
  // A draft field that is ignored, or says nothing usable, leaves X-RateLimit to speak.
  expect_quota(parse({{"X-RateLimit-Remaining", "7"},
                      {"X-RateLimit-Reset", "60"},
                      {"RateLimit", "\"a\";r=50;t=30,"}}),
               quota_form::x_ratelimit, 7, 60s);
  expect_quota(parse({{"X-RateLimit-Remaining", "7"},
                      {"X-RateLimit-Reset", "60"},
                      {"RateLimit", "\"a\";r=50"}}),
               quota_form::x_ratelimit, 7, 60s);
}

TEST(RateLimitHeaders, NothingAnnouncedIsNothing) {
  EXPECT_FALSE(parse({}).has_value());
  EXPECT_FALSE(parse({{"RateLimit", ""}}).has_value());
  EXPECT_FALSE(parse({{"Content-Type", "application/json"}}).has_value());
}

// ---- The pace -----------------------------------------------------------------------------------

announced_quota quota_of(std::uint64_t remaining, seconds reset_after) {
  announced_quota quota;
  quota.remaining = remaining;
  quota.reset_after = reset_after;
  quota.reset_at = now + reset_after;
  return quota;
}

void expect_pace(const announced_pace& pace, pace_kind kind, double rate, double burst,
                 system_clock::time_point until) {
  EXPECT_EQ(pace.kind, kind);
  EXPECT_DOUBLE_EQ(pace.rate, rate);
  EXPECT_DOUBLE_EQ(pace.burst, burst);
  EXPECT_EQ(pace.until, until);
}

constexpr configured_limit ten_per_second{.rate = 10, .burst = 20};

TEST(AnnouncedPace, NoQuotaChangesNothing) {
  expect_pace(pace_for_quota(ten_per_second, std::nullopt, std::nullopt, now),
              pace_kind::configured, 10, 20, now);
}

TEST(AnnouncedPace, AQuotaThatFitsTheConfiguredLimitChangesNothing) {
  // 20 at once and 10/s for 60 s is 620.
  expect_pace(pace_for_quota(ten_per_second, quota_of(1000, 60s), std::nullopt, now),
              pace_kind::configured, 10, 20, now);
  expect_pace(pace_for_quota(ten_per_second, quota_of(620, 60s), std::nullopt, now),
              pace_kind::configured, 10, 20, now);
}

TEST(AnnouncedPace, AnnouncedAboveTheConfiguredRate) {
  // 610 in 60 s is 10.17/s, above the configured 10/s: with a burst of 1 nothing changes...
  expect_pace(pace_for_quota({.rate = 10, .burst = 1}, quota_of(610, 60s), std::nullopt, now),
              pace_kind::configured, 10, 1, now);
  // ...but 20 at once and 600 more would be 620: the rate stays and the burst shrinks to 10.
  expect_pace(pace_for_quota(ten_per_second, quota_of(610, 60s), std::nullopt, now),
              pace_kind::reduced, 10, 10, now + 60s);
  expect_pace(pace_for_quota(ten_per_second, quota_of(619, 60s), std::nullopt, now),
              pace_kind::reduced, 10, 19, now + 60s);
}

TEST(AnnouncedPace, AnnouncedEqualToTheConfiguredRate) {
  // 600 in 60 s is exactly 10/s, but a bucket holding one token lets out 601: one at once, then
  // the other 599 evenly.
  expect_pace(pace_for_quota({.rate = 10, .burst = 1}, quota_of(600, 60s), std::nullopt, now),
              pace_kind::reduced, 599.0 / 60, 1, now + 60s);
}

TEST(AnnouncedPace, AnnouncedBelowTheConfiguredRate) {
  expect_pace(pace_for_quota(ten_per_second, quota_of(30, 60s), std::nullopt, now),
              pace_kind::reduced, 29.0 / 60, 1, now + 60s);
  expect_pace(pace_for_quota(ten_per_second, quota_of(2, 100s), std::nullopt, now),
              pace_kind::reduced, 0.01, 1, now + 100s);
}

TEST(AnnouncedPace, NoneLeftPausesUntilTheReset) {
  expect_pace(pace_for_quota(ten_per_second, quota_of(0, 50s), std::nullopt, now),
              pace_kind::paused, 0, 20, now + 50s);
  // The last unit is the margin for the one request a bucket may hold.
  expect_pace(pace_for_quota(ten_per_second, quota_of(1, 50s), std::nullopt, now),
              pace_kind::paused, 0, 20, now + 50s);
}

TEST(AnnouncedPace, AResetInThePastChangesNothing) {
  expect_pace(pace_for_quota(ten_per_second, quota_of(0, 50s), std::nullopt, now + 50s),
              pace_kind::configured, 10, 20, now + 50s);
  expect_pace(pace_for_quota(ten_per_second, quota_of(0, 50s), std::nullopt, now + 51s),
              pace_kind::configured, 10, 20, now + 51s);
  // Later in the window, the same units are spread over less time.
  expect_pace(pace_for_quota(ten_per_second, quota_of(31, 60s), std::nullopt, now + 30s),
              pace_kind::reduced, 1, 1, now + 60s);
}

TEST(AnnouncedPace, TheConfiguredLimitIsTakenAsItIs) {
  // Paused stays paused, whatever is announced.
  expect_pace(pace_for_quota({.rate = 0, .burst = 5}, quota_of(1000, 60s), std::nullopt, now),
              pace_kind::configured, 0, 5, now);
  expect_pace(pace_for_quota({.rate = -1, .burst = 5}, quota_of(0, 60s), std::nullopt, now),
              pace_kind::configured, -1, 5, now);
  const auto nan = std::numeric_limits<double>::quiet_NaN();
  const auto pace = pace_for_quota({.rate = nan, .burst = 5}, quota_of(0, 60s), std::nullopt, now);
  EXPECT_EQ(pace.kind, pace_kind::configured);
  EXPECT_TRUE(std::isnan(pace.rate));
  // A burst below 1 is a burst of 1, as in the bucket.
  expect_pace(pace_for_quota({.rate = 1, .burst = 0.2}, quota_of(1000, 60s), std::nullopt, now),
              pace_kind::configured, 1, 1, now);
  expect_pace(pace_for_quota({.rate = 1, .burst = nan}, quota_of(1000, 60s), std::nullopt, now),
              pace_kind::configured, 1, 1, now);
  // An unlimited rate is paced by the quota like any other.
  const auto inf = std::numeric_limits<double>::infinity();
  expect_pace(pace_for_quota({.rate = inf, .burst = 1}, quota_of(11, 10s), std::nullopt, now),
              pace_kind::reduced, 1, 1, now + 10s);
}

TEST(AnnouncedPace, RetryAfterTakesPrecedence) {
  // The draft's example: Retry-After 20 with 15 units left for 40 s. Retry-After alone says when
  // sending resumes; the 15 units are then spread over the 20 s left: one at once, 14 in 20 s.
  quota_fields fields;
  fields.add("Retry-After", "20");
  fields.add("RateLimit-Policy", "\"dynamic\";q=100;w=60");
  fields.add("RateLimit", "\"dynamic\";r=15;t=40");
  const auto quota = parse_announced_quota(fields, now);
  expect_pace(pace_for_quota({.rate = 5, .burst = 10}, quota, 20s, now), pace_kind::reduced, 0.7, 1,
              now + 40s);
  // A window that ends before Retry-After does, or as it does, changes nothing.
  expect_pace(pace_for_quota({.rate = 5, .burst = 10}, quota, 40s, now), pace_kind::configured, 5,
              10, now);
  expect_pace(pace_for_quota({.rate = 5, .burst = 10}, quota, 41s, now), pace_kind::configured, 5,
              10, now);
  expect_pace(pace_for_quota({.rate = 5, .burst = 10}, quota, seconds::max(), now),
              pace_kind::configured, 5, 10, now);
  // The draft's other example, "r=0;t=5" with Retry-After five seconds away: only Retry-After.
  expect_pace(pace_for_quota(ten_per_second, quota_of(0, 5s), 5s, now), pace_kind::configured, 10,
              20, now);
  // Without Retry-After the same quota pauses; with it, the pause is Retry-After's.
  expect_pace(pace_for_quota(ten_per_second, quota_of(0, 5s), std::nullopt, now), pace_kind::paused,
              0, 20, now + 5s);
  // A Retry-After of zero or less is no wait.
  expect_pace(pace_for_quota(ten_per_second, quota_of(30, 60s), 0s, now), pace_kind::reduced,
              29.0 / 60, 1, now + 60s);
  expect_pace(pace_for_quota(ten_per_second, quota_of(30, 60s), -5s, now), pace_kind::reduced,
              29.0 / 60, 1, now + 60s);
  // Never shorter than Retry-After: none left past it is a pause to the reset, which is later.
  expect_pace(pace_for_quota(ten_per_second, quota_of(0, 60s), 20s, now), pace_kind::paused, 0, 20,
              now + 60s);
}

TEST(AnnouncedPace, ThePartnerNeverRunsOutBeforeTheReset) {
  // Whatever the bucket holds (at most its burst) plus its refill until the reset fits in what
  // is left, and the pace is never above the configured limit.
  for (const double rate : {0.01, 0.5, 1.0, 3.0, 10.0, 250.0}) {
    for (const double burst : {1.0, 2.0, 7.5, 50.0}) {
      for (const std::uint64_t remaining : {0u, 1u, 2u, 3u, 10u, 99u, 1000u, 100000u}) {
        for (const seconds reset : {1s, 7s, 60s, 3600s, 86400s}) {
          const auto pace =
              pace_for_quota({rate, burst}, quota_of(remaining, reset), std::nullopt, now);
          SCOPED_TRACE(testing::Message()
                       << rate << " " << burst << " " << remaining << " " << reset.count());
          EXPECT_LE(pace.rate, rate);
          EXPECT_GE(pace.rate, 0);
          EXPECT_LE(pace.burst, burst);
          EXPECT_GE(pace.burst, 1);
          if (pace.kind == pace_kind::paused) {
            EXPECT_EQ(pace.rate, 0);
          } else {
            const double sent = pace.burst + pace.rate * static_cast<double>(reset.count());
            EXPECT_LE(sent, static_cast<double>(remaining) * (1 + 1e-12));
          }
        }
      }
    }
  }
}

TEST(AnnouncedPace, FromTheHeadersOfAResponse) {
  // GitHub's form: 4999 of 5000 left for an hour, against 10/s with a burst of 20: one at once,
  // then 4998 over the hour, until the reset.
  quota_fields fields;
  fields.add("x-ratelimit-limit", "5000");
  fields.add("x-ratelimit-remaining", "4999");
  fields.add("x-ratelimit-reset", "1700003600");
  fields.add("x-ratelimit-used", "1");
  const auto quota = parse_announced_quota(fields, now);
  expect_pace(pace_for_quota(ten_per_second, quota, std::nullopt, now), pace_kind::reduced,
              4998.0 / 3600, 1, system_clock::time_point(seconds(1700003600)));
}

}  // namespace
}  // namespace surge::proto
