// A seed001 queue as Surge's drain store works it, beside the shape's own PHP worker: the
// worker's statements (worker_sql.hpp) and Surge's claims, fences and token leases on one
// file, with the times each side would use.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include <SQLiteCpp/Database.h>
#include <SQLiteCpp/Statement.h>
#include <SQLiteCpp/Transaction.h>

#include "proto/clock.hpp"
#include "proto/signing.hpp"
#include "storage/audit.hpp"
#include "storage/backlog.hpp"
#include "storage/coalescing.hpp"
#include "storage/connection.hpp"
#include "storage/dead_letters.hpp"
#include "storage/drain_store.hpp"
#include "storage/maintenance.hpp"
#include "storage/sqlite/database.hpp"
#include "storage/sqlite/queue.hpp"
#include "storage/sqlite/schema.hpp"
#include "tests/storage/test_db.hpp"
#include "tests/storage/seed001/worker_sql.hpp"
#include "tests/support/seed001_ddl.hpp"

namespace surge::storage::sqlite {
namespace {

namespace sql = seed001_worker_sql;
using testing::query_double;
using testing::query_int;
using testing::query_is_null;
using testing::query_text;

constexpr const char* secret = "seed001-secret";
constexpr const char* payload = R"({"video":"v1"})";

class Seed001Queue : public ::testing::Test {
 protected:
  void SetUp() override {
    connection db({.location = path, .create_if_missing = false});
    migrate(db);
    subscriber = producer_subscriber(60 * 10, 10);
  }

  // The shape's producer: a subscriber, then rows signed at enqueue, all due at `t0`.
  std::int64_t producer_subscriber(std::int64_t per_minute, std::int64_t burst) {
    SQLite::Statement insert(worker, sql::insert_subscriber);
    insert.bind(1, "https://partner.example/hook");
    insert.bind(2, secret);
    insert.bind(3, R"(["video.*"])");
    insert.bind(4, per_minute);
    insert.bind(5, burst);
    insert.bind(6, "DE");
    insert.exec();
    return worker.getLastInsertRowid();
  }
  std::vector<std::int64_t> produce(int count, const std::string& signature = {}) {
    std::vector<std::int64_t> ids;
    SQLite::Statement insert(worker, sql::insert_delivery);
    for (int i = 0; i < count; ++i) {
      insert.reset();
      insert.bind(1, subscriber);
      insert.bind(2, "video.trending");
      insert.bind(3, payload, static_cast<int>(std::string_view(payload).size()));
      insert.bind(4, signature.empty() ? proto::stored_signature_for(secret, payload) : signature);
      insert.bind(5, t0);
      insert.bind(6, t0);
      insert.exec();
      ids.push_back(worker.getLastInsertRowid());
    }
    return ids;
  }

  // The worker's lease grab at whole second `now`, leasing until `until`; the rows it took.
  std::vector<std::int64_t> worker_grab(std::int64_t now, std::int64_t until) {
    SQLite::Statement grab(worker, sql::lease_grab);
    grab.bind(":until", until);
    grab.bind(":now", now);
    grab.exec();
    SQLite::Statement back(worker, sql::read_back);
    back.bind(":until", until);
    std::vector<std::int64_t> ids;
    while (back.executeStep()) ids.push_back(back.getColumn(0).getInt64());
    return ids;
  }

  std::unique_ptr<drain_store> surge() {
    auto store = open_drain_store({.location = path, .shape = queue_shape::seed001});
    store->renew_ownership(proto::unix_now());
    return store;
  }

  std::string of_row(const std::string& column, std::int64_t id) {
    return "SELECT " + column + " FROM webhook_deliveries WHERE id = " + std::to_string(id);
  }

