#include "proto/retry_policy.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <random>

namespace surge::proto {
namespace {

using namespace std::chrono_literals;
using std::chrono::milliseconds;

double unit(std::mt19937_64& rng) { return std::uniform_real_distribution<double>(0.0, 1.0)(rng); }

TEST(retry_policy, defaults_match_the_design) {
  const retry_policy p;
  EXPECT_EQ(p.config().base_delay, 1s);
  EXPECT_EQ(p.config().max_delay, 1h);
  EXPECT_EQ(p.config().max_attempts, 8);
  EXPECT_EQ(p.config().max_age, 24h);
}

TEST(retry_policy, nominal_doubles_then_caps) {
  const retry_policy p;
  EXPECT_EQ(p.nominal_delay(1), 1s);
  EXPECT_EQ(p.nominal_delay(2), 2s);
  EXPECT_EQ(p.nominal_delay(3), 4s);
  EXPECT_EQ(p.nominal_delay(12), 2048s);
  EXPECT_EQ(p.nominal_delay(13), 1h);  // 4096 s is past the cap
  EXPECT_EQ(p.nominal_delay(64), 1h);
  EXPECT_EQ(p.nominal_delay(1000), 1h);
  EXPECT_EQ(p.nominal_delay(std::numeric_limits<int>::max()), 1h);
  // Zero or negative counts behave like the first failure.
  EXPECT_EQ(p.nominal_delay(0), 1s);
  EXPECT_EQ(p.nominal_delay(-5), 1s);
}

TEST(retry_policy, nominal_edge_configs) {
  EXPECT_EQ(retry_policy({.base_delay = 0ms}).nominal_delay(50), 0ms);
  EXPECT_EQ(retry_policy({.base_delay = 2h}).nominal_delay(1), 1h);  // base above cap
  const retry_policy huge({.base_delay = 3ms, .max_delay = milliseconds::max()});
  EXPECT_EQ(huge.nominal_delay(2), 6ms);
  EXPECT_EQ(huge.nominal_delay(1000), milliseconds::max());
  EXPECT_EQ(huge.backoff(1000, 0.0), milliseconds(milliseconds::max().count() / 2 + 1));
}

TEST(retry_policy, nominal_is_non_decreasing) {
  std::mt19937_64 rng(1);
  for (int round = 0; round < 200; ++round) {
    const retry_policy p(
        {.base_delay = milliseconds(rng() % 100000), .max_delay = milliseconds(rng() % 100000000)});
    for (int n = 1; n <= 1000; ++n) {
      ASSERT_LE(p.nominal_delay(n), p.nominal_delay(n + 1)) << n;
      ASSERT_LE(p.nominal_delay(n), p.config().max_delay);
    }
  }
}

TEST(retry_policy, backoff_stays_in_the_jitter_band) {
  std::mt19937_64 rng(42);
  for (int round = 0; round < 200; ++round) {
    const retry_policy p({.base_delay = milliseconds(1 + rng() % 10000),
                          .max_delay = milliseconds(1 + rng() % 10000000)});
    for (int i = 0; i < 200; ++i) {
      const int n = 1 + static_cast<int>(rng() % 1000);
      const auto nominal = p.nominal_delay(n);
      const auto delay = p.backoff(n, unit(rng));
      ASSERT_GE(2 * delay.count(), nominal.count()) << n;
      ASSERT_LE(delay, nominal);
      ASSERT_LE(delay, p.config().max_delay);
    }
  }
}

TEST(retry_policy, backoff_spread_covers_the_band) {
  const retry_policy p;
  std::mt19937_64 rng(99);
  for (int n : {1, 4, 10, 30}) {
    const double nominal = static_cast<double>(p.nominal_delay(n).count());
    double low = nominal, high = 0;
    for (int i = 0; i < 1000; ++i) {
      const double d = static_cast<double>(p.backoff(n, unit(rng)).count());
      low = std::min(low, d);
      high = std::max(high, d);
    }
    EXPECT_LE(low, nominal / 2 + 0.05 * nominal / 2) << n;
    EXPECT_GE(high, nominal - 0.05 * nominal / 2) << n;
  }
}

TEST(retry_policy, backoff_ends_and_bad_random) {
  const retry_policy p;
  EXPECT_EQ(p.backoff(1, 0.0), 500ms);
  EXPECT_EQ(p.backoff(1, 0.5), 750ms);
  EXPECT_EQ(p.backoff(1, std::nextafter(1.0, 0.0)), 1000ms);
  EXPECT_EQ(p.backoff(13, 0.0), 30min);
  EXPECT_EQ(p.backoff(1, -3.0), 500ms);
  EXPECT_EQ(p.backoff(1, 7.0), 1000ms);
  EXPECT_EQ(p.backoff(1, std::nan("")), 500ms);
  // An odd nominal delay rounds its half up, never below the exact half.
  EXPECT_EQ(retry_policy({.base_delay = 3ms}).backoff(1, 0.0), 2ms);
}

TEST(retry_policy, attempts_exhausted) {
  const retry_policy p;
  EXPECT_FALSE(p.attempts_exhausted(0));
  EXPECT_FALSE(p.attempts_exhausted(7));
  EXPECT_TRUE(p.attempts_exhausted(8));
  EXPECT_TRUE(p.attempts_exhausted(9));
}

TEST(retry_policy, past_window) {
  const retry_policy p;
  EXPECT_FALSE(p.past_window(std::chrono::hours(23), 1h));
  EXPECT_TRUE(p.past_window(std::chrono::hours(23), 1h + 1ms));
  EXPECT_TRUE(p.past_window(std::chrono::duration<double>(86399.9995), 1ms));
  EXPECT_FALSE(p.past_window(std::chrono::duration<double>(0), 0ms));
  EXPECT_TRUE(p.past_window(std::chrono::hours(25), 0ms));
}

// The second published queue shape's rule: min(3600, 2^attempt + random 0..30 s).
TEST(retry_policy, added_jitter_is_two_to_the_attempt_plus_up_to_thirty_seconds) {
  const retry_policy p({.rule = backoff_rule::added_jitter,
                        .added_jitter = 30s,
                        .base_delay = 1s,
                        .max_delay = 1h,
                        .max_attempts = 12});
  EXPECT_EQ(p.backoff(1, 0.0), 2s);
  EXPECT_EQ(p.backoff(1, 1.0), 32s);
  EXPECT_EQ(p.backoff(3, 0.5), 8s + 15s);
  EXPECT_EQ(p.backoff(11, 0.0), 2048s);
  EXPECT_EQ(p.backoff(11, 1.0), 2078s);
  EXPECT_EQ(p.backoff(12, 0.0), 3600s);  // 4096 s is past the cap
  EXPECT_EQ(p.backoff(40, 0.7), 3600s);
  EXPECT_EQ(p.backoff(1, std::nan("")), 2s);
  std::mt19937_64 rng(7);
  for (int n = 1; n <= 12; ++n) {
    for (int i = 0; i < 100; ++i) {
      const auto d = p.backoff(n, unit(rng));
      const auto low = std::min<milliseconds>(milliseconds(1000LL << n), 1h);
      ASSERT_GE(d, low) << n;
      ASSERT_LE(d, std::min<milliseconds>(low + 30s, 1h)) << n;
    }
  }
}

}  // namespace
}  // namespace surge::proto
