#include "engine/limits/wire_gate.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <random>
#include <vector>

namespace surge::engine {
namespace {

using namespace std::chrono_literals;
using clock_type = wire_gate::time_point::clock;
using time_point = wire_gate::time_point;

const auto t0 = time_point{} + 1000s;

double seconds(wire_gate::duration d) { return std::chrono::duration<double>(d).count(); }

// Asks at `now`, and again at each announced time, until the gate lets the write through.
time_point pass_at(wire_gate& gate, time_point now, bool fresh_connection = false) {
  for (int asks = 0; asks < 5; ++asks) {
    const auto wait = gate.try_pass(now, fresh_connection);
    if (wait == wire_gate::duration::zero()) return now;
    EXPECT_NE(wait, wire_gate::duration::max());
    now += wait;
  }
  ADD_FAILURE() << "not through after five announced waits";
  return now;
}

// A sender with a backlog: writes whenever the gate allows, for `span`.
std::vector<time_point> backlog(wire_gate& gate, time_point from, std::chrono::seconds span,
                                bool fresh_connections = false) {
  std::vector<time_point> out;
  auto now = from;
  while (now < from + span) {
    now = pass_at(gate, now, fresh_connections);
    out.push_back(now);
  }
  return out;
}

// nginx's limit_req with nodelay (ngx_http_limit_req_module.c): a millisecond clock, excess in
// thousandths of a request, the first request of a key costs nothing, `burst` is the extra
// requests allowed at once (a partner publishing burst b configures b - 1).
class nginx_limit_req {
 public:
  nginx_limit_req(int rate_per_sec, int burst)
      : rate_(std::int64_t{rate_per_sec} * 1000), burst_(std::int64_t{burst} * 1000) {}

  bool admit(std::int64_t now_ms) {
    if (!seen_) {
      seen_ = true;
      last_ = now_ms;
      return true;
    }
    const std::int64_t ms = std::max<std::int64_t>(0, now_ms - last_);
    const std::int64_t excess = std::max<std::int64_t>(0, excess_ - rate_ * ms / 1000 + 1000);
    if (excess > burst_) return false;
    excess_ = excess;
    if (ms) last_ = now_ms;
    return true;
  }

