// A subscriber row as the shard reads it: which settings pause it, and which make it unusable.
#include "engine/subscriber.hpp"

#include <cmath>
#include <limits>

#include <gtest/gtest.h>

namespace surge::engine {
namespace {

storage::subscriber_row sample() {
  storage::subscriber_row row;
  row.id = 7;
  row.url = "https://partner.example/hook";
  row.secret = "secret";
  row.rate_per_sec = 5;
  row.burst = 10;
  return row;
}

TEST(SubscriberSettings, UsableLimitsPassThrough) {
  const auto settings = derive_settings(sample(), {});
  EXPECT_TRUE(settings.limits_problem.empty());
  EXPECT_TRUE(settings.unusable_reason.empty());
  EXPECT_EQ(settings.rate, 5);
  EXPECT_EQ(settings.burst, 10);
  EXPECT_TRUE(sends_now(sample()));
}

TEST(SubscriberSettings, UnusableLimitsPauseWithAMessageQuotingTheValue) {
  auto row = sample();
  row.rate_text = "'fast'";
  row.rate_per_sec = std::numeric_limits<double>::quiet_NaN();
  EXPECT_EQ(limits_problem(row), "rate_per_sec 'fast' is not a number");
  const auto settings = derive_settings(row, {});
  EXPECT_EQ(settings.rate, 0);  // paused, not guessed at
  EXPECT_TRUE(settings.unusable_reason.empty()) << "its rows must not be dead-lettered";
  EXPECT_FALSE(sends_now(row));

  row = sample();
  row.rate_per_sec = -5;
  EXPECT_EQ(limits_problem(row), "rate_per_sec -5 is not a finite number >= 0");
  row.rate_per_sec = std::numeric_limits<double>::infinity();
  EXPECT_EQ(limits_problem(row), "rate_per_sec inf is not a finite number >= 0");
  row = sample();
  row.burst_text = "'big'";
  row.burst = 0;
  EXPECT_EQ(limits_problem(row), "burst 'big' is not a number");
  row = sample();
  row.burst = 0;
  EXPECT_EQ(limits_problem(row), "burst 0 is below 1");
  EXPECT_FALSE(sends_now(row));
}

TEST(SubscriberSettings, InactiveIsPausedNotUnusable) {
  auto row = sample();
  row.active = false;
  const auto settings = derive_settings(row, {});
  EXPECT_FALSE(settings.active);
  EXPECT_TRUE(settings.unusable_reason.empty());
  EXPECT_FALSE(sends_now(row));
  row.active = true;
  row.rate_per_sec = 0;
  EXPECT_FALSE(sends_now(row));
}

}  // namespace
}  // namespace surge::engine
