#include "storage/sqlite/backlog.hpp"
#include "storage/sqlite/maintenance.hpp"
#include "storage/sqlite/queue.hpp"

#include <gtest/gtest.h>

#include "tests/storage/test_db.hpp"

namespace surge::storage::sqlite {
namespace {

TEST(Backlog, CountsQueuedAndOverdueRowsPerSubscriber) {
  testing::temp_dir dir;
  auto db = testing::open_migrated(dir.file("queue.db"));
  const auto a = testing::insert_subscriber_old(db);
  const auto b = testing::insert_subscriber_old(db);
  const auto c = testing::insert_subscriber_old(db);
  testing::insert_deliveries_old(db, a, 3, 100);   // due long ago
  testing::insert_deliveries_old(db, a, 2, 950);   // due recently
  testing::insert_deliveries_old(db, b, 4, 2000);  // scheduled later
  const auto done = testing::insert_deliveries_old(db, c, 2, 100);
  db.exec("UPDATE webhook_delivery SET status = 'retry', locked_until = 9e12 WHERE id = " +
          std::to_string(done[0]));  // leased rows still count
  db.exec("UPDATE webhook_delivery SET status = 'done' WHERE id = " + std::to_string(done[1]));

  const auto all = backlog_by_subscriber(db, 900, proto::id_set{});
  ASSERT_EQ(all.size(), 3u);
  EXPECT_EQ(all[0].subscriber_id, a);
  EXPECT_EQ(all[0].queued, 5);
  EXPECT_EQ(all[0].overdue, 3);
  EXPECT_EQ(all[1].queued, 4);
  EXPECT_EQ(all[1].overdue, 0);
  EXPECT_EQ(all[2].queued, 1) << "done rows are not queued";
  EXPECT_EQ(all[2].overdue, 1);

  const auto only_b = backlog_by_subscriber(db, 900, *proto::id_set::parse(std::to_string(b)));
  ASSERT_EQ(only_b.size(), 1u);
  EXPECT_EQ(only_b[0].subscriber_id, b);
}

// Producers queue rows with next_attempt_at = 0, the schema's default: such a row is as old as
// its created_at, not 56 years overdue (it fed the overdue-rows page alert within seconds).
TEST(Backlog, ARowIsOverdueByTheLaterOfItsDueTimeAndItsCreation) {
  testing::temp_dir dir;
  auto db = testing::open_migrated(dir.file("queue.db"));
  const auto a = testing::insert_subscriber_old(db);
  testing::insert_deliveries_old(db, a, 2, 1000);
  db.exec("UPDATE webhook_delivery SET next_attempt_at = 0");
  testing::insert_deliveries_old(db, a, 3, 100);  // queued and due long ago: overdue
  const auto rows = backlog_by_subscriber(db, 900, proto::id_set{});
  ASSERT_EQ(rows.size(), 1u);
  EXPECT_EQ(rows[0].queued, 5);
  EXPECT_EQ(rows[0].overdue, 3);
  EXPECT_EQ(earliest_scheduled(db, 2000, proto::id_set{}), 100.0);
  db.exec("DELETE FROM webhook_delivery WHERE created_at = 100");
  EXPECT_EQ(earliest_scheduled(db, 2000, proto::id_set{}), 1000.0)
      << "the oldest row counts from its creation";
  const auto stats = read_stats(db, 1010, proto::id_set{});
  EXPECT_DOUBLE_EQ(stats.total.oldest_due_age, 10.0);
}

}  // namespace
}  // namespace surge::storage::sqlite
