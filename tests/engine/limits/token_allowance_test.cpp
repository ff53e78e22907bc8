#include "engine/limits/token_allowance.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "engine/limits/token_bucket.hpp"
#include "proto/persisted_bucket.hpp"

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

TEST(TokenAllowance, ARefundedTokenServesTheNextAttempt) {
  token_allowance allowance({.lease_seconds = 1.0, .ask_ahead_seconds = 0.05});
  ASSERT_EQ(allowance.ask(2, t0), 2);
  allowance.granted(2, t0, {});
  allowance.spend(t0);
  allowance.spend(t0);
  ASSERT_FALSE(allowance.has_token());
  allowance.refund();  // the second attempt never wrote
  EXPECT_TRUE(allowance.has_token());
  EXPECT_EQ(allowance.take_unspent(), 1);
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
  EXPECT_FALSE(allowance.asking());          // nothing was asked
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

// Beside another drainer of the same bucket, tokens held are tokens the partner may see on top
// of the other drainer's: only what can be sent at once is asked for, and nothing more while
// that is held. An answer that says the bucket is no longer shared restores the leases.
TEST(TokenAllowance, ASharedBucketIsAskedOnlyForWhatCanBeSentAtOnce) {
  token_allowance allowance({.lease_seconds = 1.0, .ask_ahead_seconds = 0.05});
  ASSERT_EQ(allowance.ask(100, t0, 7), 100);  // not known to be shared yet: a second's worth
  allowance.granted(2, t0, {}, true);
  EXPECT_TRUE(allowance.shared());
  EXPECT_FALSE(allowance.would_ask(100, t0, 2));  // holds what it can send
  EXPECT_FALSE(allowance.would_ask(100, t0, 0));  // nothing to send: nothing asked
  EXPECT_EQ(allowance.ask(100, t0, 5), 3);        // 5 sendable, 2 held
  allowance.granted(3, t0 + 10ms, {}, true);
  for (int i = 0; i < 5; ++i) allowance.spend(t0 + 10ms);
  EXPECT_FALSE(allowance.has_token());
  EXPECT_EQ(allowance.ask(100, t0 + 10ms, 1), 1);
  allowance.granted(1, t0 + 20ms, {}, false);
  EXPECT_FALSE(allowance.shared());
  allowance.spend(t0 + 20ms);
  EXPECT_EQ(allowance.ask(100, t0 + 20ms, 1), 100);
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

// A backlogged subscriber whose tokens come in leases from the persisted bucket, as on
// PostgreSQL or beside other drainers, on a simulated clock: each ask is answered by the bucket
// one storage round trip later, and the pump's own bucket gates every send. Over a minute it
// keeps the rate, and no window holds more than burst + rate * T.
struct leased_pace {
  double rate;
  int burst;
};

std::vector<double> backlogged_send_times(leased_pace pace, clock::duration round_trip) {
  constexpr double store_reserve_seconds = 0.05;  // storage's default token reserve
  const auto unix_seconds = [](clock::time_point at) {
    return std::chrono::duration<double>(at - t0).count();
  };
  proto::persisted_bucket stored{.tokens = static_cast<double>(pace.burst),
                                 .updated_at = 0,
                                 .rate = pace.rate,
                                 .burst = static_cast<double>(pace.burst)};
  token_bucket own(pace.rate, pace.burst, pace.burst, t0);
  token_allowance allowance;
  double asked = 0;
  double reserve_seconds = 0;
  clock::time_point answer_at = clock::time_point::max();
  std::vector<double> sent;
  for (auto now = t0; now < t0 + 60s; now += 1ms) {
    if (now >= answer_at) {
      const auto take = proto::take_tokens(stored, asked, unix_seconds(now),
                                           std::max(store_reserve_seconds, reserve_seconds));
      stored.tokens = take.left;
      stored.updated_at = unix_seconds(now);
      const auto next_token_in =
          take.next_token_at > 0
              ? std::chrono::duration_cast<clock::duration>(std::chrono::duration<double>(
                    std::max(0.0, take.next_token_at - unix_seconds(now))))
              : clock::duration::max();
      allowance.granted(take.taken, now, next_token_in);
      answer_at = clock::time_point::max();
    }
    if (const double want = allowance.ask(pace.rate, now); want > 0) {
      asked = want;
      reserve_seconds = allowance.ahead_seconds();
      answer_at = now + round_trip;
    }
    while (allowance.has_token() && own.try_take(now)) {
      allowance.spend(now);
      sent.push_back(unix_seconds(now));
    }
  }
  return sent;
}

TEST(TokenAllowance, ABackloggedSubscriberKeepsItsRateThroughLeasesAndStaysWithinItsLimit) {
  for (const auto pace :
       {leased_pace{20, 5}, leased_pace{50, 1}, leased_pace{2.5, 3}, leased_pace{100, 20}}) {
    for (const auto round_trip : {2ms, 20ms, 80ms}) {
      const auto sent = backlogged_send_times(pace, round_trip);
      const std::string label = std::to_string(pace.rate) + "/s, burst " +
                                std::to_string(pace.burst) + ", round trip " +
                                std::to_string(round_trip.count()) + " ms";
      ASSERT_GT(sent.size(), 2u) << label;
      for (double window : {0.1, 0.5, 1.0, 3.0}) {
        std::size_t first = 0;
        std::size_t most = 0;
        for (std::size_t last = 0; last < sent.size(); ++last) {
          while (sent[last] - sent[first] > window) ++first;
          most = std::max(most, last - first + 1);
        }
        EXPECT_LE(static_cast<double>(most), pace.burst + pace.rate * window + 1e-9)
            << label << ", window " << window << " s";
      }
      const double achieved =
          (static_cast<double>(sent.size()) - pace.burst) / (sent.back() - sent.front());
      EXPECT_GE(achieved, 0.98 * pace.rate) << label;
    }
  }
}

}  // namespace
}  // namespace surge::engine
