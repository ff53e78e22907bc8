#include "storage/sqlite/queue.hpp"

#include <stdexcept>
#include <string>

#include <gtest/gtest.h>

#include "storage/sqlite/claims.hpp"
#include "storage/sqlite/subscribers.hpp"
#include "tests/storage/test_db.hpp"

namespace surge::storage::sqlite {
namespace {

using testing::query_double;
using testing::query_int;
using testing::query_text;

class Queue : public ::testing::Test {
 protected:
  std::int64_t add(const std::string& event_types, bool active = true) {
    subscriber_row row;
    row.url = "https://p.example/";
    row.secret = "s";
    row.event_types = event_types;
    row.active = active;
    return add_subscriber(db_, row);
  }

  testing::temp_dir dir_;
  SQLite::Database db_ = testing::open_migrated(dir_.file("queue.db"));
};

TEST_F(Queue, EmitFansOutToMatchingActiveSubscribers) {
  const auto all = add("*");
  const auto video = add("video.*");
  const auto exact = add("channel.created, video.trending");
  const auto other = add("channel.*");
  const auto inactive = add("*", false);
  const std::string payload = "{\"clip\":\"caf\xc3\xa9\",\"q\":\"a\\\"b\"}";

  EXPECT_EQ(emit_event(db_, "video.trending", payload, 1000.25, 3), 9);
  for (const auto id : {all, video, exact}) {
    EXPECT_EQ(query_int(db_, "SELECT COUNT(*) FROM webhook_delivery WHERE subscriber_id = " +
                                 std::to_string(id)),
              3);
  }
  for (const auto id : {other, inactive}) {
    EXPECT_EQ(query_int(db_, "SELECT COUNT(*) FROM webhook_delivery WHERE subscriber_id = " +
                                 std::to_string(id)),
              0);
  }
  EXPECT_EQ(query_int(db_,
                      "SELECT COUNT(*) FROM webhook_delivery WHERE status = 'pending' "
                      "AND attempts = 0 AND locked_until = 0 "
                      "AND event_type = 'video.trending' "
                      "AND created_at = 1000.25 AND next_attempt_at = 1000.25"),
            9);
  EXPECT_EQ(query_text(db_, "SELECT payload FROM webhook_delivery LIMIT 1"), payload);
  EXPECT_EQ(query_text(db_, "SELECT typeof(payload) FROM webhook_delivery LIMIT 1"), "text");

  EXPECT_EQ(emit_event(db_, "channel.created", "{}", 1001), 3);
  EXPECT_EQ(emit_event(db_, "nothing.listens", "{}", 1001), 1);  // only '*'
  EXPECT_THROW(emit_event(db_, "video.trending", "{}", 1001, 0), std::invalid_argument);
}

TEST_F(Queue, StatsCountByStatusDueLeasedAndAge) {
  const auto a = add("*");
  const auto b = add("*");
  add("*");  // no rows: not listed
  testing::insert_deliveries_old(db_, a, 5, 100);
  testing::insert_deliveries_old(db_, a, 2, 500);  // not yet due
  testing::insert_deliveries_old(db_, b, 4, 150);
  db_.exec("UPDATE webhook_delivery SET status = 'done' WHERE id IN (1, 2)");
  db_.exec("UPDATE webhook_delivery SET status = 'dead' WHERE id = 8");
  db_.exec("UPDATE webhook_delivery SET status = 'retry' WHERE id IN (3, 9)");
  claimer claims(db_);
  const std::vector<subscriber_demand> demand = {{b, 1}};
  ASSERT_EQ(claims.claim(demand, 200, 30).size(), 1u);  // leases row 9

  const auto stats = read_stats(db_, 200);
  ASSERT_EQ(stats.per_subscriber.size(), 2u);
  const auto& sa = stats.per_subscriber[0];
  EXPECT_EQ(sa.subscriber_id, a);
  EXPECT_EQ(sa.pending, 4);  // 4, 5 due; 6, 7 later
  EXPECT_EQ(sa.retry, 1);
  EXPECT_EQ(sa.done, 2);
  EXPECT_EQ(sa.dead, 0);
  EXPECT_EQ(sa.due_now, 3);
  EXPECT_EQ(sa.leased, 0);
  EXPECT_DOUBLE_EQ(sa.oldest_due_age, 100);
  const auto& sb = stats.per_subscriber[1];
  EXPECT_EQ(sb.subscriber_id, b);
  EXPECT_EQ(sb.pending, 2);
  EXPECT_EQ(sb.retry, 1);
  EXPECT_EQ(sb.dead, 1);
  EXPECT_EQ(sb.due_now, 3);
  EXPECT_EQ(sb.leased, 1);
  EXPECT_DOUBLE_EQ(sb.oldest_due_age, 50);

  EXPECT_EQ(stats.total.pending, 6);
  EXPECT_EQ(stats.total.retry, 2);
  EXPECT_EQ(stats.total.done, 2);
  EXPECT_EQ(stats.total.dead, 1);
  EXPECT_EQ(stats.total.due_now, 6);
  EXPECT_EQ(stats.total.leased, 1);
  EXPECT_DOUBLE_EQ(stats.total.oldest_due_age, 100);

  const auto only_b = read_stats(db_, 200, *proto::id_set::parse(std::to_string(b)));
  ASSERT_EQ(only_b.per_subscriber.size(), 1u);
  EXPECT_EQ(only_b.total.pending, 2);
  EXPECT_DOUBLE_EQ(only_b.total.oldest_due_age, 50);

  // Nothing due yet: no age.
  EXPECT_EQ(read_stats(db_, 50).total.oldest_due_age, 0);
  EXPECT_EQ(read_stats(db_, 50).total.due_now, 0);
}

TEST_F(Queue, OutstandingIsDueOrLeased) {
  const auto a = add("*");
  const auto b = add("*");
  testing::insert_deliveries_old(db_, a, 3, 100);
  testing::insert_deliveries_old(db_, a, 2, 500);
  testing::insert_deliveries_old(db_, b, 1, 100);
  db_.exec("UPDATE webhook_delivery SET status = 'done' WHERE id = 1");
  EXPECT_EQ(count_outstanding(db_, 200), 3);
  EXPECT_EQ(count_outstanding(db_, 200, *proto::id_set::parse(std::to_string(a))), 2);

  claimer claims(db_);
  const std::vector<subscriber_demand> demand = {{a, 10}};
  ASSERT_EQ(claims.claim(demand, 200, 30).size(), 2u);
  EXPECT_EQ(count_outstanding(db_, 200), 3);  // leased still counts
  db_.exec("UPDATE webhook_delivery SET status = 'done', locked_until = 0 WHERE id IN (2, 3, 6)");
  EXPECT_EQ(count_outstanding(db_, 200), 0);
  EXPECT_EQ(count_outstanding(db_, 600), 2);
  EXPECT_EQ(query_double(db_, "SELECT MAX(locked_until) FROM webhook_delivery"), 0);
  // Leased before it falls due (a claim looks ahead of its subscriber's pace): outstanding too.
  db_.exec("UPDATE webhook_delivery SET locked_until = 700 WHERE id = 4");
  EXPECT_EQ(count_outstanding(db_, 200), 1);
  EXPECT_EQ(count_outstanding(db_, 200, *proto::id_set::parse(std::to_string(b))), 0);
  EXPECT_EQ(count_outstanding(db_, 600), 2);
}

}  // namespace
}  // namespace surge::storage::sqlite
