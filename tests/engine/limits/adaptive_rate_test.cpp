#include "engine/limits/adaptive_rate.hpp"

#include <gtest/gtest.h>

namespace surge::engine {
namespace {

using namespace std::chrono_literals;
const auto t0 = adaptive_rate::time_point{} + 100s;

TEST(AdaptiveRate, PushbackHalvesAtMostOncePerSpacing) {
  adaptive_rate rate(100.0);
  EXPECT_TRUE(rate.on_pushback(t0));
  EXPECT_DOUBLE_EQ(rate.effective(), 50.0);
  // The other in-flight requests' 429s arrive right after: no further cut.
  EXPECT_FALSE(rate.on_pushback(t0 + 10ms));
  EXPECT_DOUBLE_EQ(rate.effective(), 50.0);
  EXPECT_TRUE(rate.on_pushback(t0 + 1s));
  EXPECT_DOUBLE_EQ(rate.effective(), 25.0);
}

TEST(AdaptiveRate, NeverBelowTheFloorNorAboveTheConfiguredRate) {
  adaptive_rate rate(100.0);
  auto now = t0;
  for (int i = 0; i < 50; ++i, now += 1s) rate.on_pushback(now);
  EXPECT_DOUBLE_EQ(rate.effective(), 1.0);  // 1 % of configured
  for (int i = 0; i < 1000; ++i, now += 200ms) rate.on_success(now);
  EXPECT_DOUBLE_EQ(rate.effective(), 100.0);
  EXPECT_FALSE(rate.on_success(now + 1s)) << "nothing to recover";
}

TEST(AdaptiveRate, SuccessRecoversAdditively) {
  adaptive_rate rate(100.0, {.increase_per_second = 0.1});
  rate.on_pushback(t0);  // 50
  rate.on_success(t0 + 1s);
  EXPECT_NEAR(rate.effective(), 60.0, 1e-9);  // +10 % of configured per second
  rate.on_success(t0 + 3s);
  EXPECT_NEAR(rate.effective(), 80.0, 1e-9);
}

TEST(AdaptiveRate, ReconfigureKeepsAReductionBelowTheNewLimit) {
  adaptive_rate rate(100.0);
  rate.on_pushback(t0);  // 50
  rate.reconfigure(200.0);
  EXPECT_DOUBLE_EQ(rate.effective(), 50.0);
  rate.reconfigure(20.0);
  EXPECT_DOUBLE_EQ(rate.effective(), 20.0);
  adaptive_rate fresh(100.0);
  fresh.reconfigure(30.0);
  EXPECT_DOUBLE_EQ(fresh.effective(), 30.0);
}

}  // namespace
}  // namespace surge::engine
