// The line at a subscriber's wire gate (engine/shard/wire_line.hpp): first come first served, one
// token per write, and it gives up rather than write after a stop, during a pause that outlasts
// the lease, or when the next token is due too late. On a simulated clock.
#include "engine/shard/wire_line.hpp"

#include <gtest/gtest.h>

#include <optional>
#include <utility>
#include <vector>

namespace surge::engine {
namespace {

using namespace std::chrono_literals;
using time_point = wire_line::time_point;

class WireLine : public ::testing::Test {
 protected:
  void make(double rate, double burst, double tokens) {
    wire.emplace(rate, burst, tokens, start);
    admission.emplace(rate, burst, tokens, start);
  }
  wire_line::gate_view gate() { return {*wire, *admission, paused_until, closed}; }
  std::optional<bool> arrive(std::uint32_t attempt, time_point give_up_at, time_point now,
                             bool fresh = false) {
    return line.arrive({attempt, give_up_at, fresh}, gate(), now);
  }
  // Advances the line at `now`, recording each verdict with the time it was given.
  time_point advance(time_point now) {
    return line.advance(gate(), now, [&](std::uint32_t attempt, bool go) {
      verdicts.push_back({attempt, go, now});
    });
  }
  // Runs the line as its core would: at each time it asks to be woken, until nobody waits.
  void run_until_empty(time_point now) {
    for (int steps = 0; steps < 1000 && !line.empty(); ++steps) now = advance(now);
  }

