// The scheduler's pure decisions (engine/shard/scheduling): facts and a clock in, a decision out.
#include <gtest/gtest.h>

#include <climits>
#include <limits>

#include <vector>

#include "engine/shard/scheduling.hpp"

namespace surge::engine::scheduling {
namespace {

using namespace std::chrono_literals;

const clock::time_point t0 = clock::time_point{} + 1000s;

// A subscriber with a sendable row, a token, and nothing holding it back.
pump_facts ready_to_send() {
  pump_facts facts;
  facts.has_rows = true;
  facts.in_flight_cap = 4;
  return facts;
}

TEST(NextPumpStep, SendsWhenNothingHoldsTheFrontRowBack) {
  EXPECT_EQ(next_pump_step(ready_to_send(), t0).action, pump_action::send);
}

TEST(NextPumpStep, WaitsForRowsWithoutAWakeTime) {
  pump_facts facts;
  const auto decision = next_pump_step(facts, t0);
  EXPECT_EQ(decision.action, pump_action::wait);
  EXPECT_EQ(decision.wake_at, clock::time_point::max());
}

TEST(NextPumpStep, ClearsRowsItCannotSendBeforeAnythingElse) {
  auto facts = ready_to_send();
  facts.paused_until = t0 + 10s;  // would otherwise make it wait
  facts.active = false;
  EXPECT_EQ(next_pump_step(facts, t0).action, pump_action::release_buffered);
  facts.active = true;
  facts.rate_paused = true;
  EXPECT_EQ(next_pump_step(facts, t0).action, pump_action::release_buffered);
  facts.rate_paused = false;
  facts.unusable = true;
  EXPECT_EQ(next_pump_step(facts, t0).action, pump_action::dead_letter_buffered);
  facts.unusable = false;
  facts.front_too_large = true;
  facts.front_refused = true;
  EXPECT_EQ(next_pump_step(facts, t0).action, pump_action::dead_letter_front_too_large);
  facts.front_too_large = false;
  EXPECT_EQ(next_pump_step(facts, t0).action, pump_action::dead_letter_front_refused);
  facts.front_refused = false;
  facts.front_lease_too_short = true;
  EXPECT_EQ(next_pump_step(facts, t0).action, pump_action::release_front);
}

TEST(NextPumpStep, ARetryAfterPauseWakesItWhenThePauseEnds) {
  auto facts = ready_to_send();
  facts.paused_until = t0 + 3s;
  const auto decision = next_pump_step(facts, t0);
  EXPECT_EQ(decision.action, pump_action::wait);
  EXPECT_EQ(decision.wake_at, t0 + 3s);
  // Once it has passed, the row goes.
  EXPECT_EQ(next_pump_step(facts, t0 + 3s).action, pump_action::send);
}

TEST(NextPumpStep, AnOpenCircuitWaitsForItsProbeAndAProbingOneForTheAnswer) {
  auto facts = ready_to_send();
  facts.circuit_blocking = true;
  facts.next_probe_at = t0 + 2s;
  auto decision = next_pump_step(facts, t0);
  EXPECT_EQ(decision.action, pump_action::wait);
  EXPECT_EQ(decision.wake_at, t0 + 2s);
  facts.next_probe_at.reset();  // probing: the probe's answer notifies the pump
  decision = next_pump_step(facts, t0);
  EXPECT_EQ(decision.action, pump_action::wait);
  EXPECT_EQ(decision.wake_at, clock::time_point::max());
}

TEST(NextPumpStep, ItsOwnCapThenTheShardsThenTheOriginHoldItBack) {
  auto facts = ready_to_send();
  facts.in_flight = 4;
  facts.shard_full = true;
  facts.origin_admits = false;
  EXPECT_EQ(next_pump_step(facts, t0).action, pump_action::wait);
  facts.in_flight = 3;
  EXPECT_EQ(next_pump_step(facts, t0).action, pump_action::queue_for_shard_slot);
  facts.shard_full = false;
  EXPECT_EQ(next_pump_step(facts, t0).action, pump_action::queue_for_origin);
  // Queued for the origin, it looks again when an attempt in flight there becomes overdue.
  facts.origin_recount_at = t0 + 700ms;
  EXPECT_EQ(next_pump_step(facts, t0).wake_at, t0 + 700ms);
}

TEST(NextPumpStep, OnePacedBelowOneSlotKeepsOneRequestOutWhateverTheOriginsLimit) {
  auto facts = ready_to_send();
  facts.origin_admits = false;
  facts.origin_has_waiters = true;
  EXPECT_EQ(next_pump_step(facts, t0).action, pump_action::queue_for_origin);
  facts.origin_floor = true;
  EXPECT_EQ(next_pump_step(facts, t0).action, pump_action::send);
  facts.in_flight = 1;  // its one is out: the limit binds again, its turn or not
  EXPECT_EQ(next_pump_step(facts, t0).action, pump_action::queue_for_origin);
  facts.origin_turn = true;
  EXPECT_EQ(next_pump_step(facts, t0).action, pump_action::queue_for_origin);
}

TEST(PacedBelowOneSlot, RateTimesTheOriginsBestLatencyUnderOne) {
  EXPECT_TRUE(paced_below_one_slot(50, 5ms));                      // 0.25 of a slot
  EXPECT_FALSE(paced_below_one_slot(50, 20ms));                    // a whole one
  EXPECT_FALSE(paced_below_one_slot(1e6, 200us));                  // unthrottled: 200 slots' worth
  EXPECT_FALSE(paced_below_one_slot(50, clock::duration::max()));  // no latency known yet
}

TEST(NextPumpStep, OneWithRequestsOutQueuesBehindAnOriginsWaitersUnlessItIsItsTurn) {
  auto facts = ready_to_send();
  facts.origin_has_waiters = true;
  // Nothing out yet: it may take a free slot.
  EXPECT_EQ(next_pump_step(facts, t0).action, pump_action::send);
  facts.in_flight = 1;
  EXPECT_EQ(next_pump_step(facts, t0).action, pump_action::queue_for_origin);
  facts.origin_turn = true;
  EXPECT_EQ(next_pump_step(facts, t0).action, pump_action::send);
}

// The shard's freed slots are handed out by origin (shard_slots::hand_out_slots): one with
// requests out does not take a free slot ahead of those queued for one, unless it was handed it
// or waits for one itself.
TEST(NextPumpStep, OneWithRequestsOutQueuesBehindTheShardsWaitersUnlessItIsItsTurn) {
  auto facts = ready_to_send();
  facts.shard_has_waiters = true;
  EXPECT_EQ(next_pump_step(facts, t0).action, pump_action::send);
  facts.in_flight = 1;
  const auto queued = next_pump_step(facts, t0);
  EXPECT_EQ(queued.action, pump_action::queue_for_shard_slot);
  EXPECT_EQ(queued.wake_at, clock::time_point::max()) << "a handed-out slot wakes it";
  facts.slot_turn = true;
  EXPECT_EQ(next_pump_step(facts, t0).action, pump_action::send);
}

TEST(NextPumpStep, APartialBatchLingersOnlyWhileATokenIsThere) {
  auto facts = ready_to_send();
  facts.batching = true;
  facts.batch_full = false;
  facts.batch_linger = 500ms;
  auto decision = next_pump_step(facts, t0);
  EXPECT_EQ(decision.action, pump_action::start_linger);
  EXPECT_EQ(decision.wake_at, t0 + 500ms);
  facts.batch_wait_since = t0;
  decision = next_pump_step(facts, t0 + 200ms);
  EXPECT_EQ(decision.action, pump_action::wait);
  EXPECT_EQ(decision.wake_at, t0 + 500ms);
  EXPECT_EQ(next_pump_step(facts, t0 + 500ms).action, pump_action::send);
  // A full batch, or a stop, does not wait.
  facts.batch_full = true;
  EXPECT_EQ(next_pump_step(facts, t0 + 200ms).action, pump_action::send);
  facts.batch_full = false;
  facts.stopping = true;
  EXPECT_EQ(next_pump_step(facts, t0 + 200ms).action, pump_action::send);
  // Waiting for a token instead: rows gather anyway, no linger is started.
  facts.stopping = false;
  facts.batch_wait_since.reset();
  facts.token_wait = 150ms;
  decision = next_pump_step(facts, t0);
  EXPECT_EQ(decision.action, pump_action::wait);
  EXPECT_TRUE(decision.waits_for_token);
  EXPECT_EQ(decision.wake_at, t0 + 150ms);
}

// No time is known while the persisted bucket's next grant is on its way: the answer wakes the
// pump, and the wait counts as waiting for a token (surge_token_wait_seconds_total).
TEST(NextPumpStep, AWaitForAGrantHasNoTimerButCountsAsATokenWait) {
  auto facts = ready_to_send();
  facts.token_wait = clock::duration::max();
  const auto decision = next_pump_step(facts, t0);
  EXPECT_EQ(decision.action, pump_action::wait);
  EXPECT_TRUE(decision.waits_for_token);
  EXPECT_EQ(decision.wake_at, clock::time_point::max());
}

demand_facts backlogged(double tokens, double rate, int cap = 16) {
  demand_facts facts;
  facts.tokens_now = tokens;
  facts.rate = rate;
  facts.in_flight_cap = cap;
  return facts;
}

TEST(RowsToClaim, WhatItCanSendWithinTheHorizonBoundedByItsBufferAndTheBudget) {
  const demand_limits limits;  // horizon 0.5 s, 2 rows per slot
  EXPECT_EQ(rows_to_claim(backlogged(3, 10), limits, 1000), 3 + 5);
  EXPECT_EQ(rows_to_claim(backlogged(100, 1000, 16), limits, 1000), 32);
  EXPECT_EQ(rows_to_claim(backlogged(100, 1000, 16), limits, 7), 7);
  auto held = backlogged(3, 10);
  held.held = 4;  // half of the 8 it may hold: topped up
  EXPECT_EQ(rows_to_claim(held, limits, 1000), 4);
  held.held = 5;  // more than half: it waits, so claims come in batches, not a row at a time
  EXPECT_EQ(rows_to_claim(held, limits, 1000), 0);
  held.held = 20;
  EXPECT_EQ(rows_to_claim(held, limits, 1000), 0);
  auto single = backlogged(1, 0);  // may hold one: asked for as soon as it holds none
  EXPECT_EQ(rows_to_claim(single, limits, 1000), 1);
  single.held = 1;
  EXPECT_EQ(rows_to_claim(single, limits, 1000), 0);
}

// Once another subscriber starts a round, one holding up to three quarters joins it, so that
// subscribers are claimed for together (their next rows share a fan-out producer's pages).
TEST(RowsToClaim, AClaimRoundIsJoinedByThoseHoldingUpToThreeQuarters) {
  const demand_limits limits;
  auto held = backlogged(3, 10);  // may hold 8
  held.held = 5;
  EXPECT_EQ(rows_to_claim(held, limits, 1000, claim_round::start), 0);
  EXPECT_EQ(rows_to_claim(held, limits, 1000, claim_round::join), 3);
  held.held = 6;
  EXPECT_EQ(rows_to_claim(held, limits, 1000, claim_round::join), 2);
  held.held = 7;  // more than three quarters: it waits for a later round
  EXPECT_EQ(rows_to_claim(held, limits, 1000, claim_round::join), 0);
  held.held = 3;
  EXPECT_EQ(rows_to_claim(held, limits, 2, claim_round::join), 2) << "the shard's room bounds it";
}

TEST(RowsToClaim, NothingForWhatCannotSendAndOneRowForADueProbe) {
  const demand_limits limits;
  auto facts = backlogged(10, 10);
  facts.poll_later = true;
  EXPECT_EQ(rows_to_claim(facts, limits, 100), 0);
  facts.poll_later = false;
  facts.active = false;
  EXPECT_EQ(rows_to_claim(facts, limits, 100), 0);
  facts.active = true;
  facts.paused = true;
  EXPECT_EQ(rows_to_claim(facts, limits, 100), 0);
  facts.paused = false;
  facts.circuit_blocking = true;
  EXPECT_EQ(rows_to_claim(facts, limits, 100), 0);
  facts.probe_due = true;
  EXPECT_EQ(rows_to_claim(facts, limits, 100), 1);
  // An unusable subscriber's rows are claimed in batches, to be dead-lettered.
  facts.unusable = true;
  EXPECT_EQ(rows_to_claim(facts, limits, 1000), limits.unusable_batch);
}

TEST(RowsToClaim, BatchesMultiplyTheRowsPerRequestAndCoalescingLooksFurtherAhead) {
  const demand_limits limits;
  auto facts = backlogged(2, 5);  // 2 + 2.5 -> 4 requests
  facts.batch_rows = 100;
  EXPECT_EQ(rows_to_claim(facts, limits, 100000), 400);
  auto warmer = backlogged(1, 4);  // 1 + 2 -> 3 requests
  warmer.coalescing = true;
  // 4/s for 20 s: 80 rows ahead.
  EXPECT_EQ(rows_to_claim(warmer, limits, 100000), 80);
  warmer.rate = 1000;
  EXPECT_EQ(rows_to_claim(warmer, limits, 100000), limits.coalesce_lookahead_rows);
}

token_facts about_to_send() {
  token_facts facts;
  facts.has_rows = true;
  return facts;
}

TEST(WantsTokens, ForBufferedRowsAndForAClaimThatIsNotAnIdlePoll) {
  EXPECT_TRUE(wants_tokens(about_to_send()));
  token_facts claiming;
  claiming.claim_pending = true;
  EXPECT_TRUE(wants_tokens(claiming));  // a backlogged subscriber: tokens by the time rows come
  claiming.idle_poll = true;
  EXPECT_FALSE(wants_tokens(claiming));  // a quiet one: leased and given back, for nothing
  claiming.has_rows = true;
  EXPECT_TRUE(wants_tokens(claiming));  // the poll found rows before: they need tokens
  EXPECT_FALSE(wants_tokens(token_facts{}));
}

TEST(WantsTokens, NotForWhatCannotSendButForADueProbe) {
  auto facts = about_to_send();
  facts.active = false;
  EXPECT_FALSE(wants_tokens(facts));
  facts = about_to_send();
  facts.unusable = true;
  EXPECT_FALSE(wants_tokens(facts));
  facts = about_to_send();
  facts.paused = true;
  EXPECT_FALSE(wants_tokens(facts));
  facts = about_to_send();
  facts.circuit_blocking = true;
  EXPECT_FALSE(wants_tokens(facts));
  facts.probe_due = true;
  EXPECT_TRUE(wants_tokens(facts));
}

TEST(LimitWakeups, AsManyAsTheLimitNowAdmitsOrOneWhenItIsOff) {
  EXPECT_EQ(limit_wakeups(true, 16, 10), 6);
  EXPECT_EQ(limit_wakeups(true, 16, 20), 0);
  EXPECT_EQ(limit_wakeups(false, 0, 500), 1);
}

// A waiter as the queue sees it: whether it still waits here, and whether it was woken.
struct waiter {
  int id = 0;
  bool still_waiting = true;
  bool woken = false;
};

std::vector<int> hand_out_ids(slot_queue<waiter>& queue, int slots) {
  std::vector<int> ids;
  const int woken = queue.hand_out(
      slots, [](const waiter& w) { return w.still_waiting; },
      [&ids](waiter& w) {
        w.woken = true;
        ids.push_back(w.id);
      });
  EXPECT_EQ(woken, static_cast<int>(ids.size()));
  return ids;
}

TEST(OriginNeedCeiling, RateTimesAcceptableLatencyAndFourNoneBeforeALatencyOrForUnboundRates) {
  EXPECT_EQ(origin_need_ceiling(200, 400ms), 80 + 4);
  EXPECT_EQ(origin_need_ceiling(200, 402ms), 81 + 4);  // 80.4 requests: rounded up
  EXPECT_EQ(origin_need_ceiling(10, 50ms), 1 + 4);
  EXPECT_EQ(origin_need_ceiling(0, 200ms), 4);
  EXPECT_EQ(origin_need_ceiling(200, clock::duration::max()), INT_MAX);
  EXPECT_EQ(origin_need_ceiling(1e6 * 1'000, 200ms), 200'000'004);
  EXPECT_EQ(origin_need_ceiling(1e12, 1s), INT_MAX);
  EXPECT_EQ(origin_need_ceiling(std::numeric_limits<double>::quiet_NaN(), 1s), INT_MAX);
  EXPECT_EQ(origin_need_ceiling(std::numeric_limits<double>::infinity(), 1s), INT_MAX);
}

TEST(SlotQueue, FreedSlotsGoToTheLongestWaitingFirst) {
  waiter a{.id = 1}, b{.id = 2}, c{.id = 3};
  slot_queue<waiter> queue;
  queue.push(&a);
  queue.push(&b);
  queue.push(&c);
  EXPECT_EQ(hand_out_ids(queue, 2), (std::vector<int>{1, 2}));
  EXPECT_FALSE(c.woken);
  EXPECT_EQ(queue.size(), 1u);
  EXPECT_EQ(hand_out_ids(queue, 0), std::vector<int>{});  // the limit admits none now
  EXPECT_EQ(hand_out_ids(queue, 5), std::vector<int>{3});
  EXPECT_TRUE(queue.empty());
}

TEST(SlotQueue, AWaiterThatMovedAwayIsDroppedWithoutTakingASlot) {
  waiter moved{.id = 1, .still_waiting = false}, b{.id = 2}, c{.id = 3};
  slot_queue<waiter> queue;
  queue.push(&moved);
  queue.push(&b);
  queue.push(&c);
  EXPECT_EQ(hand_out_ids(queue, 1), std::vector<int>{2});
  EXPECT_FALSE(moved.woken);
  EXPECT_EQ(queue.size(), 1u) << "the moved entry is gone, the third still waits";
  // A queue of moved entries only wakes nobody and ends empty.
  waiter gone{.id = 4, .still_waiting = false};
  slot_queue<waiter> stale;
  stale.push(&gone);
  EXPECT_EQ(hand_out_ids(stale, 3), std::vector<int>{});
  EXPECT_TRUE(stale.empty());
}

}  // namespace
}  // namespace surge::engine::scheduling
