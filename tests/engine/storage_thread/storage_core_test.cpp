// The storage core's rules, carried out by its executor, on a simulated clock against a queue kept
// in memory (tests/engine/storage_thread/storage_simulation.hpp).
#include "engine/storage_thread/storage_core.hpp"

#include <gtest/gtest.h>

#include "tests/engine/storage_thread/storage_simulation.hpp"

namespace surge::engine::testing {
namespace {

using kind = storage::error::kind;

storage_core_config with_backoff(std::chrono::milliseconds backoff) {
  auto config = storage_simulation::default_config();
  config.storage.error_backoff = backoff;
  return config;
}

TEST(StorageCore, StartsWithAReloadAndARenewalBeforeAnyClaim) {
  storage_simulation sim;
  EXPECT_EQ(sim.store.renewals, 1);
  EXPECT_TRUE(sim.store.cycles.empty());
  EXPECT_EQ(sim.core().sendable().size(), 2U);
}

TEST(StorageCore, AnswersAClaimWithTheRowsOfTheSubscriberAsked) {
  storage_simulation sim(storage_simulation::default_config(), 2);
  sim.add_rows(1, 3);
  sim.add_rows(2, 2);
  sim.ask(1, 1, 10);
  sim.ask(0, 2, 1);
  sim.round();
  ASSERT_EQ(sim.store.cycles.size(), 1U);
  EXPECT_EQ(sim.store.cycles[0].size(), 2U);  // both shards' demand in one cycle
  EXPECT_EQ(sim.take_rows(1).size(), 3U);
  EXPECT_EQ(sim.take_rows(0).size(), 1U);
}

TEST(StorageCore, AFailedClaimBacksOffAndClaimsNothingMeanwhile) {
  storage_simulation sim(with_backoff(500ms));
  sim.add_rows(1, 5);
  sim.fail(db_call::cycle, kind::busy);
  sim.ask(0, 1, 5);
  sim.round();
  ASSERT_EQ(sim.answers.size(), 1U);  // answered at once, empty, so the shard asks again
  EXPECT_TRUE(sim.answers[0].reply.rows.empty());
  EXPECT_EQ(sim.counters.storage_errors.load(), 1);
  EXPECT_TRUE(sim.log.says("claiming failed, will retry"));

  // Asked again within the backoff: held, not tried.
  sim.ask(0, 1, 5);
  sim.run_for(490ms);
  EXPECT_EQ(sim.store.cycles.size(), 1U);
  EXPECT_TRUE(sim.core().backing_off(sim.now()));
  sim.run_for(20ms);
  EXPECT_EQ(sim.store.cycles.size(), 2U);
  EXPECT_EQ(sim.take_rows().size(), 5U);
}

TEST(StorageCore, AFailedOutcomeWriteIsRetriedAfterTheBackoffAndNotWrittenTwice) {
  auto config = storage_simulation::default_config();
  config.storage.outcome_commits.rows = 4;
  storage_simulation sim(config);
  const auto sent = sim.claim_new(1, 8);
  ASSERT_EQ(sent.size(), 8U);
  sim.submit(sent);
  sim.fail(db_call::write, kind::busy);
  sim.fail(db_call::write, kind::busy);
  sim.run_for(5ms);
  EXPECT_EQ(sim.rows_in(queue_row::state::done), 0);
  EXPECT_EQ(sim.counters.storage_errors.load(), 1);
  sim.run_for(config.storage.error_backoff + 10ms);
  // The second try failed as well; the third, a backoff later, writes everything once.
  EXPECT_EQ(sim.counters.storage_errors.load(), 2);
  sim.run_for(config.storage.error_backoff + 10ms);
  EXPECT_EQ(sim.rows_in(queue_row::state::done), 8);
  for (const auto& [id, row] : sim.store.queue.rows) EXPECT_EQ(row.outcomes.size(), 1U) << id;
  EXPECT_EQ(sim.counters.lost_leases.load(), 0);
}

TEST(StorageCore, AStatementTimeoutHalvesTheClaimUntilItFits) {
  storage_simulation sim;
  sim.add_rows(1, 100);
  sim.fail(db_call::cycle, kind::timed_out, 2);
  sim.ask(0, 1, 100);
  sim.round();
  EXPECT_EQ(sim.core().claim_rows_cap(), 50U);
  EXPECT_TRUE(sim.log.says("cancelled by the statement timeout"));
  // No backoff: the smaller claim goes at once.
  sim.ask(0, 1, 100);
  sim.round();
  ASSERT_EQ(sim.store.cycles.size(), 2U);
  EXPECT_EQ(sim.store.cycles[1][0].rows, 50);
  EXPECT_EQ(sim.core().claim_rows_cap(), 25U);
  sim.ask(0, 1, 100);
  sim.round();
  EXPECT_EQ(sim.store.cycles[2][0].rows, 25);
  EXPECT_EQ(sim.take_rows().size(), 25U);
  // A claim that fit lets the cap grow back.
  EXPECT_EQ(sim.core().claim_rows_cap(), 50U);
}

TEST(StorageCore, ARefusedOutcomeIsDeadLetteredWithTheReasonAndTheOthersGoOn) {
  storage_simulation sim;
  const auto sent = sim.claim_new(1, 8);
  sim.refuse(sent[5].id, false);
  sim.submit(sent);
  sim.run_for(50ms);
  EXPECT_EQ(sim.rows_in(queue_row::state::done), 7);
  EXPECT_EQ(sim.store.queue.rows.at(sent[5].id).now, queue_row::state::dead);
  EXPECT_EQ(sim.store.queue.rows.at(sent[5].id).outcomes,
            std::vector<storage::outcome_kind>{storage::outcome_kind::dead});
  EXPECT_EQ(sim.counters.refused_outcomes.load(), 1);
  EXPECT_EQ(sim.counters.dead.load(), 1);
  EXPECT_TRUE(sim.core().quarantined().empty());
  EXPECT_EQ(sim.counters.storage_errors.load(), 0);
}

TEST(StorageCore, ARowRefusedEvenAsDeadIsQuarantinedAndNeverClaimedAgain) {
  auto config = storage_simulation::default_config();
  config.storage.lease = 2s;
  storage_simulation sim(config);
  const auto sent = sim.claim_new(1, 4);
  ASSERT_EQ(sent.size(), 4U);
  const auto bad = sent[2].id;
  sim.refuse(bad, true);
  sim.submit(sent);
  sim.run_for(50ms);
  EXPECT_EQ(sim.rows_in(queue_row::state::done), 3);
  ASSERT_EQ(sim.core().quarantined().count(bad), 1U);
  EXPECT_TRUE(sim.log.says("quarantined"));
  EXPECT_TRUE(sim.store.queue.rows.at(bad).outcomes.empty());

  // Its lease runs out and it is due again: claimed by the database, never handed to a shard.
  sim.run_for(3s, 50ms);
  sim.ask(0, 1, 4);
  sim.round();
  EXPECT_GE(sim.store.cycles.size(), 2U);
  EXPECT_TRUE(sim.take_rows().empty());
}

TEST(StorageCore, ARefusedRowInAClaimsCycleIsSettledAndTheClaimGoesOn) {
  storage_simulation sim;
  sim.add_rows(1, 4);
  sim.add_rows(2, 3);
  sim.ask(0, 1, 4);
  sim.round();
  const auto sent = sim.take_rows();
  sim.refuse(sent[0].id, false);
  sim.submit(sent);
  sim.advance(30ms);  // the outcomes are due and ride with the next claim
  sim.ask(0, 2, 3);
  sim.round();
  EXPECT_EQ(sim.take_rows().size(), 3U);  // the claim went on after the outcomes were settled
  EXPECT_EQ(sim.store.queue.rows.at(sent[0].id).now, queue_row::state::dead);
  EXPECT_EQ(sim.rows_in(queue_row::state::done), 3);
}

TEST(StorageCore, OutcomesAreCommittedAtTheIntervalOrOnceEnoughWait) {
  auto config = storage_simulation::default_config();
  config.storage.outcome_commits = {.interval = 20ms, .rows = 10};
  storage_simulation sim(config);
  sim.add_rows(1, 30);
  sim.ask(0, 1, 30);
  sim.round();
  auto sent = sim.take_rows();
  ASSERT_EQ(sent.size(), 30U);
  // The first outcome goes at once: nothing was committed yet.
  sim.submit({sent.begin(), sent.begin() + 1});
  sim.advance(1ms);
  sim.round();
  ASSERT_EQ(sim.store.writes.size(), 1U);
  // Three wait for the interval since that commit.
  sim.submit({sent.begin() + 1, sent.begin() + 4});
  sim.run_for(15ms);
  EXPECT_EQ(sim.store.writes.size(), 1U);
  sim.run_for(10ms);
  ASSERT_EQ(sim.store.writes.size(), 2U);
  EXPECT_EQ(sim.store.writes[1], 3U);
  // Ten at once go without waiting.
  sim.submit({sent.begin() + 4, sent.begin() + 14});
  sim.advance(1ms);
  sim.round();
  ASSERT_EQ(sim.store.writes.size(), 3U);
  EXPECT_EQ(sim.store.writes[2], 10U);
  EXPECT_EQ(sim.rows_in(queue_row::state::done), 14);
}

// A subscriber whose row another session holds locked (a producer's open transaction) is asked
// for tokens every half second; the warning about it comes once per repeated_warning_interval
// while it lasts, not at each ask between cycles that do not ask for it.
TEST(StorageCore, ALockedSubscriberRowIsWarnedAboutOncePerIntervalNotAtEachAsk) {
  storage_simulation sim;
  sim.store.locked_subscribers.insert(1);
  sim.add_rows(2, 200);
  for (int i = 0; i < 120; ++i) {  // 60 s
    sim.core().claims_asked(0, {{.subscriber_id = 1, .tokens = 5}});
    sim.round();
    for (int j = 0; j < 5; ++j) {  // other cycles between the asks
      sim.ask(0, 2, 1);
      sim.run_for(100ms);
    }
  }
  int warnings = 0;
  for (const auto& line : sim.log.lines) {
    warnings +=
        line.text.find("subscriber row is locked by another database session") != std::string::npos;
  }
  EXPECT_GE(warnings, 2);
  EXPECT_LE(warnings, 3) << "one at once, then one per 30 s";
}

// What wakes the storage loop for a commit: outcomes that arrive, not those the core already keeps
// waiting (through a backoff, or behind a lock), which would wake it in a busy loop.
TEST(StorageCore, OnlyArrivingOutcomesMakeACommitDueAtOnce) {
  auto config = storage_simulation::default_config();
  config.storage.outcome_commits = {.interval = 20ms, .rows = 10};
  storage_simulation sim(config);
  const auto sent = sim.claim_new(1, 12);
  ASSERT_EQ(sent.size(), 12U);
  sim.submit(sent);  // handed in, not yet written: no round has run
  ASSERT_EQ(sim.core().outcomes_waiting(), 12U);
  EXPECT_FALSE(sim.core().commit_due_with(0)) << "the waiting ones alone must not wake the loop";
  EXPECT_TRUE(sim.core().commit_due_with(1));
}

TEST(StorageCore, OutcomesDueRideWithTheClaim) {
  storage_simulation sim;
  sim.add_rows(1, 6);
  sim.ask(0, 1, 3);
  sim.round();
  sim.submit(sim.take_rows());
  sim.advance(30ms);
  sim.ask(0, 1, 3);
  sim.round();
  EXPECT_TRUE(sim.store.writes.empty());  // no write of their own
  EXPECT_EQ(sim.rows_in(queue_row::state::done), 3);
  EXPECT_EQ(sim.take_rows().size(), 3U);
}

TEST(StorageCore, RenewsOwnershipAndTellsTheShardsWhatChanged) {
  auto config = storage_simulation::default_config();
  config.storage.ownership_renew = 1s;
  config.storage.ownership_handoff_poll = 100ms;
  storage_simulation sim(config, 2);
  EXPECT_EQ(sim.store.renewals, 1);
  sim.run_for(900ms);
  EXPECT_EQ(sim.store.renewals, 1);
  sim.store.ownership.push_back({.taken = {4, 5}, .released = {}, .lost = {}, .awaited = 1});
  sim.run_for(150ms);
  EXPECT_EQ(sim.store.renewals, 2);
  // Each shard hears of its own subscribers (engine/handoff.hpp: shard_of).
  ASSERT_EQ(sim.owner_changes.size(), 2U);
  for (int shard : {0, 1}) {
    EXPECT_EQ(sim.owner_changes[shard].shard, shard);
    EXPECT_TRUE(sim.owner_changes[shard].taken);
    EXPECT_EQ(sim.owner_changes[shard].subscribers, (std::vector<std::int64_t>{4 + shard}));
  }
  // A subscriber awaited from another drain: the next renewal comes after the handoff poll.
  sim.store.ownership.push_back({.taken = {}, .released = {7}, .lost = {9}, .awaited = 0});
  sim.run_for(110ms);
  EXPECT_EQ(sim.store.renewals, 3);
  ASSERT_EQ(sim.owner_changes.size(), 3U);
  EXPECT_EQ(sim.owner_changes[2].shard, 1);
  EXPECT_FALSE(sim.owner_changes[2].taken);
  EXPECT_EQ(sim.owner_changes[2].subscribers, (std::vector<std::int64_t>{7, 9}));
  EXPECT_TRUE(sim.log.says("lost ownership of 1 subscribers"));
  sim.run_for(500ms);
  EXPECT_EQ(sim.store.renewals, 3);  // back to the full interval
}

TEST(StorageCore, AStopReleasesOwnershipAndAnswersClaimsEmpty) {
  storage_simulation sim;
  sim.add_rows(1, 3);
  sim.core().stop_claiming();
  sim.ask(0, 1, 3);
  sim.round();
  EXPECT_EQ(sim.store.releases, 1);
  EXPECT_TRUE(sim.store.cycles.empty());
  ASSERT_EQ(sim.answers.size(), 1U);
  EXPECT_TRUE(sim.answers[0].reply.rows.empty());
  sim.run_for(50ms);
  EXPECT_EQ(sim.store.releases, 1);
  EXPECT_EQ(sim.counters.owned_subscribers.load(), 0);
}

TEST(StorageCore, AFaultTheDrainCannotOutlastEndsIt) {
  storage_simulation sim;
  sim.add_rows(1, 3);
  sim.fail(db_call::cycle, kind::read_only);
  sim.ask(0, 1, 3);
  sim.round();
  ASSERT_EQ(sim.stops.size(), 1U);
  EXPECT_FALSE(sim.core().claiming());
  EXPECT_EQ(sim.answers.size(), 1U);
  sim.ask(0, 1, 3);
  sim.run_for(20ms);
  EXPECT_EQ(sim.store.cycles.size(), 1U);  // no claim after it
  EXPECT_EQ(sim.stops.size(), 1U);         // said once
}

TEST(StorageCore, AQueueFileDeletedUnderTheDrainEndsItAndTheEndRescuesItsLog) {
  storage_simulation sim;
  const auto sent = sim.claim_new(1, 3);
  ASSERT_EQ(sent.size(), 3U);
  sim.store.missing = "queue.db-wal was deleted";
  sim.run_for(1100ms);  // the next check of the database looks for the file
  ASSERT_EQ(sim.stops.size(), 1U);
  EXPECT_NE(sim.stops[0].find("queue.db-wal was deleted"), std::string::npos) << sim.stops[0];
  EXPECT_FALSE(sim.core().claiming());
  // The outcomes of the rows sent before are still written, and the end rescues the log.
  sim.submit(sent);
  sim.core().finish(0);
  sim.run_for(50ms);
  ASSERT_TRUE(sim.finished());
  EXPECT_EQ(sim.rows_in(queue_row::state::done), 3);
  EXPECT_EQ(sim.rescue_report(), "copied 7 pages of the lost log into the queue file");
  sim.run_for(2s);
  EXPECT_EQ(sim.stops.size(), 1U);  // said once
}

TEST(StorageCore, AQueueThatCannotBeReadAtTheStartFailsTheStart) {
  EXPECT_THROW(storage_simulation(
                   storage_simulation::default_config(), 1,
                   [](memory_drain_store& store) { store.fail(db_call::reload, kind::busy); }),
               storage::error);
}

TEST(StorageCore, AFailedReloadRenewalOrPingLaterIsCountedAndTriedAgainAndEndsNothing) {
  storage_simulation sim(with_backoff(100ms));
  sim.add_rows(1, 2);
  sim.fail(db_call::reload, kind::busy);
  sim.fail(db_call::renew, kind::busy);
  sim.fail(db_call::check, kind::busy);
  const int renewals = sim.store.renewals;
  sim.run_for(7s, 10ms);
  EXPECT_EQ(sim.counters.storage_errors.load(), 3);
  EXPECT_TRUE(sim.stops.empty());
  EXPECT_TRUE(sim.core().claiming());
  EXPECT_GE(sim.store.renewals, renewals + 3);  // the failed one and those after it
  sim.ask(0, 1, 2);
  sim.round();
  EXPECT_EQ(sim.take_rows().size(), 2U);
}

// Unspent tokens the database does not take back are kept by nobody: the partner gets fewer
// requests for a moment. The end says so and goes on rather than wait on them.
TEST(StorageCore, TokensTheDatabaseWillNotTakeBackAreSaidLostAndTheEndGoesOn) {
  storage_simulation sim;
  sim.fail(db_call::tokens, kind::busy);
  sim.core().stop_claiming();
  sim.core().tokens_returned({{.subscriber_id = 1, .tokens = 2.5}});
  sim.core().finish(1);
  sim.run_for(50ms);
  ASSERT_TRUE(sim.finished());
  EXPECT_TRUE(sim.store.given_back.empty());
  EXPECT_TRUE(sim.log.says("could not give unspent tokens back")) << sim.log.lines.size();
  EXPECT_EQ(sim.store.releases, 1);
}

TEST(StorageCore, TheEndWritesOutcomesGivesTokensBackAndReports) {
  storage_simulation sim;
  sim.add_rows(1, 4);
  sim.ask(0, 1, 3);
  sim.round();
  sim.submit(sim.take_rows());
  sim.core().stop_claiming();
  sim.core().tokens_returned({{.subscriber_id = 1, .tokens = 2.5}});
  sim.core().finish(1);
  sim.advance(1ms);
  sim.round();
  ASSERT_TRUE(sim.finished());
  EXPECT_TRUE(sim.core().finished());
  EXPECT_EQ(sim.rows_in(queue_row::state::done), 3);
  EXPECT_EQ(sim.finished()->remaining, 1);
  EXPECT_EQ(sim.finished()->unwritten, 0);
  ASSERT_EQ(sim.store.given_back.size(), 1U);
  EXPECT_EQ(sim.store.given_back[0].tokens, 2.5);
  EXPECT_EQ(sim.store.releases, 1);
}

TEST(StorageCore, TheEndWaitsForADatabaseThatRefusesWritesUntilItIsAbandoned) {
  storage_simulation sim(with_backoff(500ms));
  sim.submit(sim.claim_new(1, 3));
  sim.fail(db_call::write, kind::busy, 100);
  sim.core().stop_claiming();
  sim.core().finish(0);
  sim.round();
  EXPECT_FALSE(sim.finished());
  // It tries again each backoff, no sooner.
  EXPECT_EQ(sim.core().next_wake(), sim.now() + 500ms);
  const auto tried = sim.store.writes.size();
  sim.advance(500ms);
  sim.round();
  EXPECT_EQ(sim.store.writes.size(), tried + 1);
  EXPECT_FALSE(sim.finished());
  sim.core().abandon();
  sim.advance(1ms);
  sim.round();
  ASSERT_TRUE(sim.finished());
  EXPECT_EQ(sim.finished()->unwritten, 3);
  EXPECT_GT(sim.finished()->last_lease, sim.unix_now());
  EXPECT_EQ(sim.rows_in(queue_row::state::done), 0);
}

storage_core_config until_drained_config() {
  auto config = storage_simulation::default_config();
  config.until_drained = true;
  config.storage.drained_check_interval = 250ms;
  config.storage.first_count_wait = 100ms;
  return config;
}

// A row held further ahead than any lease anyone takes (text, a unit mix-up, a typo in the
// column) would wait for ever: the sweep dead-letters it. Its horizon is the longest lease,
// ours or the other drainer's 30 s, plus the configured overrun.
TEST(StorageCore, TheSweepCountsARowHeldBeyondTheLongestLeaseAndItsOverrunAsStuck) {
  for (const auto& [lease, longest] : {std::pair{60s, 60s}, std::pair{10s, 30s}}) {
    auto config = storage_simulation::default_config();
    config.storage.lease = lease;
    config.storage.max_lease_overrun = 1h;
    storage_simulation sim(config);
    sim.run_for(config.stuck_row_sweep_interval + 5s, 100ms);
    ASSERT_FALSE(sim.store.sweeps.empty()) << "lease " << lease.count() << " s";
    for (const auto horizon : sim.store.sweeps) {
      EXPECT_NEAR(horizon, std::chrono::duration<double>(longest + 1h).count(), 1e-3);
    }
  }
}

TEST(StorageCore, UntilDrainedEndsWithinAFewChecksOfTheLastOutcome) {
  // The drain ends once two checks in a row find nothing left. With the end in sight (the shards
  // idle, the backlog estimated empty) they come at the short interval, not the drained-check
  // one: a drain of 20 s should not spend half a second more finding out that it is done.
  storage_simulation sim(until_drained_config());
  const auto sent = sim.claim_new(1, 2);
  sim.counters.in_flight.store(2);  // as the shard counts the requests it sends
  sim.run_for(1s);
  EXPECT_EQ(sim.drained, 0);  // two rows leased, not finished
  sim.counters.in_flight.store(0);
  sim.submit(sent);
  const auto submitted = sim.now();
  while (sim.drained == 0 && sim.now() - submitted < 2s) sim.run_for(5ms);
  EXPECT_EQ(sim.drained, 1);
  EXPECT_LE(sim.now() - submitted, 100ms);
  sim.run_for(1s);
  EXPECT_EQ(sim.drained, 1);  // said once
}

TEST(StorageCore, UntilDrainedEndsPromptlyWhenTheLastOutcomesReachItAfterTheShardsWentIdle) {
  // A shard holds its outcomes for a few milliseconds (its flush) after their requests stop
  // counting as in flight. A check in that gap must not take the shards to be idle with rows
  // still due: that check would put the end off by the drained-check interval.
  storage_simulation sim(until_drained_config());
  const auto sent = sim.claim_new(1, 2);
  sim.counters.in_flight.store(2);
  sim.run_for(1100ms);  // between two checks, which come every 250 ms while the shards work
  auto held = sim.settle(sent);
  sim.counters.in_flight.store(0);
  sim.run_for(5ms);  // the storage thread's round in the gap, where the end looks in sight
  EXPECT_EQ(sim.drained, 0);
  sim.hand_over(std::move(held));
  const auto handed_over = sim.now();
  while (sim.drained == 0 && sim.now() - handed_over < 2s) sim.run_for(5ms);
  EXPECT_EQ(sim.drained, 1);
  EXPECT_LE(sim.now() - handed_over, 100ms);
}

TEST(StorageCore, UntilDrainedLeavesTheRowsOfASubscriberThatCannotSendInTheQueue) {
  auto config = until_drained_config();
  config.storage.subscriber_reload_interval = 500ms;
  storage_simulation sim(config);
  sim.add_rows(2, 3);
  sim.store.subscribers = {{1, true}, {2, false}};  // subscriber 2 is deactivated
  sim.run_for(400ms);
  EXPECT_EQ(sim.drained, 0);  // its rows are waited for until the next reload says so
  sim.run_for(2s);
  EXPECT_EQ(sim.drained, 1);
  EXPECT_EQ(sim.rows_in(queue_row::state::pending), 3);
}

TEST(StorageCore, UntilDrainedWaitsWhileTheShardsHaveWork) {
  storage_simulation sim(until_drained_config());
  sim.counters.in_flight.store(1);
  sim.run_for(2s);
  EXPECT_GE(sim.store.backlog_counts, 2);
  EXPECT_EQ(sim.drained, 0);
  sim.counters.in_flight.store(0);
  sim.run_for(1s);
  EXPECT_EQ(sim.drained, 1);
}

TEST(StorageCore, UntilDrainedWaitsForRetriesDueWithinItsWait) {
  auto config = until_drained_config();
  config.until_drained_retry_wait = 5s;
  storage_simulation sim(config);
  sim.add_rows(1, 1, 3.0);  // a retry due in three seconds
  sim.run_for(2s);
  EXPECT_EQ(sim.drained, 0);
  sim.run_for(1100ms);
  EXPECT_EQ(sim.drained, 0);
  sim.ask(0, 1, 1);
  sim.round();
  const auto sent = sim.take_rows();
  ASSERT_EQ(sent.size(), 1U);
  sim.submit(sent);
  sim.run_for(1s);
  EXPECT_EQ(sim.drained, 1);
}

TEST(StorageCore, WhileARetryDueWithinTheWaitHoldsTheEndTheChecksComeAtTheDrainedCheckInterval) {
  // The shards are idle and nothing is due, but a retry falls due within --until-drained-wait:
  // the end is not near, so the checks (each a count and a look for the earliest retry) come
  // every 250 ms, not every few tens of milliseconds for the whole wait.
  auto config = until_drained_config();
  config.until_drained_retry_wait = 5s;
  storage_simulation sim(config);
  sim.add_rows(1, 1, 3.0);
  sim.run_for(2s);
  EXPECT_EQ(sim.drained, 0);
  EXPECT_LE(sim.store.backlog_counts, 10);
}

TEST(StorageCore, UntilDrainedDoesNotWaitForQuarantinedRows) {
  storage_simulation sim(until_drained_config());
  const auto sent = sim.claim_new(1, 2);
  sim.refuse(sent[0].id, true);
  sim.submit(sent);
  sim.run_for(2s);
  EXPECT_EQ(sim.core().quarantined().size(), 1U);
  EXPECT_EQ(sim.drained, 1);
}

// A count reads every due row: one that takes long spaces the next by 50 times its cost, so a
// large queue is not read over and over (engine/storage_thread/backlog_watch.hpp).
TEST(StorageCore, ABacklogCountThatTakesLongSpacesTheNextByItsCost) {
  storage_simulation sim;
  sim.count_takes = 40ms;
  sim.run_for(10s, 10ms);
  EXPECT_GE(sim.store.backlog_counts, 3);
  EXPECT_LE(sim.store.backlog_counts, 6);  // one every 2 s; at the 250 ms interval, about 40
}

TEST(StorageCore, WithoutUntilDrainedNothingEnds) {
  storage_simulation sim;
  sim.run_for(2s);
  EXPECT_GE(sim.store.backlog_counts, 2);
  EXPECT_LE(sim.store.backlog_counts,
            10);  // at the drained-check interval: nothing waits for the end
  EXPECT_EQ(sim.drained, 0);
}

}  // namespace
}  // namespace surge::engine::testing
