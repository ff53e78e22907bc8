#include "storage/backlog.hpp"

#include <gtest/gtest.h>

#include "test_db.hpp"

namespace surge::storage {
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

}  // namespace
}  // namespace surge::storage
