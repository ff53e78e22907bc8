// The shard's core on a simulated clock (core_simulation.hpp): rate windows, retries, the
// circuit breaker, Retry-After, batching and coalescing, demand, and stop with its grace. Each
// test runs simulated seconds in milliseconds, with no socket, thread or timer.
#include "engine/shard/core.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <limits>
#include <set>
#include <string>
#include <vector>

#include "tests/engine/shard/core_simulation.hpp"

namespace surge::engine {
namespace {

using namespace std::chrono_literals;
using testing::answer;
using testing::log_line;
using testing::most_in_window;
using testing::queue_row;
using testing::received;
using testing::simulation;
using steady = std::chrono::steady_clock;

TEST(ShardCore, ABackloggedSubscriberGetsItsRateAndNeverMoreThanItsLimitInAnyWindow) {
  simulation sim;
  sim.load({simulation::subscriber(1, 20.0, 5)});
  for (int i = 0; i < 200; ++i) sim.enqueue(1);
  const auto start = sim.now();
  ASSERT_TRUE(sim.run_until([&] { return sim.all_rows(queue_row::state::done); }, 30s));
  const auto sent = sim.requests_of(1);
  ASSERT_EQ(sent.size(), 200u);
  // The burst, then one request per 50 ms: 195 more take 9.75 s.
  const double took = std::chrono::duration<double>(sent.back().at - start).count();
  EXPECT_GE(took, 9.7);
  EXPECT_LE(took, 195 / (0.95 * 20.0)) << "at least 95 % of its rate";
  EXPECT_LE(most_in_window(sent, 1s), 20 + 5) << "rate x 1 s + burst";
  EXPECT_EQ(sim.count_rows(queue_row::state::done), 200);
}

TEST(ShardCore, TwoSubscribersKeepTheirOwnRates) {
  simulation sim;
  sim.load({simulation::subscriber(1, 50.0, 1), simulation::subscriber(2, 5.0, 1)});
  for (int i = 0; i < 100; ++i) {
    sim.enqueue(1);
    sim.enqueue(2);
  }
  sim.run_for(4s);
  const auto fast = sim.requests_of(1);
  const auto slow = sim.requests_of(2);
  EXPECT_GE(fast.size(), 95u) << "the slow one does not hold the fast one back";
  EXPECT_LE(slow.size(), 4u * 5 + 1);
  EXPECT_GE(slow.size(), 4u * 5 - 2);
  EXPECT_LE(most_in_window(slow, 1s), 5 + 1);
}

TEST(ShardCore, AFailedAttemptIsRetriedAfterItsBackoffAndEndsDone) {
  simulation sim;
  sim.partner = [](const received& r) { return answer{.status = r.attempt == 1 ? 503 : 200}; };
  sim.load({simulation::subscriber(1, 100.0, 10)});
  for (int i = 0; i < 5; ++i) sim.enqueue(1);
  ASSERT_TRUE(sim.run_until([&] { return sim.all_rows(queue_row::state::done); }, 30s));
  std::map<std::int64_t, std::vector<steady::time_point>> attempts;
  for (const auto& r : sim.requests) attempts[r.rows.front()].push_back(r.at);
  ASSERT_EQ(attempts.size(), 5u);
  for (const auto& [id, times] : attempts) {
    ASSERT_EQ(times.size(), 2u) << "row " << id;
    // Equal jitter on a 1 s base: the second attempt comes at least half a second after the
    // first one's answer (20 ms).
    EXPECT_GE(times[1] - times[0], 500ms + 20ms) << "row " << id;
    const auto& kinds = sim.queue.rows.at(id).outcomes;
    ASSERT_EQ(kinds.size(), 2u);
    EXPECT_EQ(kinds[0], storage::outcome_kind::retry);
    EXPECT_EQ(kinds[1], storage::outcome_kind::done);
  }
}

TEST(ShardCore, ADeadEndpointOpensTheCircuitAndOnlyAProbeGoesUntilItRecovers) {
  simulation sim;
  bool healthy = false;
  sim.partner = [&](const received&) { return answer{.status = healthy ? 200 : 500}; };
  auto row = simulation::subscriber(1, 1000.0, 100);
  row.max_in_flight = 1;
  sim.load({row});
  for (int i = 0; i < 40; ++i) sim.enqueue(1);
  sim.run_for(3s);
  const auto threshold = static_cast<std::size_t>(sim.config().scheduler.circuit.failure_threshold);
  // Ten failures open it, then a probe per cool-down (1 s, then longer): a handful, not 40
  // rows' worth of retries.
  EXPECT_GE(sim.requests.size(), threshold);
  EXPECT_LE(sim.requests.size(), threshold + 3);
  // The core says so through the log it was handed, not to stderr itself.
  const auto& said = sim.log().lines;
  EXPECT_TRUE(std::any_of(said.begin(), said.end(), [](const log_line& line) {
    return line.level == log_level::warn &&
           line.text.starts_with("subscriber 1: circuit open after ");
  })) << "the circuit-open warning";
  const auto during = sim.requests.size();
  healthy = true;
  ASSERT_TRUE(sim.run_until([&] { return sim.all_rows(queue_row::state::done); }, 120s));
  EXPECT_GT(sim.requests.size(), during);
  EXPECT_EQ(sim.count_rows(queue_row::state::done), 40) << "nothing lost while it was open";
}

// Idle connections are closed on the core's flush tick, so the reactor needs no timer of its own
// for them: one a flush interval, busy or quiet.
TEST(ShardCore, IdleConnectionsAreClosedOnEveryFlushTick) {
  simulation sim;
  sim.load({simulation::subscriber(1, 100.0, 10)});
  for (int i = 0; i < 20; ++i) sim.enqueue(1);
  const int before = sim.evictions;
  sim.run_for(1s);
  const auto ticks = 1s / sim.config().scheduler.outcome_flush_interval;
  EXPECT_GE(sim.evictions - before, ticks - 1);
  EXPECT_LE(sim.evictions - before, ticks + 1);
}

TEST(ShardCore, RetryAfterPausesTheSubscriberForAsLongAsItAsks) {
  simulation sim;
  int seen = 0;
  sim.partner = [&](const received&) {
    return ++seen == 1 ? answer{.status = 429, .retry_after = "2"} : answer{};
  };
  auto row = simulation::subscriber(1, 100.0, 1);
  row.max_in_flight = 1;
  sim.load({row});
  for (int i = 0; i < 10; ++i) sim.enqueue(1);
  ASSERT_TRUE(sim.run_until([&] { return sim.all_rows(queue_row::state::done); }, 30s));
  const auto sent = sim.requests_of(1);
  ASSERT_EQ(sent.size(), 11u);
  const auto answered = sent[0].at + answer{}.latency;
  EXPECT_GE(sent[1].at - answered, 2s) << "nothing during the pause";
  EXPECT_LT(sent[1].at - answered, 2100ms) << "and sending again once it is over";
  EXPECT_EQ(sim.queue.rows.at(sent[0].rows.front()).row.attempts, 1)
      << "a paid 429 uses no attempt: only the request that went through counts";
}

TEST(ShardCore, BatchesCarryUpToTheirSizeAndAPartialOneWaitsItsLinger) {
  simulation sim;
  auto row = simulation::subscriber(1, 100.0, 10);
  row.batch_max = 10;
  row.batch_linger = 0.3;
  sim.load({row});
  for (int i = 0; i < 25; ++i) sim.enqueue(1);
  ASSERT_TRUE(sim.run_until([&] { return sim.all_rows(queue_row::state::done); }, 10s));
  std::multiset<std::size_t> sizes;
  std::set<std::int64_t> rows;
  for (const auto& r : sim.requests) {
    sizes.insert(r.rows.size());
    rows.insert(r.rows.begin(), r.rows.end());
  }
  EXPECT_EQ(sizes, (std::multiset<std::size_t>{5, 10, 10}));
  EXPECT_EQ(rows.size(), 25u) << "each row in one batch";

  // A lone row waits the linger for company, then goes alone.
  const auto at = sim.now();
  const auto lone = sim.enqueue(1);
  ASSERT_TRUE(
      sim.run_until([&] { return sim.queue.rows.at(lone).now == queue_row::state::done; }, 5s));
  EXPECT_GE(sim.requests.back().at - at, 300ms);
}

TEST(ShardCore, CoalescingSendsOnlyTheNewestRowOfAKey) {
  simulation sim;
  auto row = simulation::subscriber(1, 100.0, 10);
  row.coalesce_key = "/clip";
  sim.load({row});
  std::vector<std::int64_t> ids;
  for (int i = 0; i < 6; ++i)
    ids.push_back(sim.enqueue(1, R"({"clip":)" + std::to_string(i % 2) + "}"));
  ASSERT_TRUE(sim.run_until(
      [&] {
        return sim.count_rows(queue_row::state::pending) +
                   sim.count_rows(queue_row::state::leased) ==
               0;
      },
      10s));
  std::set<std::int64_t> sent;
  for (const auto& r : sim.requests) sent.insert(r.rows.begin(), r.rows.end());
  EXPECT_EQ(sent, (std::set<std::int64_t>{ids[4], ids[5]})) << "the newest of each clip";
  EXPECT_EQ(sim.count_rows(queue_row::state::coalesced), 4);
  for (const auto& o : sim.outcomes) {
    if (o.kind == storage::outcome_kind::coalesced) {
      EXPECT_TRUE(o.coalesced_into == ids[4] || o.coalesced_into == ids[5]);
    }
  }
}

TEST(ShardCore, DemandAsksForWhatASubscriberCanSendSoonAndNothingForAPausedOne) {
  simulation sim;
  auto paused = simulation::subscriber(2, 0.0, 1);
  sim.load({simulation::subscriber(1, 10.0, 1), paused});
  for (int i = 0; i < 100; ++i) {
    sim.enqueue(1);
    sim.enqueue(2);
  }
  sim.run_for(2s);
  int asked_paused = 0;
  int most_asked = 0;
  for (const auto& claim : sim.claims) {
    for (const auto& d : claim) {
      if (d.subscriber_id == 2) asked_paused += d.rows;
      if (d.subscriber_id == 1) most_asked = std::max(most_asked, d.rows);
    }
  }
  EXPECT_EQ(asked_paused, 0) << "a rate of 0 holds its rows in the queue";
  // 10/s over the 0.5 s claim horizon, plus the burst: a few rows at a time, not the backlog.
  EXPECT_GT(most_asked, 0);
  EXPECT_LE(most_asked, 10);
  EXPECT_LE(sim.count_rows(queue_row::state::leased), 10) << "no more leased than it can send";
}

TEST(ShardCore, AStopGivesBufferedRowsBackAndFinishesOnceAttemptsInFlightEnd) {
  simulation sim;
  sim.partner = [](const received&) { return answer{.latency = 1500ms}; };
  auto row = simulation::subscriber(1, 1000.0, 4);
  row.max_in_flight = 4;
  sim.load({row});
  for (int i = 0; i < 30; ++i) sim.enqueue(1);
  ASSERT_TRUE(sim.run_until([&] { return sim.requests.size() == 4; }, 1s));
  sim.run_for(50ms);
  ASSERT_GT(sim.count_rows(queue_row::state::leased), 4) << "rows are buffered behind the four";
  sim.begin_stop();
  sim.run_for(10ms);
  EXPECT_EQ(sim.count_rows(queue_row::state::leased), 4)
      << "buffered rows go back with the next outcome batch";
  EXPECT_FALSE(sim.core().finished()) << "attempts are in flight";
  sim.run_for(1s);
  EXPECT_FALSE(sim.core().finished());
  EXPECT_EQ(sim.requests.size(), 4u) << "nothing new goes out while stopping";
  sim.run_for(1s);
  EXPECT_TRUE(sim.core().finished());
  EXPECT_EQ(sim.count_rows(queue_row::state::done), 4);
  EXPECT_EQ(sim.count_rows(queue_row::state::pending), 26);
  ASSERT_TRUE(sim.unspent.has_value()) << "its leased tokens are handed back";
  EXPECT_EQ(sim.unspent->size(), 1u);
}

TEST(ShardCore, AnAbandonedStopFinishesAtOnceAndLeavesAttemptsToTheirLeases) {
  simulation sim;
  sim.partner = [](const received&) { return answer{.latency = 60s}; };
  sim.load({simulation::subscriber(1, 100.0, 2)});
  for (int i = 0; i < 2; ++i) sim.enqueue(1);
  ASSERT_TRUE(sim.run_until([&] { return sim.requests.size() == 2; }, 1s));
  sim.begin_stop();
  sim.run_for(100ms);
  EXPECT_FALSE(sim.core().finished());
  sim.abandon();
  EXPECT_TRUE(sim.core().finished());
  EXPECT_EQ(sim.count_rows(queue_row::state::leased), 2) << "left to their leases";
}

// One subscriber at 2/s, burst 1, up to four in flight, with four rows. The first request's
// connection takes 300 ms, the next ones reuse it: admitted 500 ms apart, the first two would
// reach the partner 200 ms apart if the limit were charged at admission.
void load_a_slow_first_connection(simulation& sim) {
  sim.connect_delay = [](int n) { return n == 0 ? 300ms : 0ms; };
  auto row = simulation::subscriber(1, 2.0, 1);
  row.max_in_flight = 4;
  sim.load({row});
  for (int i = 0; i < 4; ++i) sim.enqueue(1);
}

TEST(ShardCore, ThePartnersLimitIsChargedWhenTheRequestGoesOnTheWire) {
  simulation sim;
  const auto start = sim.now();
  load_a_slow_first_connection(sim);
  ASSERT_TRUE(sim.run_until([&] { return sim.all_rows(queue_row::state::done); }, 5s));
  ASSERT_EQ(sim.requests.size(), 4u);
  EXPECT_GE(sim.requests[0].at - start, 300ms);
  EXPECT_TRUE(sim.requests[0].fresh_connection);
  // A write on a new connection is charged a little late (the partner stamps it at accept()).
  const auto margin = wire_gate::margin_for(2.0, 1);
  for (std::size_t i = 1; i < sim.requests.size(); ++i) {
    EXPECT_GE(sim.requests[i].at - sim.requests[i - 1].at, 500ms) << "one interval apart";
    EXPECT_LE(sim.requests[i].at - sim.requests[i - 1].at, 500ms + margin + 1ms) << "and no more";
  }
  EXPECT_EQ(sim.gave_up_at_gate, 0);
}

TEST(ShardCore, AWriteWaitingAtTheGateGivesUpAtAStopAndItsRowGoesBackUnattempted) {
  simulation sim;
  load_a_slow_first_connection(sim);
  // The second request is admitted at 500 ms and waits at the gate until 800 ms.
  sim.run_for(600ms);
  ASSERT_EQ(sim.requests.size(), 1u);
  sim.begin_stop();
  sim.run_for(1s);
  EXPECT_TRUE(sim.core().finished());
  EXPECT_EQ(sim.requests.size(), 1u) << "nothing written after the stop";
  EXPECT_EQ(sim.gave_up_at_gate, 1);
  EXPECT_EQ(sim.count_rows(queue_row::state::done), 1);
  EXPECT_EQ(sim.count_rows(queue_row::state::pending), 3);
  for (const auto& [id, queued] : sim.queue.rows) {
    if (queued.now == queue_row::state::pending) {
      EXPECT_EQ(queued.row.attempts, 0) << "row " << id;
    }
  }
}

// Why an attempt starts on the admission bucket's schedule and not on the wire gate's tokens: a
// far partner at 20/s, burst 1, whose every request opens a connection that takes 300 ms. The
// bucket admits an attempt every 50 ms, so several connect at once and each finds its token at
// the gate when its connection is ready. Admitting only what the gate holds at the start (at
// most its burst, here one, between the start and the write) would send one request per connect
// time: 3.3/s.
TEST(ShardCore, AFarPartnersRequestsConnectWhileTheOnesBeforeThemWaitSoItKeepsItsRate) {
  simulation sim;
  sim.connect_delay = [](int) { return 300ms; };
  sim.partner = [](const received&) { return answer{.latency = 200ms}; };
  auto row = simulation::subscriber(1, 20.0, 1);
  row.max_in_flight = 20;
  sim.load({row});
  for (int i = 0; i < 40; ++i) sim.enqueue(1);
  ASSERT_TRUE(sim.run_until([&] { return sim.all_rows(queue_row::state::done); }, 20s));
  const auto sent = sim.requests_of(1);
  ASSERT_EQ(sent.size(), 40u);
  // One interval apart, plus the margin every write on a new connection pays at a burst of 1.
  // Once: the origin's in-flight limit starts at 4, and the fifth waits for the first answer
  // and then for its own connection.
  const auto most = 50ms + wire_gate::margin_for(20.0, 1) + 1ms;
  int longer = 0;
  for (std::size_t i = 1; i < sent.size(); ++i) {
    EXPECT_GE(sent[i].at - sent[i - 1].at, 50ms) << "request " << i;
    if (sent[i].at - sent[i - 1].at > most) ++longer;
  }
  EXPECT_LE(longer, 1) << "the writes follow each other at the limit, not at the connect time";
  EXPECT_EQ(sim.gave_up_at_gate, 0);
}

// A paced subscriber with a backlog, 10/s with a burst of 10 at a partner 200 ms away: its
// writes need 1.5 tokens at the wire gate (a 50 ms margin), so once its burst is spent, an
// attempt admitted on one token would hold its connection at the gate for 50 ms, every
// interval: a quarter more requests in flight than the partner's latency needs. The
// admission bucket is kept level with what the gate lets pass, so the attempts wait for their
// token before they start, and the wait at the gate is paid once.
TEST(ShardCore, APacedSubscribersAttemptsWaitAtTheWireGateOnceNotEveryInterval) {
  simulation sim;
  sim.partner = [](const received&) { return answer{.latency = 200ms}; };
  sim.load({simulation::subscriber(1, 10.0, 10)});
  for (int i = 0; i < 60; ++i) sim.enqueue(1);
  ASSERT_TRUE(sim.run_until([&] { return sim.all_rows(queue_row::state::done); }, 20s));
  int held_at_gate = 0;
  int attempts = 0;
  for (const auto& out : sim.outcomes) {
    if (!out.has_attempt) continue;
    ++attempts;
    if (out.attempt.finished_at - out.attempt.started_at > 0.210) ++held_at_gate;
  }
  EXPECT_EQ(attempts, 60);
  EXPECT_LE(held_at_gate, 1) << "only the burst's last request waits for the margin";
  // And the rate is the limit's: 50 rows beyond the burst in 5 s, never more than it allows.
  const auto sent = sim.requests_of(1);
  ASSERT_EQ(sent.size(), 60u);
  EXPECT_LE(sent.back().at - sent.front().at, 5s + 60ms);
  EXPECT_LE(most_in_window(sent, 1s), 10 + 10);
}

// A small burst whose requests reach the gate at varying times after their admission (a
// connect here and there, up to two intervals): its margin is cut to half the room its burst
// has, so held back by the margin's refill after a wait, a late write would find the gate full
// and lose the refill (10/s with a burst of 2 sent 8.6/s so). It keeps the margin's lead
// instead, and its rate.
TEST(ShardCore, ASmallBurstKeepsItsRateWhenItsConnectsTakeVaryingTimes) {
  struct limit {
    double rate;
    std::int64_t burst;
  };
  for (const auto [rate, burst] : {limit{10.0, 2}, limit{100.0, 2}, limit{100.0, 3}}) {
    SCOPED_TRACE(std::to_string(rate) + "/s, burst " + std::to_string(burst));
    simulation sim;
    const auto interval =
        std::chrono::duration_cast<steady::duration>(std::chrono::duration<double>(1.0 / rate));
    sim.connect_delay = [interval](int n) { return interval * ((n * 7919) % 200) / 100; };
    sim.partner = [](const received&) { return answer{.latency = 20ms}; };
    auto row = simulation::subscriber(1, rate, burst);
    row.max_in_flight = 20;
    sim.load({row});
    const int rows = static_cast<int>(rate * 10);
    for (int i = 0; i < rows; ++i) sim.enqueue(1);
    ASSERT_TRUE(sim.run_until([&] { return sim.all_rows(queue_row::state::done); }, 60s));
    const auto sent = sim.requests_of(1);
    ASSERT_EQ(sent.size(), static_cast<std::size_t>(rows));
    const double achieved = static_cast<double>(sent.size() - 1) /
                            std::chrono::duration<double>(sent.back().at - sent.front().at).count();
    EXPECT_GE(achieved, 0.97 * rate);
    EXPECT_LE(most_in_window(sent, 1s), static_cast<int>(burst + rate)) << "rate + burst";
  }
}

// What the subscriber's shared bucket was charged over a finished run: the tokens it granted,
// less those handed back (stale during the run, unspent at the end).
double charged_to_shared_bucket(const simulation& sim, std::int64_t subscriber) {
  double charged = 0;
  for (const auto& claim : sim.claims) {
    for (const auto& asked : claim) {
      if (asked.subscriber_id == subscriber) charged += asked.tokens;
    }
  }
  for (const auto& back : *sim.unspent) {
    if (back.subscriber_id == subscriber) charged -= back.tokens;
  }
  return charged;
}

TEST(ShardCore, AnAttemptThatNeverWritesCostsTheSharedBucketNothing) {
  simulation sim;
  load_a_slow_first_connection(sim);
  sim.run_for(600ms);  // the second attempt holds a token and waits at the gate
  sim.begin_stop();
  sim.run_for(1s);
  ASSERT_TRUE(sim.core().finished());
  ASSERT_EQ(sim.gave_up_at_gate, 1);
  ASSERT_TRUE(sim.unspent.has_value());
  EXPECT_DOUBLE_EQ(charged_to_shared_bucket(sim, 1), 1.0) << "one request went on the wire";
}

TEST(ShardCore, ATokenRefundedDuringALongPauseGoesBackToTheBucketALeaseLater) {
  simulation sim;
  // Two rows leave at once, on a lease of two tokens. The first is answered 429 for two
  // minutes; the second's connection comes only after that, and it gives up at the gate.
  sim.connect_delay = [](int n) { return n == 0 ? 0ms : 300ms; };
  sim.partner = [](const received&) { return answer{.status = 429, .retry_after = "120"}; };
  auto row = simulation::subscriber(1, 2.0, 2);
  row.max_in_flight = 2;
  sim.load({row});
  sim.enqueue(1);
  sim.enqueue(1);
  sim.run_for(1s);
  ASSERT_EQ(sim.requests.size(), 1u);
  ASSERT_EQ(sim.gave_up_at_gate, 1);
  sim.run_for(2s);  // the paused subscriber claims nothing, yet its refunded token goes back
  double handed_back = 0;
  for (const auto& claim : sim.claims) {
    for (const auto& asked : claim) {
      if (asked.subscriber_id == 1 && asked.tokens < 0) handed_back -= asked.tokens;
    }
  }
  EXPECT_DOUBLE_EQ(handed_back, 1.0) << "another drainer may spend it meanwhile";
}

TEST(ShardCore, TheSharedBucketIsChargedOncePerAttemptThoughItsWriteIsRetried) {
  simulation sim;
  sim.stale_connection = [](int n) { return n % 2 == 1; };
  auto row = simulation::subscriber(1, 50.0, 5);
  sim.load({row});
  for (int i = 0; i < 6; ++i) sim.enqueue(1);
  ASSERT_TRUE(sim.run_until([&] { return sim.all_rows(queue_row::state::done); }, 5s));
  sim.begin_stop();
  ASSERT_TRUE(sim.run_until([&] { return sim.core().finished(); }, 5s));
  ASSERT_EQ(sim.requests.size(), 6u);
  const auto retried = std::count_if(sim.requests.begin(), sim.requests.end(),
                                     [](const received& r) { return r.fresh_connection; });
  ASSERT_EQ(retried, 3) << "every second request was written again on a new connection";
  EXPECT_DOUBLE_EQ(charged_to_shared_bucket(sim, 1), 6.0);
}

// Limits the table holds as text or out of range pause their subscriber: its rows stay queued,
// unleased, and the warning is said once however often the subscribers are reloaded, and once
// more when the limits are usable again.
TEST(ShardCore, UnusableLimitsAreWarnedOnceAcrossReloadsAndTheirRowsWait) {
  simulation sim;
  auto text_rate = simulation::subscriber(1, 1000.0, 100);
  text_rate.rate_text = "'fast'";
  text_rate.rate_per_sec = std::numeric_limits<double>::quiet_NaN();
  auto negative = simulation::subscriber(2, -5.0, 100);
  auto text_burst = simulation::subscriber(3, 1000.0, 100);
  text_burst.burst_text = "'big'";
  text_burst.burst = 0;
  const auto fine = simulation::subscriber(4, 4.0, 1);
  const std::vector<storage::subscriber_row> table{text_rate, negative, text_burst, fine};
  for (const auto id : {1, 2, 3}) {
    for (int i = 0; i < 3; ++i) sim.enqueue(id);
  }
  for (int i = 0; i < 8; ++i) sim.enqueue(4);
  // Reloaded every 3 s, as the storage thread does.
  for (int reload = 0; reload < 4; ++reload) {
    sim.load(table);
    sim.run_for(3s);
  }
  const auto said = [&](const std::string& part) {
    return std::count_if(sim.log().lines.begin(), sim.log().lines.end(), [&](const auto& line) {
      return line.text.find(part) != std::string::npos;
    });
  };
  EXPECT_EQ(said("subscriber 1: rate_per_sec 'fast' is not a number"), 1);
  EXPECT_EQ(said("subscriber 2: rate_per_sec -5"), 1);
  EXPECT_EQ(said("subscriber 3: burst 'big'"), 1);
  EXPECT_EQ(said("treated as paused"), 3);
  EXPECT_EQ(sim.requests.size(), 8u) << "only the usable subscriber's rows go";
  for (const auto& claim : sim.claims) {
    for (const auto& asked : claim) {
      EXPECT_FALSE(asked.subscriber_id != 4 && asked.rows > 0)
          << "rows claimed for paused subscriber " << asked.subscriber_id;
    }
  }
  for (const auto& [id, queued] : sim.queue.rows) {
    if (queued.row.subscriber_id != 4) {
      EXPECT_EQ(queued.now, queue_row::state::pending) << id;
    }
  }

  // Usable again: said once, and its rows go.
  text_rate.rate_text.reset();
  text_rate.rate_per_sec = 1000;
  sim.load({text_rate, negative, text_burst, fine});
  sim.run_for(3s);
  sim.load({text_rate, negative, text_burst, fine});
  sim.run_for(1s);
  EXPECT_EQ(said("subscriber 1: rate and burst are usable again"), 1);
  EXPECT_EQ(sim.requests.size(), 11u);
}

TEST(ShardCore, A410DeactivatesTheSubscriberAndItsOtherRowsStayQueued) {
  simulation sim;
  sim.partner = [](const received&) { return answer{.status = 410}; };
  auto row = simulation::subscriber(1, 100.0, 1);
  row.max_in_flight = 1;
  sim.load({row});
  for (int i = 0; i < 10; ++i) sim.enqueue(1);
  sim.run_for(2s);
  EXPECT_EQ(sim.requests.size(), 1u);
  EXPECT_EQ(sim.deactivated, std::vector<std::int64_t>{1});
  EXPECT_EQ(sim.count_rows(queue_row::state::dead), 1);
  EXPECT_EQ(sim.count_rows(queue_row::state::pending), 9);
  // The operator sees it deactivated, by name, with how to send to it again.
  const auto held = sim.metrics().held_subscribers();
  ASSERT_EQ(held.size(), 1u);
  EXPECT_EQ(held[0].id, 1);
  EXPECT_EQ(held[0].kind, "deactivated");
  EXPECT_NE(held[0].reason.find("surge subscriber enable 1"), std::string::npos) << held[0].reason;
}

// What the operator's view reads of a partner: its pace lowered by 503s, what it really
// takes, its last error, and since when its circuit is open.
TEST(ShardCore, APartnerSlowedBy503sIsPublishedWithItsPaceItsRateAndItsLastError) {
  simulation sim;
  int answered = 0;
  sim.partner = [&](const received&) {
    return ++answered % 3 == 0 ? answer{.status = 503} : answer{};
  };
  sim.load({simulation::subscriber(1, 30.0, 5)});
  for (int i = 0; i < 2000; ++i) sim.enqueue(1);
  sim.run_for(20s);
  const auto view = sim.metrics().partners();
  ASSERT_EQ(view.size(), 1u);
  EXPECT_EQ(view[0].state, partner_state::slowed) << view[0].reason;
  EXPECT_LT(view[0].paced_rate, 30);
  EXPECT_GT(view[0].achieved_rate, 0);
  EXPECT_LE(view[0].achieved_rate, 30);
  EXPECT_NE(view[0].last_error.find("503"), std::string::npos) << view[0].last_error;
  EXPECT_NE(view[0].reason.find("of 30/s"), std::string::npos) << view[0].reason;
}

TEST(ShardCore, AnOpenCircuitIsPublishedWithTheMomentItOpened) {
  simulation sim;
  sim.partner = [](const received&) { return answer{.status = 500}; };
  sim.load({simulation::subscriber(1, 100.0, 100)});
  for (int i = 0; i < 50; ++i) sim.enqueue(1);
  const double started = sim.unix_now();
  sim.run_for(3s);
  const auto view = sim.metrics().partners();
  ASSERT_EQ(view.size(), 1u);
  EXPECT_EQ(view[0].state, partner_state::circuit_open);
  EXPECT_GE(view[0].since_unix, started);
  EXPECT_LT(view[0].since_unix, started + 1);
}

TEST(ShardCore, AQuietSubscriberIsPolledLessOftenUntilRowsArrive) {
  simulation sim;
  sim.load({simulation::subscriber(1, 100.0, 1)});
  sim.run_for(3s);
  const auto polls = sim.claims.size();
  // Polls back off from 100 ms to 500 ms: about 7 in 3 s, not one per 5 ms demand round.
  EXPECT_GE(polls, 5u);
  EXPECT_LE(polls, 10u);
  sim.enqueue(1);
  sim.new_rows({1});
  ASSERT_TRUE(sim.run_until([&] { return sim.all_rows(queue_row::state::done); }, 100ms))
      << "new rows end the backoff";
}

// A URL whose host resolves only to refused addresses (a VPN partner on 10.x, DNS pointing at
// loopback for a moment) is the subscriber's state: held, its rows queued with no attempt spent,
// tried again after the hold; the other subscribers go on.
TEST(ShardCore, ARefusedTargetHoldsItsSubscriberAndSpendsNoRow) {
  simulation sim;
  sim.load({simulation::subscriber(1, 50.0, 10), simulation::subscriber(2, 50.0, 10)});
  for (int i = 0; i < 20; ++i) {
    sim.enqueue(1);
    sim.enqueue(2);
  }
  sim.partner = [](const received& r) {
    if (r.subscriber != 1) return answer{};
    return answer{.error = proto::transport_error::refused_target,
                  .detail = "refused non-public address 10.0.0.5 (private_use)"};
  };
  sim.run_for(10s);
  EXPECT_EQ(sim.requests_of(2).size(), 20u);
  const auto tried = sim.requests_of(1).size();
  EXPECT_GE(tried, 1u);
  EXPECT_LE(tried, 16u) << "only what was already in flight when the first refusal came";
  int held = 0;
  for (const auto& [id, queued] : sim.queue.rows) {
    if (queued.row.subscriber_id != 1) continue;
    EXPECT_EQ(queued.now, queue_row::state::pending) << "row " << id;
    EXPECT_EQ(queued.row.attempts, 0) << "row " << id;
    held += queued.row.next_attempt_at >= sim.unix_now() + 49 ? 1 : 0;
  }
  EXPECT_EQ(held, 20) << "every row waits out the hold";
  // After the hold the URL is tried again, once, and held again.
  sim.run_for(55s);
  const auto retried = sim.requests_of(1).size() - tried;
  EXPECT_GE(retried, 1u);
  EXPECT_LE(retried, 16u);
}

// `rows` rows of one subscriber at 50/s (burst 10) ordered by video, over `keys` videos in turn,
// with outcomes written on the storage thread's commit timing.
void queue_ordered(simulation& sim, int rows, int keys) {
  sim.commits = commit_timing{};
  auto subscriber = simulation::subscriber(1, 50.0, 10);
  subscriber.order = proto::order_rule{.pointer = "/video_id"};
  sim.load({subscriber});
  for (int i = 0; i < rows; ++i) {
    sim.enqueue(1, R"({"video_id":"v)" + std::to_string(i % keys) + R"("})");
  }
}

TEST(ShardCore, OneHotOrderedKeyMovesAtItsPartnersPaceNotAtTheIdlePoll) {
  // A viral spike is mostly one video: one key, each row waiting for the one before it. A
  // finished row's write rides with the claim of the key's next row.
  simulation sim;
  queue_ordered(sim, 120, 1);
  const auto start = sim.now();
  ASSERT_TRUE(sim.run_until([&] { return sim.all_rows(queue_row::state::done); }, 60s));
  const auto sent = sim.requests_of(1);
  ASSERT_EQ(sent.size(), 120u);
  steady::duration widest{};
  for (std::size_t i = 1; i < sent.size(); ++i)
    widest = std::max(widest, sent[i].at - sent[i - 1].at);
  // One row per round trip: the partner's 20 ms, a storage cycle and a claim, and well under
  // the idle poll's 100 ms floor.
  EXPECT_LT(widest, 60ms);
  EXPECT_LT(sent.back().at - start, 120 * 40ms);
  for (std::size_t i = 0; i < sent.size(); ++i) {
    EXPECT_EQ(sent[i].rows, std::vector<std::int64_t>{static_cast<std::int64_t>(i + 1)});
  }
}

TEST(ShardCore, TenOrderedKeysGoTogetherAtTheSubscribersRate) {
  simulation sim;
  queue_ordered(sim, 200, 10);
  const auto start = sim.now();
  ASSERT_TRUE(sim.run_until([&] { return sim.all_rows(queue_row::state::done); }, 60s));
  const auto sent = sim.requests_of(1);
  ASSERT_EQ(sent.size(), 200u);
  // 200 rows at 50/s after a burst of 10: about 3.8 s; at least 90 % of the rate.
  EXPECT_LE(std::chrono::duration<double>(sent.back().at - start).count(), 190 / (0.9 * 50.0));
  EXPECT_LE(most_in_window(sent, 1s), 50 + 10);
}

}  // namespace
}  // namespace surge::engine