  struct verdict {
    std::uint32_t attempt;
    bool go;
    time_point at;
  };
  const time_point start = time_point{} + 1000s;
  std::optional<wire_gate> wire;
  std::optional<token_bucket> admission;
  time_point paused_until{};
  bool closed = false;
  wire_line line;
  std::vector<verdict> verdicts;
};

TEST_F(WireLine, WritesGoOutInArrivalOrderOneIntervalApart) {
  make(20.0, 1, 0);  // one token per 50 ms
  for (std::uint32_t i = 0; i < 3; ++i) EXPECT_EQ(arrive(i, start + 10s, start), std::nullopt);
  run_until_empty(start);
  ASSERT_EQ(verdicts.size(), 3u);
  for (std::uint32_t i = 0; i < 3; ++i) {
    EXPECT_EQ(verdicts[i].attempt, i);
    EXPECT_TRUE(verdicts[i].go);
  }
  // Never early (the gate is what the partner's limiter will judge).
  EXPECT_GE(verdicts[1].at - verdicts[0].at, 50ms);
  EXPECT_GE(verdicts[2].at - verdicts[1].at, 50ms);
  EXPECT_LT(verdicts[2].at - start, 200ms) << "and not much later either";
  EXPECT_TRUE(line.empty());
}

TEST_F(WireLine, AWriteThatWaitedLeavesTheAdmissionBucketNoFullerThanTheGate) {
  make(10.0, 1, 0);
  admission->reconfigure(10.0, 5, start);  // admits ahead of the gate
  EXPECT_EQ(arrive(0, start + 10s, start), std::nullopt);
  run_until_empty(start);
  ASSERT_EQ(verdicts.size(), 1u);
  EXPECT_LE(admission->tokens_at(verdicts[0].at), wire->tokens_at(verdicts[0].at) + 1e-9);
}

TEST_F(WireLine, AStopSendsNothingMore) {
  make(1.0, 1, 0);
  for (std::uint32_t i = 0; i < 3; ++i) EXPECT_EQ(arrive(i, start + 10s, start), std::nullopt);
  const auto wake = advance(start);
  EXPECT_GE(wake, start + 1s) << "the next token";
  EXPECT_LT(wake, start + 1s + 1us);
  closed = true;
  advance(start + 10ms);
  ASSERT_EQ(verdicts.size(), 3u);
  for (const auto& v : verdicts) {
    EXPECT_FALSE(v.go);
    EXPECT_EQ(v.at, start + 10ms) << "at once, not at the next token";
  }
  EXPECT_TRUE(line.empty());
}

TEST_F(WireLine, APauseLongerThanTheLeaseAllowsGivesUpAtOnce) {
  make(10.0, 5, 5);
  paused_until = start + 30s;
  EXPECT_EQ(arrive(0, start + 5s, start), std::optional<bool>(false));
  EXPECT_DOUBLE_EQ(wire->tokens_at(start), 5.0) << "a give-up takes no token";
}

TEST_F(WireLine, AShortPauseIsWaitedOut) {
  make(10.0, 5, 5);
  paused_until = start + 100ms;
  EXPECT_EQ(arrive(0, start + 5s, start), std::nullopt);
  EXPECT_EQ(advance(start), start + 100ms);
  EXPECT_TRUE(verdicts.empty());
  advance(start + 100ms);
  ASSERT_EQ(verdicts.size(), 1u);
  EXPECT_TRUE(verdicts[0].go);
}

TEST_F(WireLine, ATokenDueAfterTheGiveUpTimeIsNotWaitedFor) {
  make(0.1, 1, 0);  // the next token in 10 s
  EXPECT_EQ(arrive(0, start + 2s, start), std::optional<bool>(false)) << "nobody ahead: at once";
  make(0.1, 1, 0);
  paused_until = start + 1s;  // a short pause puts both in line
  EXPECT_EQ(arrive(1, start + 2s, start), std::nullopt);
  EXPECT_EQ(arrive(2, start + 2s, start), std::nullopt);
  paused_until = {};
  advance(start + 10ms);
  ASSERT_EQ(verdicts.size(), 2u);
  EXPECT_FALSE(verdicts[0].go);
  EXPECT_FALSE(verdicts[1].go);
  EXPECT_EQ(verdicts[1].at, start + 10ms) << "the line behind it does not wait either";
  EXPECT_TRUE(line.empty());
}

TEST_F(WireLine, OneBehindTheHeadGivesUpAtItsOwnTime) {
  make(0.5, 1, 0);  // the next token in 2 s
  EXPECT_EQ(arrive(0, start + 10s, start), std::nullopt);
  EXPECT_EQ(arrive(1, start + 1s, start), std::nullopt);
  EXPECT_EQ(advance(start), start + 1s) << "woken for the one behind";
  advance(start + 1s);
  ASSERT_EQ(verdicts.size(), 1u);
  EXPECT_EQ(verdicts[0].attempt, 1u);
  EXPECT_FALSE(verdicts[0].go);
  EXPECT_EQ(line.size(), 1u);
}

TEST_F(WireLine, WithNobodyAheadAndATokenTheWriteGoesWithoutWaiting) {
  make(20.0, 1, 1);
  EXPECT_EQ(arrive(0, start + 10s, start), std::optional<bool>(true));
  // The token is taken: the next write has to wait for the next one, 50 ms on.
  EXPECT_EQ(arrive(1, start + 10s, start), std::nullopt);
  const auto wake = advance(start);
  EXPECT_GE(wake, start + 50ms);
  EXPECT_LT(wake, start + 50ms + 1us);
  advance(wake);
  ASSERT_EQ(verdicts.size(), 1u);
  EXPECT_TRUE(verdicts[0].go);
}

TEST_F(WireLine, NoWriteGoesPastTheOnesWaitingInLine) {
  make(20.0, 5, 5);
  paused_until = start + 10ms;
  EXPECT_EQ(arrive(0, start + 10s, start), std::nullopt);
  paused_until = {};
  EXPECT_EQ(arrive(1, start + 10s, start), std::nullopt) << "one is ahead of it";
  EXPECT_DOUBLE_EQ(wire->tokens_at(start), 5.0) << "nothing taken for the one sent to wait";
  advance(start);
  ASSERT_EQ(verdicts.size(), 2u);
  EXPECT_EQ(verdicts[0].attempt, 0u);
  EXPECT_EQ(verdicts[1].attempt, 1u);
}

TEST_F(WireLine, WithoutWaitingItGivesUpWhenWaitingCouldNotHelp) {
  make(10.0, 5, 5);
  EXPECT_EQ(arrive(0, start, start), std::optional<bool>(false))
      << "the lease's give-up time has come";
  paused_until = start + 30s;
  EXPECT_EQ(arrive(0, start + 5s, start), std::optional<bool>(false))
      << "a pause outlasting the lease";
  paused_until = {};
  closed = true;
  EXPECT_EQ(arrive(0, start + 5s, start), std::optional<bool>(false));
  EXPECT_DOUBLE_EQ(wire->tokens_at(start), 5.0) << "a give-up takes no token";
  closed = false;

  make(0.1, 1, 0);  // the next token in 10 s
  EXPECT_EQ(arrive(0, start + 2s, start), std::optional<bool>(false));
  EXPECT_EQ(arrive(1, start + 20s, start), std::nullopt) << "worth waiting";
}

}  // namespace
}  // namespace surge::engine