 private:
  std::int64_t rate_;
  std::int64_t burst_;
  bool seen_ = false;
  std::int64_t last_ = 0;
  std::int64_t excess_ = 0;
};

// What the partner stamps: our write time plus a latency, truncated to its millisecond clock.
std::int64_t partner_ms(time_point written, wire_gate::duration latency,
                        wire_gate::duration phase) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(written - t0 + latency + phase)
      .count();
}

TEST(WireGate, TheBurstGoesAtOnceButForWhatTheMarginHoldsBack) {
  // 10/s, burst 5: the margin is 50 ms, so a write needs 1.5 tokens.
  wire_gate gate(10.0, 5, 5, t0);
  EXPECT_EQ(gate.margin(), 50ms);
  for (int i = 0; i < 4; ++i) EXPECT_EQ(gate.try_pass(t0), wire_gate::duration::zero());
  EXPECT_GT(gate.try_pass(t0), wire_gate::duration::zero());
  const auto fifth = pass_at(gate, t0);
  EXPECT_NEAR(seconds(fifth - t0), 0.050, 1e-6);
  // From here one interval apart, each a margin after its token was whole.
  const auto sixth = pass_at(gate, fifth);
  EXPECT_NEAR(seconds(sixth - t0), 0.150, 1e-6);
  EXPECT_NEAR(seconds(pass_at(gate, sixth) - t0), 0.250, 1e-6);
}

TEST(WireGate, InABacklogTheMarginIsPaidOnceAndTheRateKept) {
  for (int burst : {2, 5}) {
    wire_gate gate(20.0, burst, burst, t0);
    const auto sent = backlog(gate, t0, 10s, burst == 5);  // new connections change nothing
    ASSERT_GT(sent.size(), static_cast<std::size_t>(burst + 2));
    for (std::size_t i = burst + 1; i < sent.size(); ++i) {
      ASSERT_NEAR(seconds(sent[i] - sent[i - 1]), 0.050, 1e-6) << "write " << i;
    }
    // The burst and ten seconds of refill, less at most one write for the margin.
    EXPECT_GE(static_cast<double>(sent.size()), burst + 20.0 * 10 - 1) << "burst " << burst;
  }
}

TEST(WireGate, WithBurstOneOnlyTheGapAfterANewConnectionGrows) {
  wire_gate gate(10.0, 1, 1, t0);
  EXPECT_EQ(gate.margin(), 4ms);
  const auto first = pass_at(gate, t0, true);
  const auto second = pass_at(gate, first, false);
  const auto third = pass_at(gate, second, false);
  EXPECT_NEAR(seconds(second - first), 0.104, 1e-6);
  EXPECT_NEAR(seconds(third - second), 0.100, 1e-6);
}

TEST(WireGate, WithBurstOneAtLeast96PercentOfTheRateRemainsEvenIfEveryConnectionIsNew) {
  for (double rate : {0.5, 2.0, 20.0, 50.0, 1000.0}) {
    for (bool fresh : {false, true}) {
      wire_gate gate(rate, 1, 1, t0);
      EXPECT_LE(seconds(gate.margin()), 0.04 / rate + 1e-9);
      const auto sent = backlog(gate, t0, 60s, fresh);
      const double achieved =
          static_cast<double>(sent.size() - 1) / seconds(sent.back() - sent.front());
      EXPECT_GE(achieved, (fresh ? 0.96 : 0.999) * rate) << "rate " << rate;
      EXPECT_LE(achieved, rate) << "rate " << rate;
    }
  }
}

TEST(WireGate, WhatPassesAlwaysConformsToTheBareBucket) {
  std::mt19937_64 rng(11);
  std::uniform_real_distribution<double> rate_of(0.2, 200);
  std::uniform_int_distribution<int> burst_of(1, 6);
  std::exponential_distribution<double> pause_of(1.0);
  for (int round = 0; round < 50; ++round) {
    const double rate = rate_of(rng);
    const int burst = burst_of(rng);
    wire_gate gate(rate, burst, burst, t0);
    std::vector<time_point> sent;
    auto now = t0;
    while (sent.size() < 200) {
      // Writes arrive at random: sometimes at once, sometimes after the bucket refilled.
      now += std::chrono::duration_cast<wire_gate::duration>(
          std::chrono::duration<double>(pause_of(rng) / rate));
      const auto wait = gate.try_pass(now, std::bernoulli_distribution(0.3)(rng));
      if (wait == wire_gate::duration::zero()) sent.push_back(now);
    }
    for (std::size_t i = 0; i < sent.size(); ++i) {
      for (std::size_t j = i; j < sent.size(); ++j) {
        ASSERT_LE(static_cast<double>(j - i + 1), burst + rate * seconds(sent[j] - sent[i]) + 1e-6)
            << "rate " << rate << " burst " << burst;
      }
    }
  }
}

TEST(WireGate, NginxAtTheSameLimitRefusesNothingWhenItStampsTheBurstLate) {
  // The partner's view: each backlog's first request goes on a new connection and is stamped
  // late by up to the margin less a millisecond (accept(), a busy host), the others on time, at
  // any phase of its millisecond clock. A bare bucket (no margin) is refused under the same
  // conditions.
  std::mt19937_64 rng(5);
  for (int rate : {2, 5, 10, 20}) {
    for (int burst : {1, 2, 5}) {
      for (bool with_margin : {true, false}) {
        wire_gate gate(rate, burst, burst, t0);
        token_bucket bare(rate, burst, burst, t0);
        const auto margin = wire_gate::margin_for(rate, burst);
        const auto late = margin > 1ms ? margin - 1ms : wire_gate::duration::zero();
        const auto phase =
            std::chrono::microseconds(std::uniform_int_distribution<int>(0, 999)(rng));
        nginx_limit_req nginx(rate, burst - 1);
        int refused = 0;
        auto now = t0;
        for (int backlogs = 0; backlogs < 3; ++backlogs) {
          for (int i = 0; i < burst + 3 * rate; ++i) {
            if (with_margin) {
              now = pass_at(gate, now, i == 0);
            } else {
              // The bucket alone: write as soon as a token is whole.
              while (!bare.try_take(now)) now += bare.time_until_available(now);
            }
            refused += nginx.admit(partner_ms(now, i == 0 ? late : 0ms, phase)) ? 0 : 1;
          }
          now += 10s;  // idle: the next backlog starts with a full bucket
        }
        if (with_margin) {
          EXPECT_EQ(refused, 0) << rate << "/s burst " << burst;
        } else if (late > 1ms) {
          EXPECT_GT(refused, 0) << rate << "/s burst " << burst << ": the margin is what helps";
        }
      }
    }
  }
}

TEST(WireGate, PausedAtRateZeroAndReconfiguredWithoutReset) {
  wire_gate gate(0.0, 5, 5, t0);
  EXPECT_EQ(gate.try_pass(t0), wire_gate::duration::max());
  gate.reconfigure(10.0, 2, t0);
  EXPECT_DOUBLE_EQ(gate.tokens_at(t0), 2.0);  // clamped to the new burst, not refilled
  EXPECT_EQ(gate.margin(), 50ms);
  EXPECT_EQ(gate.margin(), wire_gate::margin_for(10.0, 2));
  EXPECT_EQ(gate.try_pass(t0), wire_gate::duration::zero());
  gate.reconfigure(10.0, 1, t0);
  EXPECT_DOUBLE_EQ(gate.tokens_at(t0), 1.0);
  EXPECT_EQ(gate.margin(), 4ms);  // 4 % of 100 ms without headroom
}

// A burst-1 subscriber with a backlog, as the shard runs it: the admission bucket admits an
// attempt as soon as it has a token, and the attempt reaches the gate `to_write` later; one
// attempt, the fifth, reaches it 10 ms late (a connection opened, the last of a burst). Returns
// each attempt's wait at the gate.
std::vector<wire_gate::duration> gate_waits(bool align_after_wait) {
  constexpr double rate = 50;
  token_bucket admission(rate, 1, 1, t0);
  wire_gate gate(rate, 1, 1, t0);
  std::vector<wire_gate::duration> waits;
  auto now = t0;
  for (int attempt = 0; attempt < 50; ++attempt) {
    now += admission.time_until_available(now);
    EXPECT_TRUE(admission.try_take(now));
    const auto admitted = now;
    const auto at_gate = admitted + (attempt == 4 ? 10ms : 100us);
    const auto written = pass_at(gate, at_gate);
    if (written > at_gate && align_after_wait) after_wire_wait(admission, gate, written);
    waits.push_back(written - at_gate);
    now = std::max(now, written);  // the next admission is looked for from here on
  }
  return waits;
}

TEST(WireGate, ALateWriteCostsOneWaitNotOneForEveryLaterAttempt) {
  // Admitting on its own schedule, every attempt after the late one waits for the lag it left.
  const auto unaligned = gate_waits(false);
  EXPECT_GT(unaligned.back(), 9ms);
  // Aligned after a wait, the admissions follow the writes, and the waits stop.
  const auto aligned = gate_waits(true);
  for (std::size_t i = 6; i < aligned.size(); ++i)
    EXPECT_EQ(aligned[i], wire_gate::duration::zero()) << i;
}

TEST(WireGate, AlignedAfterAWaitABurstsAdmissionsComeWhenTheGateLetsThemPass) {
  // 10/s, burst 10: a write needs 1.5 tokens. Only the burst's last attempt waits at the gate;
  // after it the admission bucket holds the margin's refill back too, so each later attempt is
  // admitted when its write can pass, not a margin before.
  token_bucket admission(10.0, 10, 10, t0);
  wire_gate gate(10.0, 10, 10, t0);
  int waited = 0;
  auto now = t0;
  for (int attempt = 0; attempt < 40; ++attempt) {
    now += admission.time_until_available(now);
    ASSERT_TRUE(admission.try_take(now));
    const auto at_gate = now + 100us;
    const auto written = pass_at(gate, at_gate);
    if (written > at_gate) {
      ++waited;
      after_wire_wait(admission, gate, written);
    }
    now = std::max(now, written);
  }
  EXPECT_EQ(waited, 1);
  // The burst, then one write every 100 ms: 30 more in 3 s, the margin paid once.
  EXPECT_NEAR(seconds(now - t0), 3.0 + 0.05 + 100e-6, 1e-3);
}

TEST(WireGate, AligningAfterAWaitKeepsTheRateAndTheLimit) {
  // What the aligned subscriber writes still conforms, and keeps nearly all of the rate: the
  // admission-to-write time is lost once per wait, not per interval.
  constexpr double rate = 50;
  token_bucket admission(rate, 1, 1, t0);
  wire_gate gate(rate, 1, 1, t0);
  std::mt19937 random(11);
  std::uniform_int_distribution<int> to_write_us(50, 2000);
  std::vector<time_point> writes;
  auto now = t0;
  while (now < t0 + 60s) {
    now += admission.time_until_available(now);
    EXPECT_TRUE(admission.try_take(now));
    const auto at_gate = now + std::chrono::microseconds(to_write_us(random));
    const auto written = pass_at(gate, at_gate);
    if (written > at_gate) after_wire_wait(admission, gate, written);
    writes.push_back(written);
    now = std::max(now, written);
  }
  for (std::size_t i = 1; i < writes.size(); ++i) {
    EXPECT_GE(writes[i] - writes[i - 1], 20ms - 1us) << i;
  }
  const double achieved =
      static_cast<double>(writes.size() - 1) / seconds(writes.back() - writes.front());
  EXPECT_GE(achieved, 0.95 * rate);
}

}  // namespace
}  // namespace surge::engine
