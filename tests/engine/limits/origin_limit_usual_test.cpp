// An origin's usual latency (engine/limits/origin_limit.hpp): a partner whose answers vary
// widely from one request to the next is judged against its usual latency, measured on
// requests started with few in flight, not against its fastest answer.
#include "engine/limits/origin_limit.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <utility>
#include <vector>

namespace surge::engine {
namespace {

using namespace std::chrono_literals;
using clock = origin_limit::clock;

// The defaults (usual latency: 16 requests started with fewer than 8 in flight, 4 answers at
// least), with 1 ms of slack.
origin_limit_config config() {
  origin_limit_config defaults;
  defaults.latency_slack = 1ms;
  return defaults;
}

// The usual latency of a sample: its mean plus two standard errors, to the microsecond.
std::chrono::microseconds usual_of(const std::vector<double>& milliseconds) {
  const double n = static_cast<double>(milliseconds.size());
  double sum = 0, squares = 0;
  for (const double ms : milliseconds) {
    sum += ms;
    squares += ms * ms;
  }
  const double mean = sum / n;
  const double spread = std::sqrt((squares - n * mean * mean) / (n - 1) / n);
  return std::chrono::microseconds(std::llround((mean + 2 * spread) * 1000));
}

// To the microsecond: the mean and its margin are computed in floating point.
long long in_microseconds(clock::duration d) {
  return std::chrono::round<std::chrono::microseconds>(d).count();
}

// Starts `count` exchanges at `at`, to answer later.
std::vector<origin_limit::ticket> start(origin_limit& limit, int count, clock::time_point at) {
  std::vector<origin_limit::ticket> started;
  for (int i = 0; i < count; ++i) started.push_back(limit.on_start(at));
  return started;
}

// Answers each of `started` after `latency`, at `at`.
void answer_all(origin_limit& limit, const std::vector<origin_limit::ticket>& started,
                clock::duration latency, clock::time_point at) {
  for (const auto& ticket : started) {
    limit.on_latency(latency, at, ticket);
    limit.on_end(ticket);
  }
}

// Starts `latencies.size()` exchanges at `at` and answers each after its latency, in the order
// they end: the fast ones first.
void exchange(origin_limit& limit, clock::time_point at,
              const std::vector<clock::duration>& latencies) {
  std::vector<std::pair<clock::duration, origin_limit::ticket>> started;
  for (const auto latency : latencies) started.emplace_back(latency, limit.on_start(at));
  std::sort(started.begin(), started.end(),
            [](const auto& a, const auto& b) { return a.first < b.first; });
  for (const auto& [latency, ticket] : started) {
    limit.on_latency(latency, at + latency, ticket);
    limit.on_end(ticket);
  }
}

TEST(OriginLimitUsualLatency, IsTheMeanOfRequestsStartedWithFewInFlight) {
  const auto now = clock::time_point{} + 1000s;
  origin_limit limit(config(), now);
  exchange(limit, now, {200ms, 200ms, 200ms, 200ms});
  EXPECT_NEAR(in_microseconds(limit.usual_latency()), 200'000, 1) << "answers alike: the mean";
}

TEST(OriginLimitUsualLatency, AWidelyVaryingPartnerIsJudgedByItsUsualLatencyNotItsBest) {
  const auto now = clock::time_point{} + 1000s;
  origin_limit limit(config(), now);
  exchange(limit, now, {50ms, 500ms, 50ms, 500ms, 50ms, 500ms, 50ms, 500ms});
  EXPECT_EQ(limit.best_latency(), 50ms);
  // 275 ms, and two standard errors of 8 answers 50 ms and 500 ms by turns, 170 ms more.
  const auto usual = usual_of({50, 500, 50, 500, 50, 500, 50, 500});
  EXPECT_NEAR(in_microseconds(limit.usual_latency()), usual.count(), 1);
  EXPECT_NEAR(usual.count(), 445'084, 1);
  // 2 x 445 ms: above 2 x 50 ms + 1 ms, so the usual latency is the measure, and a window of
  // such answers, 275 ms on average, does not shrink the limit.
  EXPECT_NEAR(in_microseconds(limit.acceptable_latency()), 2 * usual.count(), 1);
  auto at = now + 1s;
  for (int i = 0; i < 10; ++i) {
    at += 10ms;
    limit.note_blocked();
    limit.on_latency(i % 2 ? 500ms : 50ms, at);
  }
  EXPECT_GT(limit.limit(), 4);
}

// At an origin answering in a fraction of a millisecond, the slack over the best latency is
// what lets requests wait (origin_limit_test.cpp); the usual latency leaves it as it was.
TEST(OriginLimitUsualLatency, AtAFastOriginTheBestLatencyAndTheSlackStillDecide) {
  const auto now = clock::time_point{} + 1000s;
  origin_limit limit(config(), now);
  exchange(limit, now, {100us, 300us, 200us, 200us});
  EXPECT_LT(limit.usual_latency(), 500us);
  EXPECT_EQ(limit.acceptable_latency(), 1200us);  // 2 x 100 us + 1 ms
}

// Two hundred origins starting at once on a busy CPU: an origin's first requests wait behind
// the others' in this process, so its sample measures that queue. Once the origin answers
// faster, its sample's fastest answer reads as queued, and the sample has no say.
TEST(OriginLimitUsualLatency, ASampleThatQueuedInThisProcessHasNoSayOnceTheOriginAnswersFaster) {
  const auto now = clock::time_point{} + 1000s;
  origin_limit limit(config(), now);
  exchange(limit, now, {20ms, 30ms, 40ms, 30ms});
  EXPECT_GT(limit.acceptable_latency(), 41ms) << "the sample is all it knows so far";
  limit.on_latency(100us, now + 1s);
  EXPECT_EQ(limit.acceptable_latency(), 1200us);  // 2 x 100 us + 1 ms
}

// The sample that measured a queue is taken again from the next requests, even with many in
// flight (subscribers that may each keep one out can hold an origin there for good), and the
// retake is judged by the same rule: here its fastest answer is the partner's best, so the
// partner is judged by its usual latency again.
TEST(OriginLimitUsualLatency, ASampleThatMeasuredAQueueIsTakenAgainWhateverIsInFlight) {
  const auto now = clock::time_point{} + 1000s;
  origin_limit limit(config(), now);
  limit.on_latency(50ms, now);
  const auto queued = start(limit, 8, now);  // the sample, started with fewer than 8 in flight
  const auto held = start(limit, 8, now + 100ms);  // 8 in flight from now on
  answer_all(limit, queued, 450ms, now + 450ms);
  ASSERT_FALSE(limit.judged_by_usual()) << "its fastest answer, 450 ms, says it queued";
  // Before `held` is overdue (10 x the best latency after it started), so it counts.
  exchange(limit, now + 500ms, {50ms, 500ms, 50ms, 500ms});
  EXPECT_TRUE(limit.judged_by_usual());
  EXPECT_NEAR(in_microseconds(limit.usual_latency()), (usual_of({50, 500, 50, 500})).count(), 1)
      << "the retake's mean, not the queue's";
  answer_all(limit, held, 500ms, now + 2s);
}

// Now and then a sample of a partner answering in 50 and 500 ms by turns comes out low: here 7
// fast answers of 8. Judged by it alone, the partner's 500 ms answers would read as queued;
// the higher of the last two samples holds until a second sample says the same.
TEST(OriginLimitUsualLatency, OneUnluckySampleDoesNotLowerItAlone) {
  const auto now = clock::time_point{} + 1000s;
  origin_limit limit(config(), now);
  const std::vector<clock::duration> even{50ms, 500ms, 50ms, 500ms, 50ms, 500ms, 50ms, 500ms};
  const std::vector<clock::duration> unlucky{500ms, 50ms, 50ms, 50ms, 50ms, 50ms, 50ms, 50ms};
  exchange(limit, now, even);  // 8 members: each started with fewer than 8 in flight
  const auto usual = limit.usual_latency();
  EXPECT_GT(limit.acceptable_latency(), 500ms);
  exchange(limit, now + 1s, unlucky);
  EXPECT_EQ(limit.usual_latency(), usual) << "one low sample";
  EXPECT_GT(limit.acceptable_latency(), 500ms);
  exchange(limit, now + 2s, unlucky);
  const auto low = usual_of({500, 50, 50, 50, 50, 50, 50, 50});
  EXPECT_NEAR(in_microseconds(limit.usual_latency()), low.count(), 1)
      << "two say the partner answers faster now";
  EXPECT_LT(limit.acceptable_latency(), 500ms);
}

TEST(OriginLimitUsualLatency, WaitsForTheSlowAnswersOfItsSample) {
  const auto now = clock::time_point{} + 1000s;
  origin_limit limit(config(), now);
  const auto slow = start(limit, 2, now);
  exchange(limit, now, {50ms, 50ms, 50ms, 50ms});
  // Four fast answers are enough answers, but two members are still out: a mean of the fast
  // ones alone would be the best latency again.
  EXPECT_EQ(limit.usual_latency(), clock::duration::zero());
  answer_all(limit, slow, 500ms, now + 500ms);
  EXPECT_NEAR(in_microseconds(limit.usual_latency()),
              (usual_of({50, 50, 50, 50, 500, 500})).count(), 1);
}

TEST(OriginLimitUsualLatency, RequestsStartedWithManyInFlightAreNotMeasured) {
  const auto now = clock::time_point{} + 1000s;
  origin_limit limit(config(), now);
  const auto busy = start(limit, 8, now);
  // With 8 in flight, these may wait behind our own requests: they say nothing of the usual.
  exchange(limit, now, {900ms, 900ms, 900ms, 900ms});
  EXPECT_EQ(limit.usual_latency(), clock::duration::zero());
  answer_all(limit, busy, 100ms, now + 100ms);
  EXPECT_NEAR(in_microseconds(limit.usual_latency()), 100'000, 1);
}

TEST(OriginLimitUsualLatency, ARequestThatHungCountsOnlyAsOverdue) {
  const auto now = clock::time_point{} + 1000s;
  origin_limit limit(config(), now);
  limit.on_latency(50ms, now);  // overdue after 10 x 50 ms
  exchange(limit, now, {50ms, 50ms, 50ms, 30s});
  EXPECT_NEAR(in_microseconds(limit.usual_latency()), (usual_of({50, 50, 50, 500})).count(), 1);
}

TEST(OriginLimitUsualLatency, FailuresWithoutAnAnswerAreLeftOut) {
  const auto now = clock::time_point{} + 1000s;
  origin_limit limit(config(), now);
  for (int i = 0; i < 3; ++i) limit.on_end(limit.on_start(now));  // refused, reset, ...
  EXPECT_EQ(limit.usual_latency(), clock::duration::zero()) << "too few answers yet";
  exchange(limit, now, {200ms, 200ms, 200ms, 200ms});
  EXPECT_NEAR(in_microseconds(limit.usual_latency()), 200'000, 1);
}

// The first answers of a partner that varies come fast, so the slow ones after them read as
// queueing and the limit shrinks before its usual latency is known. Learning it undoes those
// decreases, and the limit doubles again.
TEST(OriginLimitUsualLatency, LearningItUndoesTheDecreasesTheOldMeasureMade) {
  auto now = clock::time_point{} + 1000s;
  origin_limit limit(config(), now);
  const auto first = start(limit, 4, now);
  // Two fast members answer; then windows of fast answers from requests started with many in
  // flight let the limit double to 32.
  for (int i = 0; i < 2; ++i) {
    limit.on_latency(50ms, now + 50ms, first[i]);
    limit.on_end(first[i]);
  }
  for (int i = 0; i < 3; ++i) {
    now += 100ms;
    limit.note_blocked();
    limit.on_latency(50ms, now);
  }
  EXPECT_EQ(limit.limit(), 32);
  // Slow answers, judged against 2 x 50 ms + 1 ms: halved twice.
  for (int i = 0; i < 2; ++i) {
    now += 100ms;
    limit.on_latency(500ms, now);
  }
  EXPECT_EQ(limit.limit(), 8);
  // The sample's slow members answer: 275 ms on average, and its margin.
  for (int i = 2; i < 4; ++i) {
    limit.on_latency(500ms, now, first[i]);
    limit.on_end(first[i]);
  }
  EXPECT_NEAR(in_microseconds(limit.acceptable_latency()),
              (2 * usual_of({50, 50, 500, 500})).count(), 1);
  EXPECT_EQ(limit.limit(), 32);
  now += 100ms;
  limit.note_blocked();
  limit.on_latency(500ms, now);
  EXPECT_EQ(limit.limit(), 64) << "doubling again";
}

}  // namespace
}  // namespace surge::engine
