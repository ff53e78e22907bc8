// What an attempt's end does, on the shard's machines and without a core: rows never sent go back
// uncounted, a refused URL holds its subscriber, a 410 deactivates it and its host stops counting
// its rate, a 413 narrows its batches, a long Retry-After gives its ready rows back, only an
// answered exchange teaches its origin a latency, and the seed drives the backoff's jitter. The
// clock is passed in.
#include "engine/shard/settlement.hpp"

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <deque>
#include <memory>
#include <optional>
#include <vector>

#include <gtest/gtest.h>

#include "tests/engine/recorded_log.hpp"
#include "tests/engine/shard/attempt_fixtures.hpp"
#include "tests/engine/shard/shard_machines.hpp"

namespace surge::engine {
namespace {

using namespace std::chrono_literals;
using testing::answered;
using testing::unix0;

class Settlement : public testing::shard_machines {
 protected:
  Settlement() : shard_machines(100) {}

  // An attempt of `sub`, taken from its ready queue with its slots, as the pump starts one.
  // It is the one settle() settles next.
  attempt_state& start(subscriber_state& sub) {
    auto& attempt = attempts_.emplace_back();
    attempt.sub = &sub;
    attempt.origin = &slots_.origin_of(sub, t0);
    attempt.started_unix = unix0;
    attempt.slots = slots_.start(sub, *attempt.origin, t0);
    if (sub.ready.empty()) {
      ADD_FAILURE() << "nothing ready to start";
      return attempt;
    }
    attempt.rows = take_request_rows(sub.ready, sub.batching(), {.max_payload_bytes = 1 << 20},
                                     unix0, attempt.batched);
    rows_.sent(static_cast<int>(attempt.rows.size()));
    return attempt;
  }

  // The oldest attempt not yet settled ends with `result`, `after` the start.
  bool settle(const http_result& result, steady::duration after = 250ms) {
    if (attempts_.empty()) {
      ADD_FAILURE() << "no attempt to settle";
      return false;
    }
    auto attempt = std::move(attempts_.front());
    attempts_.pop_front();
    return settlement_.settle(attempt, result, at(after));
  }

  // The machines a settlement acts on: the fixture's.
  settlement_machines machines() {
    return {.rows = rows_,
            .slots = slots_,
            .demand = demand_,
            .wakes = wakes_,
            .metrics = metrics_,
            .log = log_};
  }

  testing::recorded_log log_;
  attempt_settlement settlement_{{.refused_target_hold = 60s}, machines(), 1};
  std::deque<attempt_state> attempts_;
};

TEST_F(Settlement, AnUnsentAttemptCountsNoAttemptAndItsRowsGoBackWithTheirMemory) {
  auto& sub = add({});
  claim(sub, 1, 1);
  EXPECT_GT(rows_.memory().held_bytes(), 0);
  start(sub);
  http_result unsent;
  unsent.not_sent = true;
  EXPECT_FALSE(settle(unsent));
  EXPECT_EQ(rows_.memory().held_bytes(), 0);
  const auto out = written();
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].kind, storage::outcome_kind::release);
  EXPECT_FALSE(out[0].has_attempt);
  EXPECT_EQ(metrics_.counters.attempts.load(), 0);
}

TEST_F(Settlement, AnUnsentProbeLeavesTheCircuitOpenWithTheNextProbeDueAtOnce) {
  auto& sub = add({});
  for (int i = 0; i < config_.circuit.failure_threshold; ++i) sub.breaker.on_failure(t0);
  ASSERT_EQ(sub.breaker.current(), circuit_breaker::state::open);
  ASSERT_TRUE(sub.breaker.try_admit(t0 + 1h));  // its cool-down is over: the probe goes
  claim(sub, 1, 1);
  start(sub).probe = true;
  http_result unsent;
  unsent.not_sent = true;
  settle(unsent, 1h + 1s);
  EXPECT_EQ(sub.breaker.current(), circuit_breaker::state::open);
  EXPECT_EQ(sub.breaker.next_probe_at(), t0 + 1h + 1s);
}

