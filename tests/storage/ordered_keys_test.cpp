// Ordered delivery in storage: the ordered claim, stopped keys, and the settings' table and index,
// through the drain store and the queue functions the CLI uses, on both SQLite shapes and on
// PostgreSQL. The rows are written with the shapes' own producers' statements.
#include "storage/ordered_keys.hpp"

#include <cmath>
#include <functional>
#include <memory>
#include <set>
#include <string>

#include <SQLiteCpp/Database.h>
#include <SQLiteCpp/Statement.h>
#include <gtest/gtest.h>

#include "proto/clock.hpp"
#include "proto/signing.hpp"
#include "storage/dead_letters.hpp"
#include "storage/drain_store.hpp"
#include "storage/ordered_claim.hpp"
#include "storage/schema.hpp"
#include "storage/sqlite/claims.hpp"
#include "storage/subscribers.hpp"
#include "tests/storage/sqlite/other_drainer_sql.hpp"
#include "tests/storage/seed001/worker_sql.hpp"
#include "tests/storage/queue_kinds.hpp"
#include "tests/support/postgres_server.hpp"
#include "tests/support/seed001_ddl.hpp"
#include "tests/support/sql_client.hpp"
#include "tests/support/temp_dir.hpp"

namespace surge::storage {
namespace {

using surge::testing::sql_client;

using kind = testing::queue_kind;

// A queue of one kind, its producer's inserts, and the drain store Surge works it with.
struct ordered_queue {
  surge::testing::temp_dir dir;
  kind what;
  std::string location;
  std::optional<queue_shape> shape;
  std::optional<connection> db;
  std::optional<sql_client> producer;
  std::int64_t subscriber = 0;
  std::string secret = "0123456789abcdef0123456789abcdef";
  double now = std::floor(proto::unix_now());

  ordered_queue(kind k, surge::testing::postgres_server* server) : what(k) {
    if (k == kind::postgres) {
      location = server->create_database();
    } else {
      location = dir.file("queue.db");
      if (k == kind::seed001) {
        SQLite::Database raw(location, SQLite::OPEN_READWRITE | SQLite::OPEN_CREATE);
        raw.exec(surge::testing::seed001_ddl);
        shape = queue_shape::seed001;
      }
    }
    db.emplace(connection_config{.location = location, .shape = shape});
    migrate(*db, true);
    producer.emplace(location);
    subscriber_row row;
    row.url = "http://127.0.0.1:9/";
    row.secret = secret;
    row.rate_per_sec = 100;
    row.burst = 10;
    row.region = "DE";
    if (k == kind::seed001) row.signing = "stored";
    subscriber = add_subscriber(*db, row);
  }

  // One row of the producer's, keyed by `key`, due now; returns its id.
  // `padding`: bytes of filler after the key, for a large payload.
  std::int64_t row(const std::string& key, std::size_t padding = 0) {
    const auto payload =
        R"({"video_id":")" + key + R"(","pad":")" + std::string(padding, 'p') + R"("})";
    const auto at = std::to_string(static_cast<std::int64_t>(now) - 1);
    if (what == kind::seed001) {
      return std::stoll(
          *producer
               ->query(std::string(seed001_worker_sql::insert_delivery) + " RETURNING id",
                       {std::to_string(subscriber), "video.ranked", payload,
                        proto::stored_signature_for(secret, payload), at, at})
               .at(0)
               .at(0));
    }
    return std::stoll(
        *producer
             ->query(std::string(other_drainer_sql::insert_delivery) + " RETURNING id",
                     {std::to_string(subscriber), "video.ranked", payload, at, at})
             .at(0)
             .at(0));
  }

  std::unique_ptr<drain_store> store() {
    auto made = open_drain_store({.location = location, .shape = shape});
    made->renew_ownership(proto::unix_now());
    return made;
  }
};

class OrderedKeysOn : public ::testing::TestWithParam<kind> {
 protected:
  void SetUp() override {
    if (GetParam() == kind::postgres) {
      std::string why_not;
      server_ = surge::testing::postgres_server::shared(&why_not);
      if (server_ == nullptr) GTEST_SKIP() << why_not;
    }
    queue_ = std::make_unique<ordered_queue>(GetParam(), server_);
  }

