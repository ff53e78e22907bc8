// How a drain stops, on a simulated clock: the grace period, then the final write window, bound
// the whole stop; a repeated signal is one request, a second one exits.
#include "engine/stop_sequence.hpp"

#include <gtest/gtest.h>

namespace surge::engine {
namespace {

using namespace std::chrono_literals;
using action = stop_sequence::action;
const stop_sequence::time_point t0{std::chrono::hours(1)};

stop_sequence grace_2s() { return stop_sequence({.grace = 2s, .final_write_window = 1s}); }

TEST(StopSequence, TheGracePeriodThenTheFinalWriteWindowBoundTheStop) {
  auto stop = grace_2s();
  EXPECT_FALSE(stop.stopping());
  EXPECT_EQ(stop.next_deadline(), std::nullopt);
  EXPECT_EQ(stop.on_stop(t0, true), action::begin_stop);
  EXPECT_TRUE(stop.stopping());
  EXPECT_EQ(stop.next_deadline(), t0 + 2s);
  EXPECT_EQ(stop.on_timer(t0 + 1999ms), action::none) << "a timer that fired early";
  EXPECT_EQ(stop.on_timer(t0 + 2s), action::abandon_attempts);
  EXPECT_EQ(stop.next_deadline(), t0 + 3s);
  EXPECT_EQ(stop.on_timer(t0 + 3s), action::abandon_writes);
  EXPECT_EQ(stop.next_deadline(), std::nullopt) << "nothing is left to wait for";
  EXPECT_EQ(stop.on_timer(t0 + 10s), action::none);
}

TEST(StopSequence, ALateTimerStartsTheFinalWindowWhenItFires) {
  auto stop = grace_2s();
  stop.on_stop(t0, false);
  EXPECT_EQ(stop.on_timer(t0 + 5s), action::abandon_attempts);
  EXPECT_EQ(stop.next_deadline(), t0 + 6s);
}

TEST(StopSequence, FinishingInTimeLeavesNothingToAbandon) {
  auto stop = grace_2s();
  stop.on_stop(t0, false);
  stop.finished();
  EXPECT_EQ(stop.next_deadline(), std::nullopt);
  EXPECT_EQ(stop.on_timer(t0 + 2s), action::none);
}

TEST(StopSequence, OneSignalDeliveredTwiceIsOneStopRequest) {
  auto stop = grace_2s();
  EXPECT_EQ(stop.on_stop(t0, true), action::begin_stop);
  EXPECT_EQ(stop.on_stop(t0 + 1ms, true), action::ignore_repeat);
  EXPECT_EQ(stop.on_stop(t0 + 499ms, true), action::ignore_repeat);
  EXPECT_EQ(stop.next_deadline(), t0 + 2s) << "a repeat does not move the deadline";
}

TEST(StopSequence, ASecondSignalExitsAtOnce) {
  auto stop = grace_2s();
  stop.on_stop(t0, true);
  EXPECT_EQ(stop.on_stop(t0 + 500ms, true), action::exit_now);
}

TEST(StopSequence, ASignalAfterTheDrainStoppedItselfExitsUnlessItCameAtOnce) {
  auto drained = grace_2s();
  EXPECT_EQ(drained.on_stop(t0, false), action::begin_stop);
  EXPECT_EQ(drained.on_stop(t0 + 100ms, false), action::none) << "the drain's own second reason";
  EXPECT_EQ(drained.on_stop(t0 + 100ms, true), action::ignore_repeat);
  EXPECT_EQ(drained.on_stop(t0 + 3s, true), action::exit_now);
}

}  // namespace
}  // namespace surge::engine