TEST_F(Settlement, AConnectWithoutAFreeDescriptorCountsNoAttemptAndChargesNoCircuit) {
  // The process's file limit, not the partner: twice the failures that open a circuit.
  auto& sub = add({});
  http_result starved;
  starved.error = proto::transport_error::connect;
  starved.out_of_descriptors = true;
  starved.detail = "no file descriptor free to connect to partner.example (Too many open files)";
  const int failures = 2 * config_.circuit.failure_threshold;
  for (std::int64_t id = 1; id <= failures; ++id) {
    claim(sub, id, id);
    start(sub);
    EXPECT_FALSE(settle(starved));
    EXPECT_EQ(sub.limits.paused_until(), t0 + 250ms + 1s);
    const auto out = written();
    ASSERT_EQ(out.size(), 1u);
    EXPECT_EQ(out[0].kind, storage::outcome_kind::retry);
    EXPECT_FALSE(out[0].has_attempt);
    EXPECT_EQ(out[0].attempts, 0);
    EXPECT_DOUBLE_EQ(out[0].next_attempt_at, unix0 + 0.25 + 1);
    EXPECT_EQ(out[0].last_error, starved.detail);
  }
  EXPECT_EQ(sub.breaker.current(), circuit_breaker::state::closed);
  EXPECT_EQ(metrics_.counters.attempts.load(), 0);
  ASSERT_EQ(log_.lines.size(), 1u);
  EXPECT_TRUE(log_.says("no attempt counted"));
  // Said again once its interval has passed, not at each row.
  claim(sub, 100, 100);
  start(sub);
  settle(starved, 11s);
  EXPECT_EQ(log_.lines.size(), 2u);
}

TEST_F(Settlement, ARefusedTargetHoldsItsSubscriberSaysSoOnceAndAnAnswerEndsTheHold) {
  auto& sub = add({});
  http_result refused;
  refused.error = proto::transport_error::refused_target;
  refused.detail = "127.0.0.1 (loopback)";
  for (const std::int64_t id : {1, 2}) {
    claim(sub, id, id);
    start(sub);
    EXPECT_FALSE(settle(refused));
    EXPECT_EQ(sub.limits.paused_until(), t0 + 250ms + 60s);
    const auto out = written();
    ASSERT_EQ(out.size(), 1u);
    EXPECT_EQ(out[0].kind, storage::outcome_kind::retry);
    EXPECT_DOUBLE_EQ(out[0].next_attempt_at, unix0 + 0.25 + 60);
    EXPECT_EQ(out[0].last_error, "subscriber held: refused target: 127.0.0.1 (loopback)");
  }
  EXPECT_EQ(sub.refused_target, "127.0.0.1 (loopback)");
  EXPECT_EQ(metrics_.counters.refused_target_holds.load(), 1);
  ASSERT_EQ(log_.lines.size(), 1u);
  EXPECT_EQ(log_.lines[0].level, log_level::warn);
  EXPECT_TRUE(log_.says("tried again every 60 s"));
  EXPECT_EQ(metrics_.counters.attempts.load(), 0);

  claim(sub, 3, 3);
  start(sub);
  settle(answered(204), 61s);
  EXPECT_TRUE(sub.refused_target.empty());
  EXPECT_EQ(written().at(0).kind, storage::outcome_kind::done);
}

TEST_F(Settlement, A410DeactivatesOnceAndItsHostNoLongerCountsItsRate) {
  auto& gone = add({});
  add({.id = 8});
  auto& origin = slots_.origin_of(gone, t0);
  EXPECT_DOUBLE_EQ(origin.rate_sum, 40);
  claim(gone, 1, 3);
  start(gone);
  settle(answered(410));
  EXPECT_FALSE(gone.settings.active);
  EXPECT_TRUE(gone.gone);
  EXPECT_TRUE(gone.ready.empty());  // the others go back to the queue
  EXPECT_DOUBLE_EQ(origin.rate_sum, 20);
  const auto out = written();
  EXPECT_EQ(deactivated_, std::vector<std::int64_t>{7});
  ASSERT_EQ(out.size(), 3u);
  for (const auto& outcome : out) {
    EXPECT_EQ(outcome.kind, outcome.delivery_id == 1 ? storage::outcome_kind::dead
                                                     : storage::outcome_kind::release)
        << outcome.delivery_id;
  }
  EXPECT_TRUE(log_.says("subscriber 7 answered 410 Gone: deactivated"));

  // A second 410 (as from an attempt that was in flight) changes the host's sum no more.
  claim(gone, 4, 4);
  start(gone);
  settle(answered(410));
  EXPECT_DOUBLE_EQ(origin.rate_sum, 20);
  EXPECT_EQ(log_.lines.size(), 1u);
}