  subscriber_demand demand(int rows, proto::dead_key when_dead = proto::dead_key::moves_on) {
    return {.subscriber_id = queue_->subscriber,
            .rows = rows,
            .order = proto::order_rule{.pointer = "/video_id", .when_dead = when_dead}};
  }
  cycle_result claim(drain_store& store, const subscriber_demand& asked,
                     std::span<const outcome> outcomes = {}) {
    return store.write_and_claim(outcomes, {}, {&asked, 1}, queue_->now, 60, 1 << 20);
  }
  static outcome finished(const claimed_row& row, outcome_kind how, double next_attempt_at = 0) {
    outcome out{.delivery_id = row.id, .lease = row.lease, .kind = how, .attempts = 1};
    out.next_attempt_at = next_attempt_at;
    if (row.death_stops_key && row.order_key) {
      out.stops_key = stopped_key{.subscriber_id = row.subscriber_id, .key = *row.order_key};
    }
    return out;
  }
  static std::vector<std::int64_t> ids(const cycle_result& cycle) {
    std::vector<std::int64_t> out;
    for (const auto& row : cycle.claimed) out.push_back(row.id);
    return out;
  }

  surge::testing::postgres_server* server_ = nullptr;
  std::unique_ptr<ordered_queue> queue_;
};

TEST_P(OrderedKeysOn, AClaimTakesTheFirstRowOfEachKeyAndTheRestWaitForIt) {
  auto& q = *queue_;
  const auto a1 = q.row("a");
  const auto b1 = q.row("b");
  const auto a2 = q.row("a");
  const auto c1 = q.row("c");
  const auto b2 = q.row("b");
  auto store = q.store();

  const auto first = claim(*store, demand(10));
  EXPECT_EQ(ids(first), (std::vector<std::int64_t>{a1, b1, c1}));
  ASSERT_EQ(first.claimed.size(), 3u);
  EXPECT_EQ(first.claimed[0].order_key, "\"a\"");
  // a2 and b2 are due and wait only for rows in flight: the subscriber is asked again soon.
  const auto in_flight = claim(*store, demand(10));
  EXPECT_TRUE(in_flight.claimed.empty());
  EXPECT_EQ(in_flight.more_due, std::vector<std::int64_t>{q.subscriber});

  // a1 done: a2 goes. b1 retries in an hour: b2 waits for it, and nothing is due soon.
  const std::vector<outcome> outcomes{finished(first.claimed[0], outcome_kind::done),
                                      finished(first.claimed[1], outcome_kind::retry, q.now + 3600),
                                      finished(first.claimed[2], outcome_kind::done)};
  const auto next = claim(*store, demand(10), outcomes);
  EXPECT_EQ(next.written.applied, 3);
  EXPECT_EQ(ids(next), std::vector<std::int64_t>{a2});
  const auto after = claim(*store, demand(10),
                           std::vector<outcome>{finished(next.claimed[0], outcome_kind::done)});
  EXPECT_TRUE(after.claimed.empty()) << "b2 went before b1, which waits for its retry";
  EXPECT_TRUE(after.more_due.empty());
  (void)b2;
}

TEST_P(OrderedKeysOn, AClaimNeverAsksForMoreRowsThanAskedAndReadsPastHeldRows) {
  auto& q = *queue_;
  std::vector<std::int64_t> firsts;
  // Three rows of one key, then ten keys: the claim reads past the held rows.
  firsts.push_back(q.row("x"));
  q.row("x");
  q.row("x");
  for (int i = 0; i < 10; ++i) firsts.push_back(q.row("k" + std::to_string(i)));
  auto store = q.store();
  const auto cycle = claim(*store, demand(4));
  EXPECT_EQ(ids(cycle), std::vector<std::int64_t>(firsts.begin(), firsts.begin() + 4));
  const auto rest = claim(*store, demand(100));
  EXPECT_EQ(ids(rest), std::vector<std::int64_t>(firsts.begin() + 4, firsts.end()));
}

TEST_P(OrderedKeysOn, ADeadRowStopsItsKeyUntilItIsReplayedOrTheKeyResumed) {
  auto& q = *queue_;
  const auto a1 = q.row("a");
  const auto b1 = q.row("b");
  const auto a2 = q.row("a");
  const auto b2 = q.row("b");
  auto store = q.store();
  const auto first = claim(*store, demand(10, proto::dead_key::stops));
  ASSERT_EQ(ids(first), (std::vector<std::int64_t>{a1, b1}));
  EXPECT_TRUE(first.claimed[0].death_stops_key);
  const std::vector<outcome> deaths{finished(first.claimed[0], outcome_kind::dead),
                                    finished(first.claimed[1], outcome_kind::dead)};
  const auto stopped = claim(*store, demand(10, proto::dead_key::stops), deaths);
  EXPECT_TRUE(stopped.claimed.empty());
  const auto keys = list_stopped_keys(*q.db);
  ASSERT_EQ(keys.size(), 2u);
  EXPECT_EQ(keys[0].subscriber_id, q.subscriber);
  EXPECT_EQ(keys[0].key, "\"a\"");
  EXPECT_EQ(keys[0].delivery_id, a1);
  EXPECT_GT(keys[0].stopped_at, q.now - 60);

  // a: resumed past its dead row; b: its dead row (the newest) replayed, and it goes first again.
  EXPECT_EQ(resume_stopped_keys(*q.db, q.subscriber, std::string("\"a\"")), 1);
  EXPECT_EQ(resume_stopped_keys(*q.db, q.subscriber, std::string("\"a\"")), 0);
  const auto replayed = replay_dead(*q.db, {.limit = 1}, q.now);
  EXPECT_EQ(replayed.replayed, 1);
  EXPECT_TRUE(list_stopped_keys(*q.db).empty());
  const auto resumed = claim(*store, demand(10, proto::dead_key::stops));
  EXPECT_EQ(ids(resumed), (std::vector<std::int64_t>{b1, a2})) << "b2 waits for b1";
  (void)b2;
}

// A stopped key's rows stay queued until an operator resumes it. More of them at the head of the
// queue than one claim reads must not keep the subscriber's other keys waiting behind them.
TEST_P(OrderedKeysOn, StoppedRowsMoreThanAClaimReadsHoldBackNoOtherKey) {
  auto& q = *queue_;
  const auto a1 = q.row("a");
  q.producer->begin();
  for (std::int64_t i = 0; i < ordered_read_limit(1) + 50; ++i) q.row("a");
  q.producer->commit();
  const auto b1 = q.row("b");
  auto store = q.store();
  const auto first = claim(*store, demand(1, proto::dead_key::stops));
  ASSERT_EQ(ids(first), std::vector<std::int64_t>{a1});
  // a1 dies and stops its key; b1 lies past more of a's rows than one claim reads.
  auto next = claim(*store, demand(1, proto::dead_key::stops),
                    std::vector<outcome>{finished(first.claimed[0], outcome_kind::dead)});
  for (int claims = 1; claims < 3 && next.claimed.empty(); ++claims) {
    next = claim(*store, demand(1, proto::dead_key::stops));
  }
  EXPECT_EQ(ids(next), std::vector<std::int64_t>{b1})
      << "the claims read only the stopped key's rows";
  // Resumed, the key's next row goes first again: the claim reads from the start once more.
  ASSERT_EQ(resume_stopped_keys(*q.db, q.subscriber, std::string("\"a\"")), 1);
  const auto resumed = claim(*store, demand(1, proto::dead_key::stops),
                             std::vector<outcome>{finished(next.claimed[0], outcome_kind::done)});
  EXPECT_EQ(ids(resumed), std::vector<std::int64_t>{a1 + 1});
}

TEST_P(OrderedKeysOn, ARowThatComesBackBeforeALaterRowInFlightWaitsForIt) {
  auto& q = *queue_;
  const auto a1 = q.row("a");
  const auto a2 = q.row("a");
  auto store = q.store();
  const auto first = claim(*store, demand(10));
  ASSERT_EQ(ids(first), std::vector<std::int64_t>{a1});
  // a1 dies and its key moves on: a2 goes.
  const auto second = claim(*store, demand(10),
                            std::vector<outcome>{finished(first.claimed[0], outcome_kind::dead)});
  ASSERT_EQ(ids(second), std::vector<std::int64_t>{a2});
  // a1 is replayed while a2 is in flight: it is a's first unfinished row again, and waits.
  EXPECT_EQ(replay_dead(*q.db, {}, q.now).replayed, 1);
  const auto held = claim(*store, demand(10));
  EXPECT_TRUE(held.claimed.empty()) << "two rows of one key in flight";
  EXPECT_EQ(held.more_due, std::vector<std::int64_t>{q.subscriber});
  const auto after = claim(*store, demand(10),
                           std::vector<outcome>{finished(second.claimed[0], outcome_kind::done)});
  EXPECT_EQ(ids(after), std::vector<std::int64_t>{a1});
}

TEST_P(OrderedKeysOn, ALargePayloadIsReadAloneForItsKeyAndItsRow) {
  auto& q = *queue_;
  // 100 KiB: over what a page of the window holds per row, under the claim's 1 MiB cap.
  const auto big = q.row("a", 100 * 1024);
  const auto after_big = q.row("a");
  const auto other = q.row("b");
  auto store = q.store();
  const auto first = claim(*store, demand(10));
  ASSERT_EQ(ids(first), (std::vector<std::int64_t>{big, other}));
  EXPECT_EQ(first.claimed[0].order_key, "\"a\"");
  EXPECT_EQ(first.claimed[0].payload.size(), 100 * 1024 + 25u);
  EXPECT_EQ(first.claimed[0].payload_bytes, 100 * 1024 + 25);
  const auto next = claim(*store, demand(10),
                          std::vector<outcome>{finished(first.claimed[0], outcome_kind::done)});
  EXPECT_EQ(ids(next), std::vector<std::int64_t>{after_big});
}

TEST_P(OrderedKeysOn, TheSettingIsLoadedAndGoesWithItsSubscriber) {
  auto& q = *queue_;
  set_subscriber_order(
      *q.db, q.subscriber,
      proto::order_rule{.pointer = "/video_id", .when_dead = proto::dead_key::stops});
  auto loaded = load_subscriber(*q.db, q.subscriber);
  ASSERT_TRUE(loaded && loaded->order);
  EXPECT_EQ(loaded->order->pointer, "/video_id");
  EXPECT_EQ(loaded->order->when_dead, proto::dead_key::stops);
  EXPECT_TRUE(q.store()->load_subscribers({}).at(0).order.has_value());
  set_subscriber_order(*q.db, q.subscriber, std::nullopt);
  EXPECT_FALSE(load_subscriber(*q.db, q.subscriber)->order.has_value());

  set_subscriber_order(*q.db, q.subscriber, proto::order_rule{.pointer = ""});
  const std::string table = q.what == kind::seed001 ? "webhook_subscribers" : "webhook_subscriber";
  q.producer->exec("DELETE FROM " + table + " WHERE id = ?", {std::to_string(q.subscriber)});
  EXPECT_EQ(q.producer->number("SELECT count(*) FROM surge_subscriber_order"), 0);
}

INSTANTIATE_TEST_SUITE_P(Kinds, OrderedKeysOn, testing::all_queue_kinds(),
                         testing::queue_kind_name);

// The index the ordered claim reads: made only while a subscriber is ordered, and read in
// enqueue order without a sort.
TEST(OrderedKeys, TheOrderedClaimReadsItsOwnIndexWhichExistsOnlyWhileASubscriberIsOrdered) {
  ordered_queue q(kind::seed000, nullptr);
  const auto index_count = [&] {
    return q.producer->number(
        "SELECT count(*) FROM sqlite_master WHERE name = 'surge_delivery_subscriber_order'");
  };
  EXPECT_EQ(index_count(), 0);
  set_subscriber_order(*q.db, q.subscriber, proto::order_rule{.pointer = "/video_id"});
  EXPECT_EQ(index_count(), 1);
  SQLite::Database file(q.location);
  SQLite::Statement plan(file,
                         "EXPLAIN QUERY PLAN " + sqlite::seed000_claim_statements().ordered_rows);
  std::string details;
  while (plan.executeStep()) details += plan.getColumn(3).getString() + "\n";
  EXPECT_NE(details.find("surge_delivery_subscriber_order"), std::string::npos) << details;
  EXPECT_EQ(details.find("TEMP B-TREE"), std::string::npos) << details;
  set_subscriber_order(*q.db, q.subscriber, std::nullopt);
  EXPECT_EQ(index_count(), 0);
}

}  // namespace
}  // namespace surge::storage
