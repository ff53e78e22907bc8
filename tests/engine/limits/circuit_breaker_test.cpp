#include "engine/limits/circuit_breaker.hpp"

#include <gtest/gtest.h>

namespace surge::engine {
namespace {

using namespace std::chrono_literals;
const auto t0 = circuit_breaker::time_point{} + 100s;

TEST(CircuitBreaker, OpensAfterConsecutiveFailuresOnly) {
  circuit_breaker breaker(
      {.failure_threshold = 3, .base_cooldown = 1s, .max_cooldown = 8s, .persistent_cooldown = 4s});
  breaker.on_failure(t0);
  breaker.on_failure(t0);
  breaker.on_success();  // resets the streak
  breaker.on_failure(t0);
  breaker.on_failure(t0);
  EXPECT_TRUE(breaker.try_admit(t0));
  breaker.on_failure(t0);
  EXPECT_EQ(breaker.current(), circuit_breaker::state::open);
  EXPECT_TRUE(breaker.blocking());
  EXPECT_FALSE(breaker.try_admit(t0 + 999ms));
}

TEST(CircuitBreaker, OneProbePerCooldownGrowingToTheCap) {
  circuit_breaker breaker({.failure_threshold = 1, .base_cooldown = 1s, .max_cooldown = 4s});
  breaker.on_failure(t0);
  auto now = t0;
  for (auto expected : {1s, 2s, 4s, 4s}) {
    EXPECT_EQ(breaker.cooldown(), expected);
    EXPECT_FALSE(breaker.try_admit(now + expected - 1ms));
    now += expected;
    EXPECT_TRUE(breaker.try_admit(now));   // the probe
    EXPECT_FALSE(breaker.try_admit(now));  // nothing else while it is out
    EXPECT_EQ(breaker.current(), circuit_breaker::state::probing);
    breaker.on_failure(now);
  }
}

TEST(CircuitBreaker, AProbeThatWasNeverSentLeavesTheNextProbeDueAtOnce) {
  circuit_breaker breaker({.failure_threshold = 1, .base_cooldown = 1s, .max_cooldown = 4s});
  breaker.on_failure(t0);
  ASSERT_TRUE(breaker.try_admit(t0 + 1s));
  breaker.on_probe_unsent(t0 + 2s);
  EXPECT_EQ(breaker.current(), circuit_breaker::state::open);
  EXPECT_EQ(breaker.cooldown(), 1s);  // not a failed probe: no longer cool-down
  EXPECT_TRUE(breaker.try_admit(t0 + 2s));
  EXPECT_EQ(breaker.current(), circuit_breaker::state::probing);
}

TEST(CircuitBreaker, ASuccessfulProbeCloses) {
  circuit_breaker breaker({.failure_threshold = 1, .base_cooldown = 1s, .max_cooldown = 4s});
  breaker.on_failure(t0);
  ASSERT_TRUE(breaker.try_admit(t0 + 1s));
  breaker.on_success();
  EXPECT_EQ(breaker.current(), circuit_breaker::state::closed);
  EXPECT_FALSE(breaker.blocking());
  EXPECT_TRUE(breaker.try_admit(t0 + 1s));
  // And the next opening starts from the base cool-down again.
  breaker.on_failure(t0 + 2s);
  EXPECT_EQ(breaker.cooldown(), 1s);
}

TEST(CircuitBreaker, LateAnswersFromBeforeTheOpeningChangeNothing) {
  circuit_breaker breaker({.failure_threshold = 1, .base_cooldown = 1s, .max_cooldown = 4s});
  breaker.on_failure(t0);
  breaker.on_success();    // answered after the circuit opened, sent before
  breaker.on_failure(t0);  // likewise
  EXPECT_EQ(breaker.current(), circuit_breaker::state::open);
  EXPECT_EQ(breaker.cooldown(), 1s);
  EXPECT_EQ(breaker.next_probe_at(), t0 + 1s);
}

}  // namespace
}  // namespace surge::engine