  testing::temp_dir dir;
  std::string path = dir.file("seed001.db");
  // The worker's own connection, on a file made by the shape's DDL.
  SQLite::Database worker{[this] {
                            SQLite::Database raw(path,
                                                 SQLite::OPEN_READWRITE | SQLite::OPEN_CREATE);
                            raw.exec(surge::testing::seed001_ddl);
                            return path;
                          }(),
                          SQLite::OPEN_READWRITE, 5000};
  // Whole seconds, as the shape keeps its delivery times.
  std::int64_t t0 = static_cast<std::int64_t>(std::floor(proto::unix_now()));
  std::int64_t subscriber = 0;
};

TEST_F(Seed001Queue, ClaimedRowsCarryTheirStoredSignatureAndPayloadBytes) {
  const auto ids = produce(3);
  auto store = surge();
  const subscriber_demand demand{.subscriber_id = subscriber, .rows = 5};
  const auto cycle = store->write_and_claim({}, {}, {&demand, 1}, t0 + 0.5, 60, 1 << 20);
  ASSERT_EQ(cycle.claimed.size(), 3u);
  for (const auto& row : cycle.claimed) {
    EXPECT_EQ(row.payload, payload);
    ASSERT_TRUE(row.stored_signature.has_value());
    EXPECT_EQ(*row.stored_signature, proto::stored_signature_for(secret, payload));
    EXPECT_EQ(row.attempts, 0);
    EXPECT_EQ(row.created_at, static_cast<double>(t0));
  }
  const auto subscribers = store->load_subscribers({});
  ASSERT_EQ(subscribers.size(), 1u);
  EXPECT_EQ(subscribers[0].signing, "stored");
  EXPECT_EQ(subscribers[0].url, "https://partner.example/hook");
  EXPECT_DOUBLE_EQ(subscribers[0].rate_per_sec, 10.0);
  EXPECT_EQ(subscribers[0].region, "DE");
}

TEST_F(Seed001Queue, SurgesLeaseHoldsAgainstTheWorkersGrabInWholeSeconds) {
  produce(4);
  auto store = surge();
  const subscriber_demand demand{.subscriber_id = subscriber, .rows = 4};
  const double now = t0 + 0.9;
  const auto claimed = store->write_and_claim({}, {}, {&demand, 1}, now, 60, 1 << 20).claimed;
  ASSERT_EQ(claimed.size(), 4u);
  const double lease = claimed.front().lease;
  EXPECT_GT(lease, now + 59);
  // The worker's whole-second clock, every second up to and including the lease's own: nothing.
  const auto last_held = static_cast<std::int64_t>(std::floor(lease));
  for (std::int64_t at = t0; at <= last_held; at += 7) {
    EXPECT_TRUE(worker_grab(at, at + 30).empty()) << "at " << at - t0 << " s";
  }
  EXPECT_TRUE(worker_grab(last_held, last_held + 30).empty());
  // The second after: the lease has run out, and the worker takes the rows.
  EXPECT_EQ(worker_grab(last_held + 1, last_held + 31).size(), 4u);
}

TEST_F(Seed001Queue, StatsNameWhoHoldsTheLeasedRows) {
  produce(4);
  auto store = surge();
  const subscriber_demand demand{.subscriber_id = subscriber, .rows = 2};
  ASSERT_EQ(store->write_and_claim({}, {}, {&demand, 1}, t0, 60, 1 << 20).claimed.size(), 2u);
  ASSERT_EQ(worker_grab(t0, t0 + 30).size(), 2u);
  connection db({.location = path, .create_if_missing = false});
  const auto stats = read_stats(db, t0 + 10.0);
  EXPECT_EQ(stats.total.leased, 4);
  ASSERT_EQ(stats.total.leased_by.size(), 2u);
  EXPECT_EQ(stats.total.leased_by.at(lease_owner_other), 2) << "the worker's";
  for (const auto& [owner, rows] : stats.total.leased_by) {
    if (owner != lease_owner_other) {
      EXPECT_EQ(rows, 2) << owner;
    }
  }
}

TEST_F(Seed001Queue, TheWorkersLeaseHoldsAgainstSurgeThroughItsLastSecond) {
  produce(4);
  const auto grabbed = worker_grab(t0, t0 + 30);
  ASSERT_EQ(grabbed.size(), 4u);
  auto store = surge();
  const subscriber_demand demand{.subscriber_id = subscriber, .rows = 4};
  // Still the lease's own whole second: the worker holds the rows through it.
  EXPECT_TRUE(
      store->write_and_claim({}, {}, {&demand, 1}, t0 + 30.999, 60, 1 << 20).claimed.empty());
  EXPECT_EQ(store->count_outstanding(t0 + 30.5, {}), 4);
  // Once the worker's clock passes it, so does ours.
  EXPECT_EQ(store->write_and_claim({}, {}, {&demand, 1}, t0 + 31.0, 60, 1 << 20).claimed.size(),
            4u);
}

TEST_F(Seed001Queue, AnOutcomeAfterTheWorkerTookTheRowIsALostLease) {
  const auto id = produce(1).front();
  auto store = surge();
  const subscriber_demand demand{.subscriber_id = subscriber, .rows = 1};
  const auto claimed = store->write_and_claim({}, {}, {&demand, 1}, t0 + 0.2, 60, 1 << 20).claimed;
  ASSERT_EQ(claimed.size(), 1u);
  const auto after = static_cast<std::int64_t>(std::floor(claimed[0].lease)) + 1;
  ASSERT_EQ(worker_grab(after, after + 30).size(), 1u);
  outcome done{
      .delivery_id = id, .lease = claimed[0].lease, .kind = outcome_kind::done, .attempts = 1};
  const auto report = store->write_outcomes({&done, 1}, {});
  EXPECT_EQ(report.applied, 0);
  ASSERT_EQ(report.lost_leases.size(), 1u);
  EXPECT_EQ(query_text(worker, of_row("state", id)), "pending");
  EXPECT_EQ(query_int(worker, of_row("leased_until", id)), after + 30);
  // The worker's own outcome stands, once: the row is delivered by one of the two.
  SQLite::Statement delivered(worker, sql::mark_delivered);
  delivered.bind(":id", id);
  EXPECT_EQ(delivered.exec(), 1);
  EXPECT_EQ(query_text(worker, of_row("state", id)), "delivered");
  EXPECT_EQ(query_int(worker, of_row("attempt", id)), 1);
}

TEST_F(Seed001Queue, OutcomesAreWrittenInTheShapesOwnStatesAndUnits) {
  const auto ids = produce(4);
  auto store = surge();
  const subscriber_demand demand{.subscriber_id = subscriber, .rows = 4};
  const auto claimed = store->write_and_claim({}, {}, {&demand, 1}, t0 + 0.5, 60, 1 << 20).claimed;
  ASSERT_EQ(claimed.size(), 4u);
  std::vector<outcome> outcomes(4);
  for (std::size_t i = 0; i < 4; ++i) {
    outcomes[i].delivery_id = claimed[i].id;
    outcomes[i].lease = claimed[i].lease;
  }
  outcomes[0].kind = outcome_kind::done;
  outcomes[0].attempts = 1;
  outcomes[1].kind = outcome_kind::retry;
  outcomes[1].attempts = 1;
  outcomes[1].next_attempt_at = t0 + 12.25;
  outcomes[1].last_status = 503;
  outcomes[1].last_error = "http 503";
  outcomes[2].kind = outcome_kind::dead;
  outcomes[2].attempts = 12;
  outcomes[2].last_error = "attempt limit";
  outcomes[3].kind = outcome_kind::release;
  const auto report = store->write_outcomes(outcomes, {});
  EXPECT_EQ(report.applied, 4);
  const auto row = [&](std::size_t i, const char* column) {
    return query_text(worker, of_row(column, claimed[i].id));
  };
  EXPECT_EQ(row(0, "state"), "delivered");
  EXPECT_EQ(row(0, "attempt"), "1");
  EXPECT_EQ(row(1, "state"), "pending");  // a retry keeps pending
  EXPECT_EQ(row(1, "attempt"), "1");
  // Whole seconds, never before the delay: 12.25 s goes to the 13th second.
  EXPECT_EQ(query_text(worker, "SELECT typeof(next_attempt) FROM webhook_deliveries WHERE id = " +
                                   std::to_string(claimed[1].id)),
            "integer");
  EXPECT_EQ(query_int(worker, of_row("next_attempt", claimed[1].id)), t0 + 13);
  EXPECT_EQ(row(2, "state"), "dead");
  EXPECT_EQ(row(3, "state"), "pending");
  EXPECT_EQ(row(3, "attempt"), "0");
  for (std::size_t i = 0; i < 4; ++i) EXPECT_EQ(row(i, "leased_until"), "0") << i;
  // The reasons live in Surge's own table.
  EXPECT_EQ(query_text(worker, "SELECT last_error FROM surge_delivery_note WHERE delivery_id = " +
                                   std::to_string(claimed[2].id)),
            "attempt limit");
  EXPECT_EQ(query_int(worker, "SELECT last_status FROM surge_delivery_note WHERE delivery_id = " +
                                  std::to_string(claimed[1].id)),
            503);
  (void)ids;
}

// `surge dead show` and `dead replay --id` on seed001: the payload BLOB, the reason from
// Surge's note beside the row, and a replay of exactly the named dead rows.
TEST_F(Seed001Queue, TheBacklogTheLeaseHoldersAndTheAuditReadTheShapesOwnColumns) {
  const auto ids = produce(3);
  // Another drain holds the first row; the second is due later.
  worker.exec("INSERT INTO surge_lease(lease, owner, claimed_at) VALUES (" +
              std::to_string(t0 + 30) + ", 'surge@there:2', " + std::to_string(t0) + ")");
  worker.exec("UPDATE webhook_deliveries SET leased_until = " + std::to_string(t0 + 30) +
              " WHERE id = " + std::to_string(ids[0]));
  worker.exec("UPDATE webhook_deliveries SET next_attempt = " + std::to_string(t0 + 100) +
              " WHERE id = " + std::to_string(ids[1]));
  worker.exec(
      "INSERT INTO surge_attempt(delivery_id, subscriber_id, attempt, started_at, finished_at, "
      "status_code) VALUES (" +
      std::to_string(ids[2]) + ", " + std::to_string(subscriber) + ", 1, " + std::to_string(t0) +
      ", " + std::to_string(t0 + 0.1) + ", 503)");
  connection db({.location = path, .create_if_missing = false});

  const auto backlog = backlog_by_subscriber(db, t0 + 50, {});
  ASSERT_EQ(backlog.size(), 1u);
  EXPECT_EQ(backlog[0].subscriber_id, subscriber);
  EXPECT_EQ(backlog[0].queued, 3);
  EXPECT_EQ(backlog[0].overdue, 2) << "the row due at t0 + 100 is not overdue at t0 + 50";

  const auto holders = other_live_owners(db, t0 + 1.0, {}, "surge@here:1");
  ASSERT_EQ(holders.size(), 1u);
  EXPECT_EQ(holders[0].owner, "surge@there:2");
  EXPECT_EQ(holders[0].subscribers, std::vector<std::int64_t>{subscriber});
  EXPECT_EQ(holders[0].rows, 1);

  // The earliest free row: the held one and the later one do not count.
  worker.exec("UPDATE webhook_deliveries SET next_attempt = " + std::to_string(t0 + 7) +
              " WHERE id = " + std::to_string(ids[2]));
  EXPECT_EQ(surge()->earliest_scheduled(t0 + 1.0, {}), static_cast<double>(t0 + 7));

  const auto audit = read_audit(db, {}, false);
  ASSERT_EQ(audit.size(), 1u);
  EXPECT_EQ(audit[0].summary.subscriber_id, subscriber);
  EXPECT_EQ(audit[0].summary.attempts, 1);
  ASSERT_TRUE(audit[0].summary.limit.has_value()) << "the limits come from webhook_subscribers";
  EXPECT_DOUBLE_EQ(audit[0].summary.limit->rate_per_sec, 10);
}

TEST_F(Seed001Queue, RowsNoClaimCanMatchAreDeadLetteredWithTheirReasonInSurgesNote) {
  const auto ids = produce(3);
  worker.exec("UPDATE webhook_deliveries SET next_attempt = 'soon' WHERE id = " +
              std::to_string(ids[0]));
  worker.exec("UPDATE webhook_deliveries SET leased_until = 'forever' WHERE id = " +
              std::to_string(ids[1]));
  // A row whose subscriber is gone.
  const auto gone = subscriber = producer_subscriber(60, 1);
  const auto orphan = produce(1)[0];
  worker.exec("DELETE FROM webhook_subscribers WHERE id = " + std::to_string(gone));

  auto store = surge();
  const double now = t0 + 1.0;
  EXPECT_EQ(store->dead_letter_orphans(now, {}), 1);
  const auto found = store->dead_letter_malformed(now, now + 3600, {});
  EXPECT_EQ(found.next_attempt_at, 1);
  EXPECT_EQ(found.locked_until, 1);
  EXPECT_EQ(found.total(), 2);
  const auto note = [&](std::int64_t id) {
    return query_text(worker, "SELECT last_error FROM surge_delivery_note WHERE delivery_id = " +
                                  std::to_string(id));
  };
  EXPECT_EQ(note(ids[0]), "malformed next_attempt: 'soon'");
  EXPECT_EQ(note(ids[1]), "malformed leased_until: 'forever'");
  EXPECT_EQ(note(orphan), "unknown subscriber " + std::to_string(gone));
  for (const auto id : {ids[0], ids[1], orphan}) {
    EXPECT_EQ(query_text(worker, of_row("state", id)), "dead") << id;
    EXPECT_EQ(query_int(worker, of_row("leased_until", id)), 0) << id;
  }
  EXPECT_EQ(query_text(worker, of_row("state", ids[2])), "pending");
}

TEST_F(Seed001Queue, DeadRowsAreShownInFullAndReplayedById) {
  const auto ids = produce(3);
  worker.exec("UPDATE webhook_deliveries SET state = 'dead', attempt = 12");
  worker.exec(
      "INSERT INTO surge_delivery_note(delivery_id, last_status, last_error, noted_at) "
      "VALUES (" +
      std::to_string(ids[1]) + ", 500, 'attempt limit (HTTP 500)', 0)");
  connection db({.location = path, .create_if_missing = false});
  const auto shown = find_delivery(db, ids[1]);
  ASSERT_TRUE(shown.has_value());
  EXPECT_TRUE(shown->dead());
  EXPECT_EQ(shown->subscriber_id, subscriber);
  EXPECT_EQ(shown->attempts, 12);
  EXPECT_EQ(shown->last_status, 500);
  EXPECT_EQ(shown->last_error, "attempt limit (HTTP 500)");
  EXPECT_EQ(shown->created_at, static_cast<double>(t0));
  EXPECT_FALSE(shown->finished_at.has_value());
  EXPECT_EQ(shown->payload, payload);
  EXPECT_FALSE(find_delivery(db, ids.back() + 100).has_value());

  dead_selection which;
  which.ids = *proto::id_set::parse(std::to_string(ids[0]) + "," + std::to_string(ids[2]));
  EXPECT_EQ(replay_dead(db, which, t0 + 5.0).replayed, 2);
  EXPECT_EQ(find_delivery(db, ids[0])->status, "pending");
  EXPECT_EQ(find_delivery(db, ids[1])->status, "dead");
  EXPECT_EQ(find_delivery(db, ids[2])->status, "pending");
}

TEST_F(Seed001Queue, SurgeAndTheWorkerSpendOneBucketInWebhookBuckets) {
  produce(20);
  auto store = surge();
  // No bucket row yet: the bucket is full (burst 10). Surge leases 6 of its tokens.
  const double now = proto::unix_now();
  const subscriber_demand ask{.subscriber_id = subscriber, .rows = 0, .tokens = 6};
  const auto granted = store->write_and_claim({}, {}, {&ask, 1}, now, 60, 1 << 20).granted;
  ASSERT_EQ(granted.size(), 1u);
  EXPECT_EQ(granted[0].tokens, 6);
  EXPECT_NEAR(query_double(worker, "SELECT tokens FROM webhook_buckets"), 4, 1e-9);
  // The worker's bucket transaction on the same row: at most the 4 left (plus the refill of the
  // moments between), then its rows go back 2 s later.
  int taken = 0;
  for (int i = 0; i < 10; ++i) {
    SQLite::Transaction transaction(worker, SQLite::TransactionBehavior::DEFERRED);
    SQLite::Statement read(worker, sql::read_bucket);
    read.bind(":id", subscriber);
    ASSERT_TRUE(read.executeStep());
    const double at = proto::unix_now();
    const double tokens =
        std::min(10.0, read.getColumn(0).getDouble() + (at - read.getColumn(1).getDouble()) * 10);
    if (tokens < 1) break;
    SQLite::Statement write(worker, sql::update_bucket);
    write.bind(":tokens", tokens - 1);
    write.bind(":at", at);
    write.bind(":id", subscriber);
    write.exec();
    transaction.commit();
    ++taken;
  }
  EXPECT_GE(taken, 4);
  // The 4 left, and what refilled at 10/s since Surge's lease: about one token on a quiet
  // machine, more when its transactions wait for the disk.
  const double elapsed = proto::unix_now() - now;
  EXPECT_LE(taken, 4 + static_cast<int>(std::ceil(10 * elapsed)))
      << "the worker found more than the bucket held after Surge's lease";
  // Unspent tokens go back to the same row, never above the burst.
  const unspent_tokens back{.subscriber_id = subscriber, .tokens = 6};
  store->give_back_tokens({&back, 1}, proto::unix_now());
  EXPECT_LE(query_double(worker, "SELECT tokens FROM webhook_buckets"), 10);
  EXPECT_GE(query_double(worker, "SELECT tokens FROM webhook_buckets"), 5.9);
}

TEST_F(Seed001Queue, CoalescingIsRefusedByNameForTheShapeHasNoStateForIt) {
  const auto ids = produce(2);
  connection db({.location = path, .create_if_missing = false});
  EXPECT_EQ(testing::unsupported_refusal(
                [&] { read_unheld_due_rows(db, subscriber, t0, 10, 1 << 20, 1 << 20); }),
            "coalescing is not available on a seed001 queue");
  const replacement merged{.id = ids[0], .replaced_by = ids[1], .stands_since = double(t0)};
  EXPECT_EQ(testing::unsupported_refusal([&] {
              mark_coalesced(db, {&merged, 1}, t0);
            }),
            "coalescing is not available on a seed001 queue");
}

TEST_F(Seed001Queue, TheWorkersStatementsRunUnchangedOnAMigratedFile) {
  const auto ids = produce(3);
  const auto grabbed = worker_grab(t0, t0 + 30);
  ASSERT_EQ(grabbed.size(), 3u);
  {
    SQLite::Statement retry(worker, sql::mark_retry);
    retry.bind(":next", t0 + 5);
    retry.bind(":id", ids[0]);
    EXPECT_EQ(retry.exec(), 1);
    SQLite::Statement dead(worker, sql::mark_dead);
    dead.bind(":id", ids[1]);
    EXPECT_EQ(dead.exec(), 1);
    SQLite::Statement back(worker, sql::reschedule);
    back.bind(":now", t0);
    back.bind(":id", ids[2]);
    EXPECT_EQ(back.exec(), 1);
  }
  EXPECT_EQ(query_int(worker, of_row("next_attempt", ids[2])), t0 + 2);
  // Surge sees them as the worker left them: one retry, one dead, one pending.
  connection db({.location = path, .create_if_missing = false});
  const auto stats = read_stats(db, t0 + 10.0);
  EXPECT_EQ(stats.total.retry, 1);
  EXPECT_EQ(stats.total.dead, 1);
  EXPECT_EQ(stats.total.pending, 1);
  EXPECT_EQ(stats.total.due_now, 2);
}

}  // namespace
}  // namespace surge::storage::sqlite
