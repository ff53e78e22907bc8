#include "engine/limits/token_bucket.hpp"

#include <gtest/gtest.h>

#include <random>

namespace surge::engine {
namespace {

using namespace std::chrono_literals;
using clock_type = token_bucket::clock;

const auto t0 = clock_type::time_point{} + 1000s;

TEST(TokenBucket, StartsWithInitialTokensAndRefusesWhenEmpty) {
  token_bucket bucket(2.0, 3, 3, t0);
  EXPECT_TRUE(bucket.try_take(t0));
  EXPECT_TRUE(bucket.try_take(t0));
  EXPECT_TRUE(bucket.try_take(t0));
  EXPECT_FALSE(bucket.try_take(t0));
  // One token every 500 ms.
  EXPECT_EQ(std::chrono::duration_cast<std::chrono::milliseconds>(bucket.time_until_available(t0)),
            500ms);
  EXPECT_FALSE(bucket.try_take(t0 + 499ms));
  EXPECT_TRUE(bucket.try_take(t0 + 500ms));
}

TEST(TokenBucket, AtMostLowersTheTokensAndRefillGoesOnFromThere) {
  token_bucket bucket(10.0, 5, 5, t0);
  bucket.at_most(0.5, t0);
  EXPECT_DOUBLE_EQ(bucket.tokens_at(t0), 0.5);
  EXPECT_EQ(bucket.time_until_available(t0),
            std::chrono::milliseconds(50) + token_bucket::duration(1));
  bucket.at_most(3, t0);  // never adds
  EXPECT_DOUBLE_EQ(bucket.tokens_at(t0), 0.5);
  bucket.at_most(-1, t0);
  EXPECT_DOUBLE_EQ(bucket.tokens_at(t0), 0.0);
}

TEST(TokenBucket, RefusedTakeChangesNothing) {
  token_bucket bucket(1.0, 5, 0.5, t0);
  const double before = bucket.tokens_at(t0 + 100ms);
  EXPECT_FALSE(bucket.try_take(t0 + 100ms));
  EXPECT_DOUBLE_EQ(bucket.tokens_at(t0 + 100ms), before);
  EXPECT_TRUE(bucket.try_take(t0 + 500ms));
}

TEST(TokenBucket, NeverRefillsAboveCapacity) {
  token_bucket bucket(100.0, 4, 0, t0);
  EXPECT_DOUBLE_EQ(bucket.tokens_at(t0 + 1h), 4.0);
  for (int i = 0; i < 4; ++i) EXPECT_TRUE(bucket.try_take(t0 + 1h));
  EXPECT_FALSE(bucket.try_take(t0 + 1h));
}

TEST(TokenBucket, WaitingTheAnnouncedTimeAlwaysFindsAToken) {
  std::mt19937_64 rng(7);
  std::uniform_real_distribution<double> rate(0.01, 5000);
  for (int i = 0; i < 1000; ++i) {
    token_bucket bucket(rate(rng), 1, 0, t0);
    const auto wait = bucket.time_until_available(t0);
    EXPECT_TRUE(bucket.try_take(t0 + wait)) << "rate " << bucket.rate();
  }
}

TEST(TokenBucket, ZeroRateIsPausedWithoutAFirstBurst) {
  token_bucket bucket(0.0, 10, 10, t0);
  EXPECT_TRUE(bucket.paused());
  EXPECT_FALSE(bucket.try_take(t0));
  EXPECT_EQ(bucket.time_until_available(t0), token_bucket::duration::max());
}

TEST(TokenBucket, ReconfigureKeepsTokensClampedToTheNewBurst) {
  token_bucket bucket(1.0, 10, 10, t0);
  ASSERT_TRUE(bucket.try_take(t0));  // 9 left
  bucket.reconfigure(1.0, 5, t0);
  EXPECT_DOUBLE_EQ(bucket.tokens_at(t0), 5.0);
  bucket.reconfigure(1.0, 20, t0);
  EXPECT_DOUBLE_EQ(bucket.tokens_at(t0), 5.0);  // no reset to the new capacity
  bucket.reconfigure(10.0, 20, t0);
  EXPECT_DOUBLE_EQ(bucket.tokens_at(t0 + 1s), 15.0);  // new rate applies from now on
}

TEST(TokenBucket, ConformsInEveryWindow) {
  // A greedy sender taking whenever allowed never exceeds burst + rate * T in any window.
  const double rate = 7.0;
  const int burst = 5;
  token_bucket bucket(rate, burst, burst, t0);
  std::vector<clock_type::time_point> sent;
  auto now = t0;
  while (now < t0 + 20s) {
    if (bucket.try_take(now)) {
      sent.push_back(now);
    } else {
      now += bucket.time_until_available(now);
    }
  }
  for (std::size_t i = 0; i < sent.size(); ++i) {
    for (std::size_t j = i; j < sent.size(); ++j) {
      const double window = std::chrono::duration<double>(sent[j] - sent[i]).count();
      ASSERT_LE(static_cast<double>(j - i + 1), burst + rate * window + 1e-6);
    }
  }
  // And it achieves the rate: burst plus 20 s of refill, give or take one.
  EXPECT_NEAR(static_cast<double>(sent.size()), burst + rate * 20, 1.0);
}

TEST(SeededTokens, RefillsForElapsedWallTimeAndClamps) {
  EXPECT_DOUBLE_EQ(seeded_tokens(2.0, 1000.0, 1.0, 10, 1003.0), 5.0);
  EXPECT_DOUBLE_EQ(seeded_tokens(2.0, 1000.0, 1.0, 10, 2000.0), 10.0);
  EXPECT_DOUBLE_EQ(seeded_tokens(-3.0, 1000.0, 1.0, 10, 1001.0), 0.0);
  EXPECT_DOUBLE_EQ(seeded_tokens(2.0, 0.0, 0.0, 10, 2000.0), 2.0);  // paused: no refill
  // A clock that went backwards does not mint tokens.
  EXPECT_DOUBLE_EQ(seeded_tokens(2.0, 3000.0, 1.0, 10, 2000.0), 2.0);
}

}  // namespace
}  // namespace surge::engine
