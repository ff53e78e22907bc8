// The PostgreSQL queue against a real throwaway server: the shared
// tables under their names, the steady-state drainer's own statements unchanged, claims that skip
// what another transaction holds, fenced outcomes in one statement per batch, the persisted
// bucket shared with the other drainer, ownership across drains, LISTEN/NOTIFY, and faults.
#include <gtest/gtest.h>

#include <algorithm>
#include <set>
#include <string>
#include <thread>

#include "proto/clock.hpp"
#include "storage/connection.hpp"
#include "storage/dead_letters.hpp"
#include "storage/drain_store.hpp"
#include "storage/error.hpp"
#include "storage/retention.hpp"
#include "storage/schema.hpp"
#include "storage/sqlite/maintenance.hpp"
#include "storage/sqlite/queue.hpp"
#include "storage/sqlite/schema.hpp"
#include "storage/sqlite/subscribers.hpp"
#include "tests/storage/sqlite/other_drainer_sql.hpp"
#include "tests/storage/test_db.hpp"
#include "tests/support/postgres_server.hpp"
#include "tests/support/sql_client.hpp"

namespace surge::storage {
namespace {

using surge::testing::postgres_server;
using surge::testing::sql_client;

struct pg_queue {
  std::string uri;
  connection db;
  sql_client sql;
  explicit pg_queue(postgres_server& server)
      : uri(server.create_database()), db({.location = uri}), sql(uri) {
    migrate(db, true);
  }
  std::int64_t subscriber(double rate = 100, std::int64_t burst = 10) {
    subscriber_row row;
    row.url = "http://127.0.0.1:9/";
    row.secret = "s";
    row.rate_per_sec = rate;
    row.burst = burst;
    row.tokens = static_cast<double>(burst);
    row.tokens_updated_at = proto::unix_now();
    return add_subscriber(db, row);
  }
  void rows(std::int64_t subscriber_id, int count) {
    for (int i = 0; i < count; ++i) {
      sql.exec(std::string(other_drainer_sql::insert_delivery),
               {std::to_string(subscriber_id), "video.trending", R"({"n":1})", "0",
                std::to_string(proto::unix_now())});
    }
  }
  std::unique_ptr<drain_store> store(const std::string& owner = {}) {
    return open_drain_store({.location = uri, .owner = owner});
  }
  // A subscriber with `queued` rows, and a drain's first claim of up to `claimed` of them.
  struct claimed_backlog {
    std::int64_t subscriber = 0;
    std::unique_ptr<drain_store> drain;
    std::vector<claimed_row> rows;
  };
  claimed_backlog claim_some(int queued, int claimed) {
    claimed_backlog out{.subscriber = subscriber(), .drain = store()};
    rows(out.subscriber, queued);
    out.drain->renew_ownership(proto::unix_now());
    subscriber_demand want{.subscriber_id = out.subscriber, .rows = claimed};
    out.rows =
        out.drain->write_and_claim({}, {}, {&want, 1}, proto::unix_now(), 30, INT64_MAX).claimed;
    return out;
  }
};

std::string text(const sql_client::row& row, std::size_t column) {
  return row.at(column).value_or("NULL");
}

// Each row delivered with a 200, and its attempt recorded when `recorded`.
std::vector<outcome> delivered(const std::vector<claimed_row>& rows, bool recorded) {
  std::vector<outcome> outcomes;
  for (const auto& row : rows) {
    outcome& o = outcomes.emplace_back();
    o.delivery_id = row.id;
    o.lease = row.lease;
    o.kind = outcome_kind::done;
    o.attempts = 1;
    o.last_status = 200;
    o.finished_at = proto::unix_now();
    o.has_attempt = recorded;
    o.attempt = {.delivery_id = row.id,
                 .subscriber_id = row.subscriber_id,
                 .attempt = 1,
                 .started_at = o.finished_at - 0.01,
                 .finished_at = o.finished_at,
                 .status_code = 200};
  }
  return outcomes;
}

// `surge dead show` and `dead replay --id` on PostgreSQL: one delivery in full, with the end of
// its last recorded attempt, and a replay of exactly the named rows.
TEST(PostgresQueue, FindsOneDeliveryAndReplaysDeadRowsById) {
  SURGE_REQUIRE_POSTGRES(server);
  pg_queue queue(*server);
  auto backlog = queue.claim_some(4, 4);
  ASSERT_EQ(backlog.rows.size(), 4u);
  auto outcomes = delivered(backlog.rows, true);
  for (auto& o : outcomes) {
    o.kind = outcome_kind::dead;
    o.last_status = 500;
    o.last_error = "attempt limit (HTTP 500)";
    o.attempt.status_code = 500;
  }
  backlog.drain->write_and_claim(outcomes, {}, {}, proto::unix_now(), 30, INT64_MAX);

  const auto shown = find_delivery(queue.db, backlog.rows[1].id);
  ASSERT_TRUE(shown.has_value());
  EXPECT_TRUE(shown->dead());
  EXPECT_EQ(shown->subscriber_id, backlog.subscriber);
  EXPECT_EQ(shown->event_type, "video.trending");
  EXPECT_EQ(shown->attempts, 1);
  EXPECT_EQ(shown->last_status, 500);
  EXPECT_EQ(shown->last_error, "attempt limit (HTTP 500)");
  EXPECT_EQ(shown->payload, R"({"n":1})");
  ASSERT_TRUE(shown->finished_at.has_value());
  EXPECT_DOUBLE_EQ(*shown->finished_at, outcomes[1].attempt.finished_at);
  EXPECT_FALSE(find_delivery(queue.db, 999999).has_value());

  dead_selection which;
  which.ids = *proto::id_set::parse(std::to_string(backlog.rows[0].id) + "," +
                                    std::to_string(backlog.rows[2].id));
  EXPECT_EQ(replay_dead(queue.db, which, proto::unix_now()).replayed, 2);
  std::vector<std::string> states;
  for (const auto& row : backlog.rows) states.push_back(find_delivery(queue.db, row.id)->status);
  EXPECT_EQ(states, (std::vector<std::string>{"pending", "dead", "pending", "dead"}));
  which.ids = {};
  EXPECT_EQ(list_dead(queue.db, which).size(), 2u);
}

TEST(PostgresQueue, MigrateMakesTheSharedTablesUnderTheirNamesAndIsIdempotent) {
  SURGE_REQUIRE_POSTGRES(server);
  pg_queue queue(*server);
  EXPECT_EQ(migrate(queue.db), 11) << "PostgreSQL counts its schema versions apart from SQLite";
  EXPECT_EQ(schema_version(queue.db), 11);
  // Every shared column under its name; `active` stays an integer.
  std::set<std::string> columns;
  for (const auto& row :
       queue.sql.query("SELECT table_name || '.' || column_name || ':' || data_type FROM "
                       "information_schema.columns WHERE table_name IN ('webhook_subscriber', "
                       "'webhook_delivery')")) {
    columns.insert(text(row, 0));
  }
  for (const char* expected :
       {"webhook_subscriber.id:bigint", "webhook_subscriber.url:text",
        "webhook_subscriber.secret:text", "webhook_subscriber.event_types:text",
        "webhook_subscriber.rate_per_sec:double precision", "webhook_subscriber.burst:integer",
        "webhook_subscriber.tokens:double precision",
        "webhook_subscriber.tokens_updated_at:double precision",
        "webhook_subscriber.active:integer", "webhook_delivery.id:bigint",
        "webhook_delivery.subscriber_id:bigint", "webhook_delivery.event_type:text",
        "webhook_delivery.payload:text", "webhook_delivery.status:text",
        "webhook_delivery.attempts:integer", "webhook_delivery.next_attempt_at:double precision",
        "webhook_delivery.locked_until:double precision",
        "webhook_delivery.created_at:double precision"}) {
    EXPECT_TRUE(columns.contains(expected)) << expected;
  }
  const auto attempt_indexes = [&queue] {
    std::set<std::string> names;
    for (const auto& row :
         queue.sql.query("SELECT indexname FROM pg_indexes WHERE tablename = 'surge_attempt'")) {
      names.insert(text(row, 0));
    }
    return names;
  };
  EXPECT_EQ(attempt_indexes(),
            (std::set<std::string>{"surge_attempt_pkey", "idx_attempt_started"}));
  // A queue left at version 4 gets the attempt index of version 5, and only that changes.
  queue.sql.exec(
      "CREATE INDEX idx_attempt_subscriber_started ON surge_attempt(subscriber_id, "
      "started_at)");
  queue.sql.exec("DELETE FROM surge_schema_version WHERE version >= 5");
  queue.sql.exec("INSERT INTO surge_schema_version(version, applied_at) VALUES (4, 0)");
  ASSERT_EQ(schema_version(queue.db), 4);
  EXPECT_EQ(migrate(queue.db), 11);
  EXPECT_EQ(attempt_indexes(),
            (std::set<std::string>{"surge_attempt_pkey", "idx_attempt_started"}));
}

// What `surge migrate` and `surge drain` say they added, on PostgreSQL: nothing on a current
// schema, Surge's tables and their indexes on a new database.
TEST(PostgresQueue, MigrateReportsWhatItAdded) {
  SURGE_REQUIRE_POSTGRES(server);
  pg_queue queue(*server);
  EXPECT_FALSE(migrate_reporting(queue.db).changed()) << migrate_reporting(queue.db).describe();
  connection fresh({.location = server->create_database()});
  const auto report = migrate_reporting(fresh, true);
  EXPECT_EQ(report.version_before, 0);
  EXPECT_EQ(report.version, 11);
  EXPECT_NE(std::find(report.tables.begin(), report.tables.end(), "surge_attempt"),
            report.tables.end());
  EXPECT_NE(report.describe().find("added tables "), std::string::npos) << report.describe();
}

TEST(PostgresQueue, TheSteadyStateDrainersStatementsRunUnchangedBesideSurge) {
  SURGE_REQUIRE_POSTGRES(server);
  pg_queue queue(*server);
  // The producer and the drainer as they predate Surge, through PDO-style placeholders.
  queue.sql.exec(other_drainer_sql::insert_subscriber,
                 {"http://127.0.0.1:9/", "secret", "*", "2", "4"});
  const auto id =
      static_cast<std::int64_t>(queue.sql.number("SELECT MAX(id) FROM webhook_subscriber"));
  queue.rows(id, 6);
  const double now = proto::unix_now();
  const auto claimed =
      queue.sql.exec(other_drainer_sql::claim(),
                     {std::to_string(now + 30), std::to_string(now), std::to_string(now), "2"});
  EXPECT_EQ(claimed, 2);
  const auto mine = queue.sql.query(other_drainer_sql::read_back, {std::to_string(now + 30)});
  ASSERT_EQ(mine.size(), 2u);
  for (const auto& row : mine) queue.sql.exec(other_drainer_sql::mark_done, {text(row, 0)});
  const auto bucket = queue.sql.query(other_drainer_sql::read_bucket, {std::to_string(id)});
  ASSERT_EQ(bucket.size(), 1u);
  queue.sql.exec(other_drainer_sql::write_bucket, {"1", std::to_string(now), std::to_string(id)});

  // Surge claims the rest; the two rows the other drainer finished are not among them.
  auto store = queue.store();
  // The store checks ownership against the wall clock: renewed now, not at `now` above.
  store->renew_ownership(proto::unix_now());
  subscriber_demand want{.subscriber_id = id, .rows = 10};
  const auto cycle = store->write_and_claim({}, {}, {&want, 1}, proto::unix_now(), 30, INT64_MAX);
  EXPECT_EQ(cycle.claimed.size(), 4u);
  for (const auto& row : cycle.claimed) {
    EXPECT_TRUE(std::none_of(mine.begin(), mine.end(),
                             [&](const auto& m) { return text(m, 0) == std::to_string(row.id); }));
  }
}

TEST(PostgresQueue, AClaimSkipsRowsAnotherTransactionHoldsInsteadOfWaiting) {
  SURGE_REQUIRE_POSTGRES(server);
  pg_queue queue(*server);
  const auto id = queue.subscriber();
  queue.rows(id, 5);
  // Another drainer mid-claim: it holds the two oldest rows locked in an open transaction.
  sql_client other(queue.uri);
  other.begin();
  const auto held = other.query(
      "SELECT id FROM webhook_delivery ORDER BY next_attempt_at, id LIMIT 2 FOR UPDATE");
  ASSERT_EQ(held.size(), 2u);

  auto store = queue.store();
  store->renew_ownership(proto::unix_now());
  subscriber_demand want{.subscriber_id = id, .rows = 5};
  // Without SKIP LOCKED this claim would wait on the other transaction, which commits only
  // after it: the test would hang until ctest's timeout fails it. No timing is asserted.
  const auto cycle = store->write_and_claim({}, {}, {&want, 1}, proto::unix_now(), 30, INT64_MAX);
  ASSERT_EQ(cycle.claimed.size(), 3u);
  for (const auto& row : cycle.claimed) {
    EXPECT_NE(std::to_string(row.id), text(held[0], 0));
    EXPECT_NE(std::to_string(row.id), text(held[1], 0));
  }
  other.commit();
}

TEST(PostgresQueue, OutcomesAreFencedOnTheLeaseAndALostLeaseIsReported) {
  SURGE_REQUIRE_POSTGRES(server);
  pg_queue queue(*server);
  const auto id = queue.subscriber();
  queue.rows(id, 4);
  auto store = queue.store();
  store->renew_ownership(proto::unix_now());
  subscriber_demand want{.subscriber_id = id, .rows = 4};
  const auto claimed =
      store->write_and_claim({}, {}, {&want, 1}, proto::unix_now(), 30, INT64_MAX).claimed;
  ASSERT_EQ(claimed.size(), 4u);
  // The last row's lease expired and another drainer re-claimed it.
  queue.sql.exec("UPDATE webhook_delivery SET locked_until = locked_until + 1 WHERE id = ?",
                 {std::to_string(claimed[3].id)});
  std::vector<outcome> outcomes;
  for (std::size_t i = 0; i < claimed.size(); ++i) {
    outcome& o = outcomes.emplace_back();
    o.delivery_id = claimed[i].id;
    o.lease = claimed[i].lease;
    o.attempts = 1;
    o.has_attempt = true;
    o.attempt = {.delivery_id = claimed[i].id,
                 .subscriber_id = id,
                 .attempt = 1,
                 .started_at = 1,
                 .finished_at = 2,
                 .status_code = i == 1 ? 500 : 200};
    if (i == 1) {
      o.kind = outcome_kind::retry;
      o.next_attempt_at = proto::unix_now() + 60;
      o.last_status = 500;
      o.last_error = "HTTP 500";
    } else if (i == 2) {
      o.kind = outcome_kind::dead;
      o.last_status = 400;
      o.last_error = "HTTP 400";
    } else {
      o.kind = outcome_kind::done;
      o.last_status = 200;
      o.finished_at = 2;
    }
  }
  const auto report = store->write_outcomes(outcomes, {});
  EXPECT_EQ(report.applied, 3);
  ASSERT_EQ(report.lost_leases.size(), 1u);
  EXPECT_EQ(report.lost_leases[0], claimed[3].id);
  auto state = [&](std::int64_t row) {
    const auto found = queue.sql.query(
        "SELECT status, attempts, last_status, COALESCE(last_error, ''), locked_until "
        "FROM webhook_delivery WHERE id = ?",
        {std::to_string(row)});
    return text(found.at(0), 0) + "/" + text(found.at(0), 1) + "/" + text(found.at(0), 2) + "/" +
           text(found.at(0), 3) + "/" + text(found.at(0), 4);
  };
  EXPECT_EQ(state(claimed[0].id), "done/1/200//0");
  EXPECT_EQ(state(claimed[1].id), "retry/1/500/HTTP 500/0");
  EXPECT_EQ(state(claimed[2].id), "dead/1/400/HTTP 400/0");
  EXPECT_EQ(state(claimed[3].id).substr(0, 10), "pending/0/");
  // Every attempt recorded, the fenced-out one included: the partner saw it.
  EXPECT_EQ(queue.sql.number("SELECT COUNT(*) FROM surge_attempt"), 4);
}

// A cycle's statements go to the server in a few pipelines (storage/postgres/session.hpp): the
// attempt records travel with the token read that follows them. When the server refuses them,
// the whole cycle fails and writes nothing, and the next cycle writes the same outcomes.
TEST(PostgresQueue, ARefusedAttemptRecordFailsTheWholeCycleAndTheNextOneWritesIt) {
  SURGE_REQUIRE_POSTGRES(server);
  pg_queue queue(*server);
  auto [id, store, claimed] = queue.claim_some(3, 2);
  ASSERT_EQ(claimed.size(), 2u);
  const auto outcomes = delivered(claimed, true);
  queue.sql.exec(
      "CREATE FUNCTION refuse() RETURNS trigger LANGUAGE plpgsql AS "
      "$$ BEGIN RAISE EXCEPTION 'refused by the test'; END $$");
  queue.sql.exec(
      "CREATE TRIGGER refuse BEFORE INSERT ON surge_attempt FOR EACH ROW EXECUTE FUNCTION "
      "refuse()");
  subscriber_demand more{.subscriber_id = id, .rows = 1, .tokens = 1};
  try {
    store->write_and_claim(outcomes, {}, {&more, 1}, proto::unix_now(), 30, INT64_MAX);
    FAIL() << "the refused attempt records were not reported";
  } catch (const error& failure) {
    EXPECT_EQ(failure.what_kind(), error::kind::row_rejected) << failure.what();
    EXPECT_NE(std::string(failure.what()).find("surge_attempt"), std::string::npos)
        << "names the statement that failed, not the one it travelled with: " << failure.what();
  }
  EXPECT_EQ(queue.sql.number("SELECT COUNT(*) FROM webhook_delivery WHERE status = 'done'"), 0);
  EXPECT_EQ(queue.sql.number("SELECT COUNT(*) FROM webhook_delivery WHERE locked_until = 0"), 1)
      << "the failed cycle claimed nothing";
  // The same store, the same session: the next cycle writes the outcomes and claims (its
  // ownership renewed as the drain's heartbeat would have, however long the above took).
  queue.sql.exec("DROP TRIGGER refuse ON surge_attempt");
  store->renew_ownership(proto::unix_now());
  const auto cycle =
      store->write_and_claim(outcomes, {}, {&more, 1}, proto::unix_now(), 30, INT64_MAX);
  EXPECT_EQ(cycle.written.applied, 2);
  EXPECT_EQ(cycle.claimed.size(), 1u);
  EXPECT_EQ(queue.sql.number("SELECT COUNT(*) FROM surge_attempt"), 2);
  EXPECT_EQ(queue.sql.number("SELECT COUNT(*) FROM webhook_delivery WHERE status = 'done'"), 2);
}

// An outcome reads its row where the claim left it (its ctid), and by id when it is no longer
// there: a row another session updated meanwhile (a new row version elsewhere, the lease kept)
// is still written, and a row whose lease was taken is still reported lost.
TEST(PostgresQueue, AnOutcomeFindsItsRowWhereverAnotherSessionMovedIt) {
  SURGE_REQUIRE_POSTGRES(server);
  pg_queue queue(*server);
  auto [id, store, claimed] = queue.claim_some(3, 3);
  ASSERT_EQ(claimed.size(), 3u);
  auto place = [&](std::int64_t row) {
    return text(
        queue.sql
            .query("SELECT ctid::text FROM webhook_delivery WHERE id = ?", {std::to_string(row)})
            .at(0),
        0);
  };
  const auto before = place(claimed[0].id);
  queue.sql.exec("UPDATE webhook_delivery SET payload = payload || ' ' WHERE id = ?",
                 {std::to_string(claimed[0].id)});
  ASSERT_NE(place(claimed[0].id), before) << "the update wrote a new row version elsewhere";
  queue.sql.exec("UPDATE webhook_delivery SET locked_until = locked_until + 1 WHERE id = ?",
                 {std::to_string(claimed[1].id)});
  const auto outcomes = delivered(claimed, false);
  const auto report = store->write_outcomes(outcomes, {});
  EXPECT_EQ(report.applied, 2);
  ASSERT_EQ(report.lost_leases.size(), 1u);
  EXPECT_EQ(report.lost_leases[0], claimed[1].id);
  auto status = [&](std::int64_t row) {
    return text(
        queue.sql.query("SELECT status FROM webhook_delivery WHERE id = ?", {std::to_string(row)})
            .at(0),
        0);
  };
  EXPECT_EQ(status(claimed[0].id), "done") << "written by id once not found at its place";
  EXPECT_EQ(status(claimed[1].id), "pending");
  EXPECT_EQ(status(claimed[2].id), "done");
}

TEST(PostgresQueue, RowsNoClaimCouldMatchAreDeadLetteredWithTheReason) {
  SURGE_REQUIRE_POSTGRES(server);
  pg_queue queue(*server);
  const auto id = queue.subscriber();
  queue.rows(id, 4);
  // What a hostile or broken producer can still store in typed columns: NaN, or a lease no
  // claimer wrote.
  queue.sql.exec("UPDATE webhook_delivery SET next_attempt_at = 'NaN' WHERE id = 1");
  queue.sql.exec("UPDATE webhook_delivery SET locked_until = 'NaN' WHERE id = 2");
  queue.sql.exec("UPDATE webhook_delivery SET locked_until = 'Infinity' WHERE id = 3");
  auto store = queue.store();
  const double now = proto::unix_now();
  const auto found = store->dead_letter_malformed(now, now + 120, {});
  EXPECT_EQ(found.next_attempt_at, 1);
  EXPECT_EQ(found.locked_until, 1);
  EXPECT_EQ(found.far_lease, 1);
  const auto rows = queue.sql.query(
      "SELECT id, status, COALESCE(last_error, '') FROM webhook_delivery ORDER BY id");
  ASSERT_EQ(rows.size(), 4u);
  EXPECT_EQ(text(rows[0], 1) + "/" + text(rows[0], 2), "dead/malformed next_attempt_at: NaN");
  EXPECT_EQ(text(rows[1], 1) + "/" + text(rows[1], 2), "dead/malformed locked_until: NaN");
  EXPECT_EQ(text(rows[2], 1) + "/" + text(rows[2], 2), "dead/malformed locked_until: Infinity");
  EXPECT_EQ(text(rows[3], 1), "pending") << "a sound row is left alone";
}

TEST(PostgresQueue, OtherLiveOwnersAreNamedOnlyWhileTheirLeasesLive) {
  SURGE_REQUIRE_POSTGRES(server);
  pg_queue queue(*server);
  const auto id = queue.subscriber();
  queue.rows(id, 3);
  const double now = proto::unix_now();
  EXPECT_TRUE(other_live_owners(queue.db, now, {}, "surge@here:1").empty());
  const std::string lease = std::to_string(now + 30);
  queue.sql.exec("UPDATE webhook_delivery SET locked_until = " + lease + " WHERE id <= 2");
  queue.sql.exec("INSERT INTO surge_lease(lease, owner, claimed_at) VALUES (" + lease +
                 ", 'surge@there:2', " + std::to_string(now) + ")");
  const auto holders = other_live_owners(queue.db, now, {}, "surge@here:1");
  ASSERT_EQ(holders.size(), 1u);
  EXPECT_EQ(holders[0].owner, "surge@there:2");
  EXPECT_EQ(holders[0].subscribers, (std::vector<std::int64_t>{id}));
  EXPECT_EQ(holders[0].rows, 2);
  EXPECT_TRUE(other_live_owners(queue.db, now, {}, "surge@there:2").empty()) << "its own";
  EXPECT_TRUE(other_live_owners(queue.db, now + 31, {}, "surge@here:1").empty()) << "expired";
}

TEST(PostgresQueue, TokensComeFromThePersistedBucketTheOtherDrainerReads) {
  SURGE_REQUIRE_POSTGRES(server);
  pg_queue queue(*server);
  const auto id = queue.subscriber(/*rate=*/1, /*burst=*/5);
  auto store = queue.store();
  const double now = proto::unix_now();
  store->renew_ownership(now);
  subscriber_demand want{.subscriber_id = id, .tokens = 3};
  const auto cycle = store->write_and_claim({}, {}, {&want, 1}, now, 30, INT64_MAX);
  ASSERT_EQ(cycle.granted.size(), 1u);
  EXPECT_EQ(cycle.granted[0].tokens, 3);
  // What the steady-state drainer reads now: the two tokens left (plus a moment's refill).
  const auto left = queue.sql.number(other_drainer_sql::read_bucket, {std::to_string(id)});
  EXPECT_NEAR(left, 2, 0.1);
  // Unspent tokens go back, never above the burst.
  store->give_back_tokens(std::vector<unspent_tokens>{{id, 3}}, proto::unix_now());
  EXPECT_NEAR(queue.sql.number(other_drainer_sql::read_bucket, {std::to_string(id)}), 5, 1e-9);
}

// Another host's clock an hour ahead stamped the bucket: repaired, said, and written back.
TEST(PostgresQueue, ABucketStampedInTheFutureIsRepairedAndWrittenBack) {
  SURGE_REQUIRE_POSTGRES(server);
  pg_queue queue(*server);
  const auto id = queue.subscriber(/*rate=*/1, /*burst=*/5);
  const double now = proto::unix_now();
  queue.sql.exec("UPDATE webhook_subscriber SET tokens = 0, tokens_updated_at = " +
                 std::to_string(now + 3600) + " WHERE id = " + std::to_string(id));
  auto store = queue.store();
  store->renew_ownership(now);
  subscriber_demand want{.subscriber_id = id, .tokens = 3};
  auto cycle = store->write_and_claim({}, {}, {&want, 1}, now, 30, INT64_MAX);
  ASSERT_EQ(cycle.granted.size(), 1u);
  EXPECT_EQ(cycle.granted[0].repaired, "stamped 3600 s in the future");
  EXPECT_NEAR(queue.sql.number("SELECT tokens_updated_at FROM webhook_subscriber WHERE id = ?",
                               {std::to_string(id)}),
              now, 1e-3);
  cycle = store->write_and_claim({}, {}, {&want, 1}, now + 2, 30, INT64_MAX);
  EXPECT_EQ(cycle.granted[0].tokens, 2);
  EXPECT_EQ(cycle.granted[0].repaired, "");
}

// A fan-out producer writes a spike's rows in transactions that stay open a while; each insert's
// foreign key holds FOR KEY SHARE on the subscriber's row. Spending the subscriber's bucket must
// not conflict with that lock, or the subscriber gets nothing until the producer commits.
TEST(PostgresQueue, AProducersOpenTransactionDoesNotHoldTheSubscribersTokens) {
  SURGE_REQUIRE_POSTGRES(server);
  pg_queue queue(*server);
  const auto id = queue.subscriber(/*rate=*/10, /*burst=*/5);
  queue.rows(id, 3);
  sql_client producer(queue.uri);
  producer.begin();
  producer.exec(
      std::string(other_drainer_sql::insert_delivery),
      {std::to_string(id), "video.trending", R"({"n":2})", "0", std::to_string(proto::unix_now())});
  auto store = queue.store();
  const double now = proto::unix_now();
  store->renew_ownership(now);
  subscriber_demand want{.subscriber_id = id, .rows = 3, .tokens = 3};
  const auto cycle = store->write_and_claim({}, {}, {&want, 1}, now, 30, INT64_MAX);
  ASSERT_EQ(cycle.granted.size(), 1u);
  EXPECT_EQ(cycle.granted[0].tokens, 3) << "the producer's foreign key lock held the bucket";
  EXPECT_EQ(cycle.claimed.size(), 3u);
  EXPECT_TRUE(cycle.held_subscribers.empty());
  // The steady-state drainer's own bucket update still waits for ours: the two never
  // overwrite each other, and the producer goes on.
  producer.commit();
  EXPECT_NEAR(queue.sql.number(other_drainer_sql::read_bucket, {std::to_string(id)}), 2, 0.1);
}

TEST(PostgresQueue, TwoDrainsSplitTheSubscribersAndOneTakesAllWhenTheOtherLeaves) {
  SURGE_REQUIRE_POSTGRES(server);
  pg_queue queue(*server);
  for (int i = 0; i < 6; ++i) queue.subscriber();
  auto first = queue.store("surge@host-a:1");
  auto second = queue.store("surge@host-b:1");
  // The stores check ownership against the wall clock; the test's clock runs an hour ahead of it
  // so that the heartbeats taken below outlast however long the statements between take.
  double now = proto::unix_now() + 3600;
  first->renew_ownership(now);
  EXPECT_EQ(first->owned_count(now), 6u) << "alone, it owns everything";
  second->renew_ownership(now);  // assigned half, still owned by the first
  first->renew_ownership(now);   // lets go of the second's half
  const auto taken = second->renew_ownership(now);
  EXPECT_EQ(taken.taken.size(), 3u);
  EXPECT_EQ(first->owned_count(now), 3u);
  EXPECT_EQ(second->owned_count(now), 3u);
  const auto owners = read_ownership(queue.db, now);
  ASSERT_EQ(owners.size(), 2u);
  EXPECT_EQ(owners[0].subscribers.size() + owners[1].subscribers.size(), 6u);

  // A drain of the second's never claims a subscriber of the first's.
  const auto mine =
      owners[1].name == "surge@host-b:1" ? owners[1].subscribers : owners[0].subscribers;
  std::vector<subscriber_demand> everything;
  for (std::int64_t id = 1; id <= 6; ++id) {
    queue.rows(id, 1);
    everything.push_back({.subscriber_id = id, .rows = 5});
  }
  const auto cycle = second->write_and_claim({}, {}, everything, proto::unix_now(), 30, INT64_MAX);
  ASSERT_EQ(cycle.claimed.size(), 3u);
  for (const auto& row : cycle.claimed) {
    EXPECT_TRUE(std::find(mine.begin(), mine.end(), row.subscriber_id) != mine.end());
  }

  first->release_ownership();
  now += 1;
  const auto after = second->renew_ownership(now);
  EXPECT_EQ(after.taken.size(), 3u);
  EXPECT_EQ(second->owned_count(now), 6u);
}

TEST(PostgresQueue, NewRowsAreNotifiedWithTheirSubscribers) {
  SURGE_REQUIRE_POSTGRES(server);
  pg_queue queue(*server);
  const auto a = queue.subscriber();
  const auto b = queue.subscriber();
  auto store = queue.store();
  EXPECT_FALSE(store->check_new_rows(proto::unix_now()).any());
  queue.rows(b, 2);
  new_rows found;
  for (int i = 0; i < 100 && !found.any(); ++i) {
    found = store->check_new_rows(proto::unix_now());
    if (!found.any()) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  EXPECT_FALSE(found.all);
  EXPECT_EQ(found.subscribers, std::vector<std::int64_t>{b});
  (void)a;
}

// Retention is SQLite's so far: on a server it is refused by name.
TEST(PostgresQueue, PruneAndItsVacuumAreRefusedByName) {
  SURGE_REQUIRE_POSTGRES(server);
  pg_queue queue(*server);
  EXPECT_EQ(storage::testing::unsupported_refusal(
                [&] { prune(queue.db, {.cutoff = proto::unix_now() + 60}); }),
            "surge prune is not available on a PostgreSQL queue yet");
  EXPECT_EQ(storage::testing::unsupported_refusal([&] { enable_incremental_vacuum(queue.db); }),
            "surge prune --enable-vacuum is not available on a PostgreSQL queue yet");
}

TEST(PostgresQueue, AWrongUriOrAMissingSchemaIsAClearError) {
  SURGE_REQUIRE_POSTGRES(server);
  try {
    connection db({.location = server->uri("no_such_database")});
    FAIL() << "connected to a database that does not exist";
  } catch (const error& failure) {
    // Not a server that may come back: a name that does not exist (a typo, a dropped database).
    EXPECT_EQ(failure.what_kind(), error::kind::database_gone);
    EXPECT_NE(std::string(failure.what()).find("no_such_database"), std::string::npos)
        << failure.what();
  }
  const auto empty = server->create_database();
  try {
    open_drain_store({.location = empty});
    FAIL() << "opened a drain on a database without the schema";
  } catch (const error& failure) {
    EXPECT_NE(std::string(failure.what()).find("surge migrate"), std::string::npos)
        << failure.what();
  }
}

// Seed 001 is a SQLite queue: on a server, naming it, or a database holding its tables, is
// refused (exit 2 in the tools) rather than mistaken for an empty seed000 queue.
TEST(PostgresQueue, TheSeed001ShapeIsRefusedOnPostgreSQL) {
  SURGE_REQUIRE_POSTGRES(server);
  const auto expect_refused = [](auto&& call) {
    try {
      call();
      FAIL() << "seed001 was used on PostgreSQL";
    } catch (const error& failure) {
      EXPECT_EQ(failure.what_kind(), error::kind::bad_shape);
      EXPECT_NE(std::string(failure.what()).find("from SQLite files only"), std::string::npos)
          << failure.what();
    }
  };
  const auto empty = server->create_database();
  connection named({.location = empty, .shape = queue_shape::seed001});
  expect_refused([&] { migrate(named, true); });
  expect_refused([&] { open_drain_store({.location = empty, .shape = queue_shape::seed001}); });

  const auto holding = server->create_database();
  sql_client sql(holding);
  sql.exec(
      "CREATE TABLE webhook_subscribers (id INTEGER PRIMARY KEY, endpoint TEXT NOT NULL, "
      "secret TEXT NOT NULL, events TEXT NOT NULL, rate_per_min INTEGER NOT NULL DEFAULT 60, "
      "burst INTEGER NOT NULL DEFAULT 20, region TEXT NOT NULL, active INTEGER NOT NULL "
      "DEFAULT 1)");
  sql.exec(
      "CREATE TABLE webhook_deliveries (id INTEGER PRIMARY KEY, subscriber_id INTEGER NOT "
      "NULL, event_type TEXT NOT NULL, payload BYTEA NOT NULL, signature TEXT NOT NULL, "
      "enqueued_at INTEGER NOT NULL, attempt INTEGER NOT NULL DEFAULT 0, next_attempt "
      "INTEGER NOT NULL, leased_until INTEGER NOT NULL DEFAULT 0, state TEXT NOT NULL "
      "DEFAULT 'pending')");
  sql.exec(
      "CREATE TABLE webhook_buckets (subscriber_id INTEGER PRIMARY KEY, tokens DOUBLE "
      "PRECISION NOT NULL, updated_at DOUBLE PRECISION NOT NULL)");
  connection found({.location = holding});
  expect_refused([&] { read_stats(found, 0); });
  expect_refused([&] { migrate(found, true); });
  EXPECT_TRUE(sql.query("SELECT 1 FROM information_schema.tables WHERE table_name = "
                        "'webhook_delivery'")
                  .empty())
      << "migrate created seed000's tables beside seed001's";
}

TEST(PostgresQueue, ARestartedServerCostsOneFailedCycleAndLosesNoOutcome) {
  SURGE_REQUIRE_POSTGRES(server);
  pg_queue queue(*server);
  auto [id, store, claimed] = queue.claim_some(2, 2);
  ASSERT_EQ(claimed.size(), 2u);
  const auto outcomes = delivered(claimed, false);

  server->stop();
  try {
    store->write_outcomes(outcomes, {});
    ADD_FAILURE() << "wrote outcomes to a stopped server";
  } catch (const error& failure) {
    EXPECT_EQ(failure.what_kind(), error::kind::unreachable) << failure.what();
  }
  server->start();
  // The caller kept its outcomes (the storage thread retries after a back-off): they land now.
  const auto report = store->write_outcomes(outcomes, {});
  EXPECT_EQ(report.applied, 2);
  EXPECT_TRUE(report.lost_leases.empty());
  sql_client check(queue.uri);
  EXPECT_EQ(check.number("SELECT COUNT(*) FROM webhook_delivery WHERE status = 'done'"), 2);
  // Notifications sent while it was away are lost with the old connection: the next look says
  // "anything may be new", and the new connection listens again.
  EXPECT_TRUE(store->check_new_rows(proto::unix_now()).all);
  check.exec(std::string(other_drainer_sql::insert_delivery),
             {std::to_string(id), "video.trending", "{}", "0", std::to_string(proto::unix_now())});
  new_rows found;
  for (int i = 0; i < 100 && !found.any(); ++i) {
    found = store->check_new_rows(proto::unix_now());
    if (!found.any()) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  EXPECT_EQ(found.subscribers, std::vector<std::int64_t>{id});
}

}  // namespace
}  // namespace surge::storage

namespace surge::storage {
namespace {

TEST(QueueLocation, AUriNamesPostgreSQLAndItsPasswordIsNeverPrinted) {
  EXPECT_TRUE(is_postgres_location("postgresql:///queue?host=/tmp"));
  EXPECT_TRUE(is_postgres_location("postgres://db.internal/queue"));
  EXPECT_FALSE(is_postgres_location("queue.db"));
  EXPECT_FALSE(is_postgres_location("/var/lib/postgresql/queue.db"));
  EXPECT_EQ(printable_location("postgresql://surge:s3cret@db.internal:5432/queue"),
            "postgresql://surge:***@db.internal:5432/queue");
  EXPECT_EQ(printable_location("postgresql://surge@db.internal/queue"),
            "postgresql://surge@db.internal/queue");
  EXPECT_EQ(printable_location("postgresql:///queue?host=/tmp&user=a@b"),
            "postgresql:///queue?host=/tmp&user=a@b");
  EXPECT_EQ(printable_location("/tmp/user:pw@x.db"), "/tmp/user:pw@x.db");
  // Refused before any connection is tried: the message names the queue, not its password.
  try {
    open_drain_store(
        {.location = "postgresql://surge:s3cret@127.0.0.1:1/queue", .shape = queue_shape::seed001});
    FAIL() << "seed001 was taken on PostgreSQL";
  } catch (const error& failure) {
    EXPECT_EQ(failure.what_kind(), error::kind::bad_shape);
    const std::string message = failure.what();
    EXPECT_NE(message.find("postgresql://surge:***@127.0.0.1:1/queue"), std::string::npos)
        << message;
    EXPECT_EQ(message.find("s3cret"), std::string::npos) << message;
  }
}

}  // namespace
}  // namespace surge::storage
