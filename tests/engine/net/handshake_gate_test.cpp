// Concurrent first connects to one origin on a simulated clock: one full handshake while the
// others wait for the session it brings; no waiting for an origin that gives none; a failed
// handshake lets the next connect try at once.
#include <gtest/gtest.h>

#include "engine/net/handshake_gate.hpp"

namespace surge::engine {
namespace {

using namespace std::chrono_literals;
using step = first_handshake_gate::step;
const first_handshake_gate::time_point t0{std::chrono::hours(1)};

TEST(FirstHandshakeGate, OneFullHandshakeWhileTheOthersWaitForItsSession) {
  first_handshake_gate gate(60s);
  const auto first = gate.on_connect(false, t0);
  EXPECT_EQ(first.what, step::full_for_all);
  EXPECT_EQ(gate.on_connect(false, t0).what, step::wait);
  EXPECT_EQ(gate.on_connect(false, t0 + 1ms).what, step::wait);
  EXPECT_FALSE(gate.wake_waiters());

  // Its ticket arrives with its first response: the waiters resume with it.
  gate.on_session_stored();
  EXPECT_TRUE(gate.wake_waiters());
  EXPECT_EQ(gate.on_connect(true, t0 + 200ms).what, step::resume);
  // The end of its exchange changes nothing more.
  gate.on_full_for_all_done(first.turn, true, t0 + 201ms);
  EXPECT_EQ(gate.on_connect(false, t0 + 300ms).what, step::full_for_all)
      << "sessions used up later: one connect again brings the next";
}

TEST(FirstHandshakeGate, AnOriginThatGivesNoSessionIsNotWaitedForUntilTheHoldEnds) {
  first_handshake_gate gate(60s);
  const auto first = gate.on_connect(false, t0);
  EXPECT_EQ(gate.on_connect(false, t0).what, step::wait);
  gate.on_full_for_all_done(first.turn, true, t0 + 200ms);  // first exchange over, no ticket
  EXPECT_TRUE(gate.wake_waiters());
  EXPECT_EQ(gate.on_connect(false, t0 + 200ms).what, step::full);
  EXPECT_EQ(gate.on_connect(false, t0 + 200ms + 59s).what, step::full);
  EXPECT_EQ(gate.on_connect(false, t0 + 200ms + 60s).what, step::full_for_all)
      << "after the hold the origin is given the chance to send tickets again";
}

TEST(FirstHandshakeGate, AFailedHandshakeLetsTheNextConnectTryAtOnce) {
  first_handshake_gate gate(60s);
  const auto first = gate.on_connect(false, t0);
  EXPECT_EQ(gate.on_connect(false, t0).what, step::wait);
  gate.on_full_for_all_done(first.turn, false, t0 + 10ms);
  EXPECT_TRUE(gate.wake_waiters());
  EXPECT_EQ(gate.on_connect(false, t0 + 10ms).what, step::full_for_all);
}

TEST(FirstHandshakeGate, AnOldTurnEndingDoesNotOpenALaterOnesWait) {
  first_handshake_gate gate(60s);
  const auto first = gate.on_connect(false, t0);
  gate.on_session_stored();
  const auto second = gate.on_connect(false, t0 + 1s);  // the sessions were used up
  ASSERT_EQ(second.what, step::full_for_all);
  gate.on_full_for_all_done(first.turn, true, t0 + 1s);
  EXPECT_FALSE(gate.wake_waiters());
  EXPECT_EQ(gate.on_connect(false, t0 + 1s).what, step::wait);
  EXPECT_EQ(gate.on_connect(false, t0 + 2s).what, step::wait) << "no hold was set by the old turn";
  gate.on_full_for_all_done(second.turn, true, t0 + 2s);
  EXPECT_EQ(gate.on_connect(false, t0 + 2s).what, step::full);
}

}  // namespace
}  // namespace surge::engine