TEST_F(Settlement, A413NarrowsTheBatchesAndSaysSoOnlyWhenTheyShrink) {
  auto& sub = add({.batch_max = 10});
  claim(sub, 1, 4);
  ASSERT_TRUE(start(sub).batched);
  claim(sub, 5, 8);
  ASSERT_TRUE(start(sub).batched);  // both in flight, 4 rows each
  settle(answered(413));
  EXPECT_EQ(sub.batch_fits, 2);
  EXPECT_EQ(sub.settings.batch_rows, 2);
  EXPECT_TRUE(log_.says("answered 413 to a batch of 4 rows: its batches are now at most 2 rows"));
  EXPECT_EQ(log_.lines.at(0).level, log_level::info);
  EXPECT_EQ(metrics_.counters.batch_posts.load(), 1);
  EXPECT_EQ(metrics_.counters.batched_rows.load(), 4);
  // The second batch's 413 says what the first did: nothing narrower, nothing said.
  settle(answered(413));
  EXPECT_EQ(sub.batch_fits, 2);
  EXPECT_EQ(log_.lines.size(), 1u);

  claim(sub, 9, 10);
  ASSERT_TRUE(start(sub).batched);
  settle(answered(413));
  EXPECT_EQ(sub.batch_fits, 1);
  EXPECT_EQ(log_.lines.size(), 2u);
  claim(sub, 11, 11);
  ASSERT_FALSE(start(sub).batched);
  settle(answered(204));
  EXPECT_EQ(sub.batch_fits, 1);
  EXPECT_EQ(log_.lines.size(), 2u);
}

TEST_F(Settlement, ALongRetryAfterGivesTheReadyRowsBackAndAShortOneKeepsThem) {
  auto& sub = add({});
  claim(sub, 1, 3);
  start(sub);
  settle(answered(429, "1"));
  EXPECT_EQ(sub.limits.paused_until(), t0 + 250ms + 1s);
  ASSERT_EQ(sub.ready.size(), 2u);
  written();

  start(sub);
  settle(answered(429, "20"));
  EXPECT_EQ(sub.limits.paused_until(), t0 + 250ms + 20s);
  EXPECT_TRUE(sub.ready.empty());
  const auto out = written();
  ASSERT_EQ(out.size(), 2u);
  EXPECT_EQ(out[1].kind, storage::outcome_kind::retry);
  EXPECT_DOUBLE_EQ(out[1].next_attempt_at, unix0 + 0.25 + 20);
}

TEST_F(Settlement, ASpentAnnouncedQuotaPausesTheSubscriberUntilItsResetAndGivesItsRowsBack) {
  auto& sub = add({});
  claim(sub, 1, 2);
  start(sub);
  ++sub.in_flight;  // counted as the pump counts it
  auto result = answered(204);
  result.quota = announced("100", "0", "30");
  settle(result);
  EXPECT_GE(sub.limits.paused_until(), t0 + 29s);
  EXPECT_LE(sub.limits.paused_until(), t0 + 31s);
  EXPECT_TRUE(sub.ready.empty());  // 30 s is past the release threshold
  const auto out = written();
  ASSERT_EQ(out.size(), 2u);
  EXPECT_EQ(out[0].kind, storage::outcome_kind::retry);
  EXPECT_EQ(out[1].kind, storage::outcome_kind::done);
}

