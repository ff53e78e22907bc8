#include "engine/limits/token_allowance.hpp"

#include <gtest/gtest.h>

namespace surge::engine {
namespace {

using clock = token_allowance::clock;
using namespace std::chrono_literals;

const clock::time_point t0{std::chrono::seconds(1000)};

TEST(TokenAllowance, AsksForAboutASecondOfRefillOnceAndSpendsOnlyWhatWasGranted) {
  token_allowance allowance({.lease_seconds = 1.0, .ask_ahead_seconds = 0.05});
  EXPECT_FALSE(allowance.has_token());
  EXPECT_EQ(allowance.wait(), clock::duration::max());
  EXPECT_EQ(allowance.ask(20, t0), 20);
  EXPECT_TRUE(allowance.asking());
  EXPECT_EQ(allowance.ask(20, t0), 0);  // one ask at a time
  allowance.granted(3, t0, {});         // the bucket had 3
  EXPECT_FALSE(allowance.asking());
  for (int i = 0; i < 3; ++i) {
    ASSERT_TRUE(allowance.has_token());
    EXPECT_EQ(allowance.wait(), clock::duration::zero());
    allowance.spend(t0);
  }
  EXPECT_FALSE(allowance.has_token());
}

TEST(TokenAllowance, AsksAheadOnlyOnceLessThanTheRoundTripsRefillIsLeft) {
  token_allowance allowance({.lease_seconds = 1.0, .ask_ahead_seconds = 0.05});
  ASSERT_EQ(allowance.ask(200, t0), 200);
  allowance.granted(200, t0, {});
  EXPECT_EQ(allowance.ask(200, t0), 0);  // 200 left: 10 is the low water
  for (int i = 0; i < 190; ++i) allowance.spend(t0);
  EXPECT_EQ(allowance.ask(200, t0), 0);  // 10 left: not below yet
  allowance.spend(t0);
  EXPECT_EQ(allowance.ask(200, t0), 191);  // 9 left: tops up to a second's worth
}

TEST(TokenAllowance, WouldAskSaysWhatAskWouldDoWithoutAsking) {
  token_allowance allowance({.lease_seconds = 1.0, .ask_ahead_seconds = 0.05});
  EXPECT_TRUE(allowance.would_ask(200, t0));
  EXPECT_FALSE(allowance.asking());  // nothing was asked
  EXPECT_FALSE(allowance.would_ask(0, t0));  // a paused rate
  ASSERT_EQ(allowance.ask(200, t0), 200);
  EXPECT_FALSE(allowance.would_ask(200, t0));  // one ask at a time
  allowance.granted(200, t0, {});
  EXPECT_FALSE(allowance.would_ask(200, t0));  // 200 left, above the low water
  for (int i = 0; i < 191; ++i) allowance.spend(t0);
  EXPECT_TRUE(allowance.would_ask(200, t0));
  EXPECT_GT(allowance.ask(200, t0), 0);  // and ask() agrees
  allowance.granted(0, t0, 400ms);       // an empty bucket: not before its next token
  EXPECT_FALSE(allowance.would_ask(200, t0 + 399ms));
  EXPECT_EQ(allowance.ask(200, t0 + 399ms), 0);
  EXPECT_TRUE(allowance.would_ask(200, t0 + 400ms));
}

TEST(TokenAllowance, AnEmptyBucketIsNotAskedAgainBeforeItsNextToken) {
  token_allowance allowance;
  ASSERT_GT(allowance.ask(2, t0), 0);
  allowance.granted(0, t0, 400ms);
  EXPECT_EQ(allowance.ask(2, t0 + 399ms), 0);
  EXPECT_GT(allowance.ask(2, t0 + 400ms), 0);
  allowance.granted(0, t0 + 400ms, clock::duration::max());  // rate 0 in the table
  EXPECT_EQ(allowance.ask(2, t0 + 1s), 0);
  EXPECT_GT(allowance.ask(2, t0 + 1400ms), 0);
  // A next token far away (a tiny rate that may be raised meanwhile): asked again within the
  // recheck interval all the same.
  allowance.granted(0, t0 + 1400ms, std::chrono::hours(24));
  EXPECT_GT(allowance.ask(2, t0 + 2400ms), 0);
}

TEST(TokenAllowance, ATakeoverMayAskAtOnceDespiteTheLastAnswer) {
  token_allowance allowance;
  ASSERT_GT(allowance.ask(2, t0), 0);
  allowance.granted(0, t0, 1s);  // "not yours": another drain owned the subscriber
  EXPECT_EQ(allowance.ask(2, t0 + 100ms), 0);
  allowance.ask_now();
  EXPECT_GT(allowance.ask(2, t0 + 100ms), 0);
}

TEST(TokenAllowance, TokensUnusedForAWholeLeaseAreTakenBackOnce) {
  token_allowance allowance({.lease_seconds = 1.0});
  ASSERT_GT(allowance.ask(5, t0), 0);
  allowance.granted(5, t0, {});
  allowance.spend(t0 + 500ms);
  EXPECT_EQ(allowance.take_stale(t0 + 1400ms), 0);  // spent 0.9 s ago
  EXPECT_EQ(allowance.take_stale(t0 + 1500ms), 4);
  EXPECT_EQ(allowance.take_stale(t0 + 9s), 0);
  EXPECT_FALSE(allowance.has_token());
}

TEST(TokenAllowance, APausedRateAsksNothingAndAnUnansweredAskCanBeMadeAgain) {
  token_allowance allowance;
  EXPECT_EQ(allowance.ask(0, t0), 0);
  ASSERT_GT(allowance.ask(1, t0), 0);
  allowance.unanswered();
  EXPECT_EQ(allowance.ask(1, t0), 1);
}

TEST(TokenAllowance, WhatIsLeftIsTakenOnceToGoBack) {
  token_allowance allowance;
  ASSERT_GT(allowance.ask(5, t0), 0);
  allowance.granted(5, t0, {});
  allowance.spend(t0);
  EXPECT_EQ(allowance.take_unspent(), 4);
  EXPECT_EQ(allowance.take_unspent(), 0);
  EXPECT_FALSE(allowance.has_token());
}

}  // namespace
}  // namespace surge::engine
