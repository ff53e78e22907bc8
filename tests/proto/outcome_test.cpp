#include "proto/outcome.hpp"

#include <gtest/gtest.h>

#include <limits>
#include <set>
#include <string>

namespace surge::proto {
namespace {

using namespace std::chrono_literals;
using std::chrono::milliseconds;

const retry_policy policy;  // 1 s base, 1 h cap, 8 attempts, 24 h window
constexpr double u = 0.37;
constexpr std::chrono::duration<double> young{10.0};

attempt_result http(int status, std::optional<std::chrono::seconds> retry_after = {}) {
  return {status, transport_error::none, retry_after};
}

attempt_result failed(transport_error error) { return {0, error, {}}; }

void expect_counted_retry(const decision& d, int attempts_before, std::string_view reason) {
  EXPECT_EQ(d.what, verdict::retry);
  EXPECT_TRUE(d.counts_attempt);
  EXPECT_EQ(d.delay, policy.backoff(attempts_before + 1, u));
  EXPECT_FALSE(d.pause_subscriber.has_value());
  EXPECT_FALSE(d.deactivate_subscriber);
  EXPECT_EQ(d.reason, reason);
}

TEST(outcome, transport_error_names_are_stable) {
  const std::pair<transport_error, std::string_view> names[] = {
      {transport_error::none, "none"},
      {transport_error::resolve, "resolve"},
      {transport_error::refused_target, "refused_target"},
      {transport_error::connect, "connect"},
      {transport_error::connect_timeout, "connect_timeout"},
      {transport_error::tls, "tls"},
      {transport_error::send, "send"},
      {transport_error::reset_before_response, "reset_before_response"},
      {transport_error::receive, "receive"},
      {transport_error::timeout, "timeout"},
      {transport_error::protocol, "protocol"}};
  for (const auto& [error, name] : names) EXPECT_EQ(to_string(error), name);
}

TEST(outcome, classify_status) {
  const std::pair<int, status_class> table[] = {
      {200, status_class::success},      {204, status_class::success},
      {299, status_class::success},      {300, status_class::redirect},
      {301, status_class::redirect},     {399, status_class::redirect},
      {400, status_class::client_error}, {404, status_class::client_error},
      {409, status_class::client_error}, {411, status_class::client_error},
      {428, status_class::client_error}, {430, status_class::client_error},
      {499, status_class::client_error}, {410, status_class::gone},
      {429, status_class::rate_limited}, {500, status_class::server_error},
      {502, status_class::server_error}, {504, status_class::server_error},
      {599, status_class::server_error}, {503, status_class::unavailable},
      {0, status_class::invalid},        {-200, status_class::invalid},
      {99, status_class::invalid},       {100, status_class::invalid},
      {101, status_class::invalid},      {199, status_class::invalid},
      {600, status_class::invalid},      {999, status_class::invalid},
      {2000, status_class::invalid}};
  for (const auto& [status, expected] : table) {
    EXPECT_EQ(classify_status(status), expected) << status;
  }
}

TEST(outcome, success_is_done) {
  for (int status : {200, 201, 204, 299}) {
    const decision d = decide(http(status, 5s), 3, young, policy, u);
    EXPECT_EQ(d.what, verdict::done);
    EXPECT_TRUE(d.counts_attempt);
    EXPECT_EQ(d.delay, 0ms);
    EXPECT_FALSE(d.pause_subscriber.has_value());
    EXPECT_FALSE(d.deactivate_subscriber);
    EXPECT_TRUE(d.reason.empty());
  }
}

TEST(outcome, gone_dead_letters_and_deactivates) {
  const decision d = decide(http(410), 0, young, policy, u);
  EXPECT_EQ(d.what, verdict::dead);
  EXPECT_TRUE(d.deactivate_subscriber);
  EXPECT_EQ(d.reason, "410 gone");
  EXPECT_FALSE(d.pause_subscriber.has_value());
}

TEST(outcome, rate_limited_without_retry_after_backs_off_and_pauses) {
  for (int before : {0, 1, 5, 7, 20}) {
    const decision d = decide(http(429), before, young, policy, u);
    const milliseconds expected = policy.backoff(std::max(before, 1), u);
    EXPECT_EQ(d.what, verdict::retry) << before;  // even past the attempt limit
    EXPECT_FALSE(d.counts_attempt);
    EXPECT_EQ(d.delay, expected);
    EXPECT_EQ(d.pause_subscriber, expected);
    EXPECT_FALSE(d.deactivate_subscriber);
    EXPECT_EQ(d.reason, "http 429");
  }
}

TEST(outcome, unpaid_rate_limits_count_as_attempts_past_the_cap) {
  const int cap = policy.config().max_unpaid_rate_limits;
  ASSERT_GT(cap, 0);
  // Below the cap: free, as always.
  const decision free = decide(http(429), 2, young, policy, u, cap - 1);
  EXPECT_FALSE(free.counts_attempt);
  EXPECT_EQ(free.what, verdict::retry);
  // At the cap: an ordinary failure that still pauses the subscriber.
  const decision paid = decide(http(429), 2, young, policy, u, cap);
  EXPECT_TRUE(paid.counts_attempt);
  EXPECT_EQ(paid.what, verdict::retry);
  EXPECT_EQ(paid.delay, policy.backoff(3, u));
  EXPECT_EQ(paid.pause_subscriber, paid.delay);
  EXPECT_EQ(paid.reason, "http 429");
  // So the attempt limit ends it.
  const decision last = decide(http(429), 7, young, policy, u, cap + 100);
  EXPECT_EQ(last.what, verdict::dead);
  EXPECT_EQ(last.reason, "attempt limit");
  EXPECT_TRUE(last.counts_attempt);
  EXPECT_TRUE(last.pause_subscriber.has_value());
  // A usable Retry-After keeps the 429 free however long the streak.
  const decision told = decide(http(429, 5s), 7, young, policy, u, cap + 100);
  EXPECT_FALSE(told.counts_attempt);
  EXPECT_EQ(told.what, verdict::retry);
  EXPECT_EQ(told.delay, 5s);
}

TEST(outcome, unpaid_rate_limit_streak) {
  EXPECT_EQ(next_unpaid_rate_limits(http(429), 0), 1);
  EXPECT_EQ(next_unpaid_rate_limits(http(429), 4), 5);
  EXPECT_EQ(next_unpaid_rate_limits(http(429), std::numeric_limits<int>::max()),
            std::numeric_limits<int>::max());
  // Retry-After says when: not unpaid; any other answer ends the streak.
  EXPECT_EQ(next_unpaid_rate_limits(http(429, 3s), 4), 0);
  EXPECT_EQ(next_unpaid_rate_limits(http(200), 4), 0);
  EXPECT_EQ(next_unpaid_rate_limits(http(500), 4), 0);
  // No answer says nothing about the partner's limiter.
  EXPECT_EQ(next_unpaid_rate_limits(failed(transport_error::timeout), 4), 4);
  EXPECT_EQ(next_unpaid_rate_limits({429, transport_error::receive, {}}, 4), 4);
}

TEST(outcome, rate_limited_honours_retry_after) {
  const decision d = decide(http(429, 30s), 2, young, policy, u);
  EXPECT_EQ(d.what, verdict::retry);
  EXPECT_FALSE(d.counts_attempt);
  EXPECT_EQ(d.delay, 30s);
  EXPECT_EQ(d.pause_subscriber, 30s);

  const decision zero = decide(http(429, 0s), 2, young, policy, u);
  EXPECT_EQ(zero.delay, 0ms);
  EXPECT_EQ(zero.pause_subscriber, 0ms);
}

TEST(outcome, rate_limited_dies_at_the_window_but_still_pauses) {
  const std::chrono::duration<double> old{24.0 * 3600 - 10};
  const decision d = decide(http(429, 11s), 0, old, policy, u);
  EXPECT_EQ(d.what, verdict::dead);
  EXPECT_FALSE(d.counts_attempt);
  EXPECT_EQ(d.reason, "retry window");
  EXPECT_EQ(d.pause_subscriber, 11s);
  EXPECT_EQ(decide(http(429, 10s), 0, old, policy, u).what, verdict::retry);
}

TEST(outcome, unavailable_with_retry_after_pauses_and_counts) {
  const decision d = decide(http(503, 120s), 2, young, policy, u);
  EXPECT_EQ(d.what, verdict::retry);
  EXPECT_TRUE(d.counts_attempt);
  EXPECT_EQ(d.delay, 120s);
  EXPECT_EQ(d.pause_subscriber, 120s);
  EXPECT_EQ(d.reason, "http 503");
}

TEST(outcome, unavailable_with_retry_after_still_has_limits) {
  const decision limit = decide(http(503, 5s), 7, young, policy, u);
  EXPECT_EQ(limit.what, verdict::dead);
  EXPECT_EQ(limit.reason, "attempt limit");
  EXPECT_EQ(limit.pause_subscriber, 5s);

  const decision window = decide(http(503, 1h), 0, std::chrono::hours(23) + 1s, policy, u);
  EXPECT_EQ(window.what, verdict::dead);
  EXPECT_EQ(window.reason, "retry window");
  EXPECT_EQ(window.pause_subscriber, 1h);
}

TEST(outcome, unavailable_without_retry_after_is_an_ordinary_failure) {
  expect_counted_retry(decide(http(503), 2, young, policy, u), 2, "http 503");
}

TEST(outcome, http_failures_back_off) {
  expect_counted_retry(decide(http(500), 0, young, policy, u), 0, "http 500");
  expect_counted_retry(decide(http(599), 3, young, policy, u), 3, "http 599");
  expect_counted_retry(decide(http(404), 1, young, policy, u), 1, "http 404");
  expect_counted_retry(decide(http(400), 1, young, policy, u), 1, "http 400");
  // Retry-After is only honoured on 429 and 503.
  expect_counted_retry(decide(http(500, 3s), 1, young, policy, u), 1, "http 500");
  expect_counted_retry(decide(http(301), 0, young, policy, u), 0, "http 301 redirect not followed");
  expect_counted_retry(decide(http(399), 0, young, policy, u), 0, "http 399 redirect not followed");
  expect_counted_retry(decide(http(0), 0, young, policy, u), 0, "invalid http status");
  expect_counted_retry(decide(http(101), 0, young, policy, u), 0, "invalid http status");
  expect_counted_retry(decide(http(700), 0, young, policy, u), 0, "invalid http status");
}

TEST(outcome, transport_failures_back_off_with_distinct_reasons) {
  std::set<std::string> reasons;
  for (auto error :
       {transport_error::resolve, transport_error::refused_target, transport_error::connect,
        transport_error::connect_timeout, transport_error::tls, transport_error::send,
        transport_error::reset_before_response, transport_error::receive, transport_error::timeout,
        transport_error::protocol}) {
    const decision d = decide(failed(error), 1, young, policy, u);
    EXPECT_EQ(d.what, verdict::retry) << to_string(error);
    EXPECT_TRUE(d.counts_attempt);
    EXPECT_EQ(d.delay, policy.backoff(2, u));
    EXPECT_FALSE(d.pause_subscriber.has_value());
    EXPECT_FALSE(d.reason.empty());
    reasons.emplace(d.reason);
  }
  EXPECT_EQ(reasons.size(), 10u);
  // A transport error wins over any status that may have been recorded.
  EXPECT_EQ(decide({200, transport_error::receive, {}}, 0, young, policy, u).what, verdict::retry);
  EXPECT_EQ(decide({429, transport_error::timeout, 5s}, 0, young, policy, u).reason,
            "attempt timed out");
}

TEST(outcome, attempt_limit) {
  EXPECT_EQ(decide(http(500), 6, young, policy, u).what, verdict::retry);  // 7th failure
  for (int before : {7, 8, 100, std::numeric_limits<int>::max()}) {
    const decision d = decide(http(500), before, young, policy, u);
    EXPECT_EQ(d.what, verdict::dead) << before;
    EXPECT_TRUE(d.counts_attempt);
    EXPECT_EQ(d.reason, "attempt limit");
    EXPECT_EQ(d.delay, 0ms);
  }
  EXPECT_EQ(decide(failed(transport_error::tls), 7, young, policy, u).reason, "attempt limit");
  EXPECT_EQ(decide(http(302), 7, young, policy, u).reason, "attempt limit");
  // A negative count is read as zero.
  expect_counted_retry(decide(http(500), -4, young, policy, u), 0, "http 500");
  const retry_policy single({.max_attempts = 1});
  EXPECT_EQ(decide(http(500), 0, young, single, u).what, verdict::dead);
}

TEST(outcome, retry_window) {
  // 0.25 gives a whole number of seconds, so the sum at the edge is exact in double.
  const auto delay = policy.backoff(4, 0.25);
  ASSERT_EQ(delay, 5s);
  const std::chrono::duration<double> edge = std::chrono::hours(24) - delay;
  EXPECT_EQ(decide(http(500), 3, edge, policy, 0.25).what, verdict::retry);
  const decision d = decide(http(500), 3, edge + 1ms, policy, 0.25);
  EXPECT_EQ(d.what, verdict::dead);
  EXPECT_EQ(d.reason, "retry window");
  EXPECT_TRUE(d.counts_attempt);
  EXPECT_EQ(decide(failed(transport_error::connect), 0, std::chrono::hours(30), policy, u).reason,
            "retry window");
}

TEST(outcome, reasons_are_static_text) {
  const decision a = decide(http(502), 0, young, policy, u);
  const decision b = decide(http(502), 1, young, policy, 0.9);
  EXPECT_EQ(a.reason.data(), b.reason.data());
}

// What an answer says about the endpoint: the breaker and the adaptive pace read only this.
TEST(outcome, what_an_answer_says_about_the_endpoint) {
  struct row {
    int status;
    transport_error error;
    bool names_retry_after;
    bool delivered, pushback, unwell, alive;
  };
  const row rows[] = {
      {200, transport_error::none, false, true, false, false, true},
      {204, transport_error::none, false, true, false, false, true},
      {301, transport_error::none, false, false, false, false, true},
      {404, transport_error::none, false, false, false, false, true},
      {410, transport_error::none, false, false, false, false, true},
      {429, transport_error::none, false, false, true, false, true},
      {429, transport_error::none, true, false, true, false, true},
      {500, transport_error::none, false, false, false, true, false},
      {502, transport_error::none, true, false, false, true, false},
      // A 503 that says when to come back asks for less; without it, the endpoint is down.
      {503, transport_error::none, true, false, true, false, true},
      {503, transport_error::none, false, false, true, true, false},
      {600, transport_error::none, false, false, false, true, false},
      {0, transport_error::connect, false, false, false, true, false},
      {0, transport_error::timeout, false, false, false, true, false},
      // Our own policy refused the address: nothing is known of the endpoint.
      {0, transport_error::refused_target, false, false, false, false, false},
  };
  for (const auto& r : rows) {
    const auto reading = read_endpoint(r.status, r.error, r.names_retry_after);
    const auto where = std::to_string(r.status) + " " + std::string(to_string(r.error)) +
                       (r.names_retry_after ? " with Retry-After" : "");
    EXPECT_EQ(reading.delivered, r.delivered) << where;
    EXPECT_EQ(reading.pushback, r.pushback) << where;
    EXPECT_EQ(reading.unwell, r.unwell) << where;
    EXPECT_EQ(reading.alive, r.alive) << where;
  }
  EXPECT_TRUE(asks_to_slow_down(429));
  EXPECT_TRUE(asks_to_slow_down(503));
  EXPECT_FALSE(asks_to_slow_down(500));
  EXPECT_FALSE(asks_to_slow_down(200));
}

}  // namespace
}  // namespace surge::proto