// The writers waiting at the subscriber's gate look again when a pause or a new limit changes
// what it lets through.
TEST_F(Settlement, APauseOrAnAnnouncedLimitWakesTheWritersWaitingAtTheGate) {
  auto& sub = add({});
  writer_waits_at_gate(sub);
  ASSERT_EQ(lines_woken(), 0);
  claim(sub, 1, 2);
  start(sub);
  settle(answered(204));
  EXPECT_EQ(lines_woken(), 0);  // nothing changed at the gate

  start(sub);
  ++sub.in_flight;  // counted as the pump counts it
  auto lower = answered(204);
  lower.quota = announced("5", "4", "30");
  settle(lower);
  EXPECT_EQ(lines_woken(), 1);

  claim(sub, 3, 3);
  start(sub);
  settle(answered(429, "1"));
  EXPECT_EQ(lines_woken(), 1);
}

TEST_F(Settlement, AnOpeningCircuitGivesTheReadyRowsBack) {
  auto& sub = add({});
  const int threshold = config_.circuit.failure_threshold;
  claim(sub, 1, threshold + 2);
  for (int i = 1; i < threshold; ++i) {
    start(sub);
    settle(answered(500));
  }
  ASSERT_EQ(sub.ready.size(), 3u);
  start(sub);
  settle(answered(500));
  EXPECT_TRUE(sub.ready.empty());
  const auto out = written();
  ASSERT_EQ(out.size(), static_cast<std::size_t>(threshold + 2));
  const auto released = std::count_if(out.begin(), out.end(), [](const storage::outcome& o) {
    return o.kind == storage::outcome_kind::release;
  });
  EXPECT_EQ(released, 2);
}

TEST_F(Settlement, OnlyAnAnsweredOrTimedOutExchangeTeachesItsOriginALatency) {
  auto& sub = add({});
  const auto& limit = slots_.origin_of(sub, t0).limit;
  const auto unmeasured = limit.best_latency();
  claim(sub, 1, 3);
  start(sub);
  http_result refused_connection;
  refused_connection.error = proto::transport_error::connect;
  refused_connection.exchange_time = 5ms;
  settle(refused_connection);
  EXPECT_EQ(limit.best_latency(), unmeasured);

  start(sub);
  auto answer = answered(204);
  answer.exchange_time = 80ms;
  settle(answer);
  EXPECT_EQ(limit.best_latency(), 80ms);

  start(sub);
  http_result timed_out;
  timed_out.error = proto::transport_error::timeout;
  timed_out.exchange_time = 40ms;
  settle(timed_out);
  EXPECT_EQ(limit.best_latency(), 40ms);
}

TEST_F(Settlement, AnOrderedRowFreesItsKeyOnlyWhenNothingElseOfItsSubscriberIsReady) {
  auto& sub = add({.order = proto::order_rule{}});
  claim(sub, 1, 2);
  start(sub);
  EXPECT_FALSE(settle(answered(204)));
  start(sub);
  EXPECT_TRUE(settle(answered(204)));
}

TEST_F(Settlement, ItsSeedDrivesTheBackoffsJitter) {
  // Three settlements on the same machines, two of them with one seed: each settles one
  // attempt's 500, the row's first failure, whose retry is due 0.5 to 1 s later.
  const auto seeded = [&](std::uint64_t seed) { return attempt_settlement{{}, machines(), seed}; };
  auto first = seeded(7);
  auto again = seeded(7);
  auto other = seeded(8);
  auto& sub = add({.burst = 3});
  claim(sub, 1, 3);
  std::vector<double> due;
  for (auto* settlement : {&first, &again, &other}) {
    auto attempt = std::move(start(sub));
    attempts_.pop_back();
    settlement->settle(attempt, answered(500), at(250ms));
    const auto out = written();
    ASSERT_EQ(out.size(), 1u);
    ASSERT_EQ(out[0].kind, storage::outcome_kind::retry);
    due.push_back(out[0].next_attempt_at);
  }
  EXPECT_EQ(due[0], due[1]) << "one seed, one jitter";
  EXPECT_NE(due[0], due[2]) << "another seed, another jitter";
  for (const double at : due) {
    EXPECT_GE(at, unix0 + 0.25 + 0.5);
    EXPECT_LE(at, unix0 + 0.25 + 1.0);
  }
}

}  // namespace
}  // namespace surge::engine
