#include "proto/persisted_bucket.hpp"

#include <cmath>
#include <limits>

#include <gtest/gtest.h>

namespace surge::proto {
namespace {

TEST(PersistedBucket, RefillsForElapsedTimeUpToItsCapacity) {
  const persisted_bucket bucket{.tokens = 2, .updated_at = 1000, .rate = 1, .burst = 10};
  EXPECT_DOUBLE_EQ(tokens_at(bucket, 1003), 5);
  EXPECT_DOUBLE_EQ(tokens_at(bucket, 2000), 10);
  EXPECT_DOUBLE_EQ(tokens_at(bucket, 900), 2);  // written "in the future": nothing added
}

TEST(PersistedBucket, KeepsAnotherDrainersDebtAndAPausedBucketDoesNotRefill) {
  EXPECT_DOUBLE_EQ(tokens_at({.tokens = -3, .updated_at = 1000, .rate = 1, .burst = 10}, 1001), -2);
  EXPECT_DOUBLE_EQ(tokens_at({.tokens = 2, .updated_at = 0, .rate = 0, .burst = 10}, 5000), 2);
  EXPECT_DOUBLE_EQ(
      tokens_at({.tokens = std::numeric_limits<double>::quiet_NaN(), .rate = 1, .burst = 4}, 1), 4);
  EXPECT_DOUBLE_EQ(tokens_at({.tokens = 5, .updated_at = 0, .rate = 1, .burst = 0}, 10), 1);
}

TEST(PersistedBucket, TakesWholeTokensAtMostWhatWasAsked) {
  const persisted_bucket bucket{.tokens = 3.5, .updated_at = 1000, .rate = 2, .burst = 10};
  auto take = take_tokens(bucket, 2, 1000);
  EXPECT_DOUBLE_EQ(take.taken, 2);
  EXPECT_DOUBLE_EQ(take.left, 1.5);
  take = take_tokens(bucket, 9, 1001);  // 5.5 there: 5 whole ones
  EXPECT_DOUBLE_EQ(take.taken, 5);
  EXPECT_DOUBLE_EQ(take.left, 0.5);
  take = take_tokens(bucket, 1.2, 1000);  // a fraction asked is rounded up
  EXPECT_DOUBLE_EQ(take.taken, 2);
}

TEST(PersistedBucket, AReserveTakesTheNearRefillAheadAsADebt) {
  const persisted_bucket full_at_one{.tokens = 1, .updated_at = 1000, .rate = 50, .burst = 1};
  auto take = take_tokens(full_at_one, 10, 1000, 0.05);  // 1 there, 2.5 more within 50 ms
  EXPECT_DOUBLE_EQ(take.taken, 3);
  EXPECT_DOUBLE_EQ(take.left, -2);
  // The debt is paid off by refill: 40 ms later the bucket is at 0, and may reserve again.
  take = take_tokens({.tokens = -2, .updated_at = 1000, .rate = 50, .burst = 1}, 10, 1000.04, 0.05);
  EXPECT_DOUBLE_EQ(take.taken, 2);
  take = take_tokens({.tokens = -3, .updated_at = 1000, .rate = 50, .burst = 1}, 10, 1000, 0.05);
  EXPECT_DOUBLE_EQ(take.taken, 0);
  EXPECT_DOUBLE_EQ(take.next_token_at, 1000.03);  // when -3 + 50 t + 2.5 reaches 1
}

// A drainer read its clock at 1000.0, then waited 300 ms for the write lock while another
// drainer took the bucket's last token at 1000.3. Stamped 1000.0, the bucket would refill
// 1000.0-1000.3 a second time for the next reader; the stamp stays at 1000.3.
TEST(PersistedBucket, AWriteNeverStampsTheBucketEarlierThanItWas) {
  const persisted_bucket written_meanwhile{
      .tokens = 0, .updated_at = 1000.3, .rate = 100, .burst = 100};
  const auto take = take_tokens(written_meanwhile, 5, 1000.0);
  EXPECT_DOUBLE_EQ(take.taken, 0);
  const double stamp = stamp_for_write(written_meanwhile, 1000.0);
  EXPECT_DOUBLE_EQ(stamp, 1000.3);
  // What the next reader finds at 1000.4: 10 tokens of refill since the last take, not 40.
  const persisted_bucket after{.tokens = take.left, .updated_at = stamp, .rate = 100, .burst = 100};
  EXPECT_NEAR(tokens_at(after, 1000.4), 10, 1e-9);
  EXPECT_DOUBLE_EQ(stamp_for_write(written_meanwhile, 1001), 1001);
  EXPECT_DOUBLE_EQ(stamp_for_write({.updated_at = std::numeric_limits<double>::quiet_NaN()}, 1001),
                   1001);
}

TEST(PersistedBucket, AnEmptyBucketSaysWhenItsNextWholeTokenIsDue) {
  auto take = take_tokens({.tokens = 0.25, .updated_at = 1000, .rate = 0.5, .burst = 2}, 3, 1000);
  EXPECT_DOUBLE_EQ(take.taken, 0);
  EXPECT_DOUBLE_EQ(take.left, 0.25);
  EXPECT_DOUBLE_EQ(take.next_token_at, 1001.5);
  take = take_tokens({.tokens = -1, .updated_at = 1000, .rate = 1, .burst = 2}, 1, 1000);
  EXPECT_DOUBLE_EQ(take.next_token_at, 1002);
  take = take_tokens({.tokens = 0, .updated_at = 1000, .rate = 0, .burst = 2}, 1, 1000);
  EXPECT_DOUBLE_EQ(take.next_token_at, 0);  // paused: never
}

TEST(PersistedBucket, UnspentTokensGoBackWithoutPassingCapacity) {
  const persisted_bucket bucket{.tokens = 1, .updated_at = 1000, .rate = 1, .burst = 5};
  EXPECT_DOUBLE_EQ(give_back(bucket, 2, 1001), 4);
  EXPECT_DOUBLE_EQ(give_back(bucket, 9, 1001), 5);
  EXPECT_DOUBLE_EQ(give_back(bucket, -3, 1001), 2);
}

TEST(PersistedBucket, ABucketNoDrainerCouldHaveWrittenIsReadAsStampedNow) {
  // Another host's clock an hour ahead: read as stamped now, its tokens kept.
  auto fixed = repaired({.tokens = 2, .updated_at = 4600, .rate = 10, .burst = 5}, 1000);
  EXPECT_DOUBLE_EQ(fixed.bucket.updated_at, 1000);
  EXPECT_DOUBLE_EQ(fixed.bucket.tokens, 2);
  EXPECT_EQ(fixed.why, "stamped 3600 s in the future");
  // A debt deeper than a burst and a minute of refill is no drainer's reserve.
  fixed = repaired({.tokens = -1e6, .updated_at = 990, .rate = 10, .burst = 5}, 1000);
  EXPECT_DOUBLE_EQ(fixed.bucket.tokens, 0);
  EXPECT_DOUBLE_EQ(fixed.bucket.updated_at, 990);
  EXPECT_EQ(fixed.why, "a debt of 1000000 tokens, deeper than any drainer reserves");
  fixed =
      repaired({.tokens = std::nan(""), .updated_at = std::nan(""), .rate = 1, .burst = 3}, 1000);
  EXPECT_DOUBLE_EQ(fixed.bucket.tokens, 3);
  EXPECT_DOUBLE_EQ(fixed.bucket.updated_at, 1000);
  EXPECT_EQ(fixed.why, "its stamp is not a number; its token count is not a number");
}

TEST(PersistedBucket, WhatDrainersWriteIsLeftAlone) {
  // A clock a few seconds ahead, and the debt of a reserve of refill ahead, are normal.
  for (const persisted_bucket& bucket :
       {persisted_bucket{.tokens = 1, .updated_at = 1004, .rate = 10, .burst = 5},
        persisted_bucket{.tokens = -605, .updated_at = 1000, .rate = 10, .burst = 5},
        persisted_bucket{.tokens = 5, .updated_at = 0, .rate = 0, .burst = 5}}) {
    const auto fixed = repaired(bucket, 1000);
    EXPECT_EQ(fixed.why, "");
    EXPECT_DOUBLE_EQ(fixed.bucket.tokens, bucket.tokens);
    EXPECT_DOUBLE_EQ(fixed.bucket.updated_at, bucket.updated_at);
  }
}

}  // namespace
}  // namespace surge::proto
