// The "look now" signal (storage/change_watch) on a real file: another connection's commit is
// noticed, this connection's own commits are not, and only subscribers with new due rows are
// named.
#include <gtest/gtest.h>

#include "storage/sqlite/change_watch.hpp"
#include "storage/sqlite/claims.hpp"
#include "storage/sqlite/outcomes.hpp"
#include "tests/storage/test_db.hpp"

namespace surge::storage::sqlite {
namespace {

using testing::insert_deliveries_old;
using testing::insert_subscriber_old;

class ChangeWatch : public ::testing::Test {
 protected:
  testing::temp_dir dir_;
  std::string path_ = dir_.file("queue.db");
  SQLite::Database db_ = testing::open_migrated(path_);        // the drain's connection
  SQLite::Database producer_ = testing::open_migrated(path_);  // a web application's
};

TEST_F(ChangeWatch, NothingChangedNothingReported) {
  insert_subscriber_old(producer_);
  change_watch watch(db_);
  const auto found = watch.check(100);
  EXPECT_FALSE(found.changed);
  EXPECT_FALSE(found.any());
}

TEST_F(ChangeWatch, AnotherConnectionsRowsNameTheirSubscribers) {
  const auto a = insert_subscriber_old(producer_);
  const auto b = insert_subscriber_old(producer_);
  const auto c = insert_subscriber_old(producer_);
  insert_deliveries_old(producer_, a, 3, 10);  // queued before the watch: not new
  change_watch watch(db_);
  insert_deliveries_old(producer_, b, 2, 10);
  insert_deliveries_old(producer_, c, 1, 10);
  const auto found = watch.check(100);
  EXPECT_TRUE(found.changed);
  EXPECT_FALSE(found.all);
  EXPECT_EQ(found.subscribers, (std::vector<std::int64_t>{b, c}));
  // Seen once: the next check has nothing new.
  EXPECT_FALSE(watch.check(100).changed);
  insert_deliveries_old(producer_, a, 1, 10);
  EXPECT_EQ(watch.check(100).subscribers, (std::vector<std::int64_t>{a}));
}

TEST_F(ChangeWatch, OwnCommitsAreNotAChange) {
  const auto sub = insert_subscriber_old(producer_);
  change_watch watch(db_);
  insert_deliveries_old(producer_, sub, 5, 10);
  ASSERT_EQ(watch.check(100).subscribers.size(), 1u);
  // The drain's own claims and outcomes commit on its connection and must not wake anyone.
  claimer claims(db_);
  const std::vector<subscriber_demand> demand{{sub, 5}};
  const auto rows = claims.claim(demand, 100, 30);
  ASSERT_EQ(rows.size(), 5u);
  std::vector<outcome> outcomes;
  for (const auto& row : rows) {
    outcomes.push_back(
        {.delivery_id = row.id, .lease = row.lease, .attempts = 1, .finished_at = 100});
  }
  outcome_writer(db_).write(outcomes);
  EXPECT_FALSE(watch.check(101).changed);
}

TEST_F(ChangeWatch, RowsNotDueYetWakeNobody) {
  const auto sub = insert_subscriber_old(producer_);
  change_watch watch(db_);
  insert_deliveries_old(producer_, sub, 2, 500);  // due at 500
  const auto found = watch.check(100);
  EXPECT_TRUE(found.changed);
  EXPECT_FALSE(found.any());
}

TEST_F(ChangeWatch, ABulkInsertWakesEveryone) {
  const auto sub = insert_subscriber_old(producer_);
  change_watch watch(db_, 10);
  insert_deliveries_old(producer_, sub, 11, 10);
  const auto found = watch.check(100);
  EXPECT_TRUE(found.all);
  EXPECT_TRUE(found.subscribers.empty());
  // Everything up to the bulk insert counts as seen.
  insert_deliveries_old(producer_, sub, 1, 10);
  const auto next = watch.check(100);
  EXPECT_FALSE(next.all);
  EXPECT_EQ(next.subscribers, (std::vector<std::int64_t>{sub}));
}

TEST_F(ChangeWatch, IdsHandedOutAgainAfterAPruneAreSeen) {
  const auto sub = insert_subscriber_old(producer_);
  insert_deliveries_old(producer_, sub, 3, 10);
  change_watch watch(db_);
  // The top rows go (a prune), so SQLite hands their ids out again.
  producer_.exec("DELETE FROM webhook_delivery WHERE id > 1");
  EXPECT_FALSE(watch.check(100).any());
  insert_deliveries_old(producer_, sub, 1, 10);
  EXPECT_EQ(watch.check(100).subscribers, (std::vector<std::int64_t>{sub}));
}

}  // namespace
}  // namespace surge::storage::sqlite
