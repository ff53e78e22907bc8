#include "storage/sqlite/retention.hpp"

#include <string>

#include <gtest/gtest.h>

#include "tests/storage/test_db.hpp"

namespace surge::storage::sqlite {
namespace {

using testing::query_int;

class Retention : public ::testing::Test {
 protected:
  void SetUp() override { sub_ = testing::insert_subscriber_old(db_); }

  // A row created at `created_at`, then set to `status`; returns its id.
  std::int64_t row(const std::string& status, double created_at, const std::string& extra = "") {
    const auto id = testing::insert_deliveries_old(db_, sub_, 1, created_at)[0];
    db_.exec("UPDATE webhook_delivery SET status = '" + status + "'" + extra +
             " WHERE id = " + std::to_string(id));
    return id;
  }
  void attempt(std::int64_t delivery_id, double finished_at) {
    db_.exec(
        "INSERT INTO surge_attempt (delivery_id, subscriber_id, attempt, started_at, "
        "finished_at, status_code) VALUES (" +
        std::to_string(delivery_id) + ", " + std::to_string(sub_) + ", 1, " +
        std::to_string(finished_at - 1) + ", " + std::to_string(finished_at) + ", 200)");
  }
  bool exists(std::int64_t id) {
    return query_int(db_,
                     "SELECT COUNT(*) FROM webhook_delivery WHERE id = " + std::to_string(id)) == 1;
  }
  std::int64_t attempts_of(std::int64_t id) {
    return query_int(
        db_, "SELECT COUNT(*) FROM surge_attempt WHERE delivery_id = " + std::to_string(id));
  }

  testing::temp_dir dir_;
  SQLite::Database db_ = testing::open_migrated(dir_.file("queue.db"));
  std::int64_t sub_ = 0;
};

TEST_F(Retention, DeletesOnlyFinishedRowsOlderThanTheCutoffAndTheirAttempts) {
  const auto old_done = row("done", 100, ", delivered_at = 110");
  const auto old_done_by_other = row("done", 100);  // the other drainer leaves delivered_at NULL
  const auto recently_delivered = row("done", 100, ", delivered_at = 900");
  const auto new_done = row("done", 800, ", delivered_at = 810");
  const auto old_dead = row("dead", 100);
  const auto old_pending = row("pending", 100);
  const auto old_retry = row("retry", 100, ", attempts = 3");
  const auto leased_done = row("done", 100, ", delivered_at = 110, locked_until = 9e12");
  attempt(old_done, 110);
  attempt(recently_delivered, 900);
  attempt(new_done, 810);
  attempt(old_dead, 120);
  attempt(old_retry, 120);
  attempt(424242, 50);    // its delivery row was deleted by someone else
  attempt(434343, 1000);  // the same, but newer than the cutoff

  const auto result = prune(db_, {.cutoff = 500, .batch_rows = 1, .pause = {}});
  EXPECT_EQ(result.deliveries, 2);
  EXPECT_FALSE(exists(old_done));
  EXPECT_FALSE(exists(old_done_by_other));
  for (const auto kept :
       {recently_delivered, new_done, old_dead, old_pending, old_retry, leased_done}) {
    EXPECT_TRUE(exists(kept)) << "row " << kept;
  }
  EXPECT_EQ(result.attempts, 2) << "the pruned row's attempt and the old orphan";
  EXPECT_EQ(attempts_of(old_done), 0);
  EXPECT_EQ(attempts_of(424242), 0);
  EXPECT_EQ(attempts_of(434343), 1) << "newer than the cutoff stays in the audit";
  EXPECT_EQ(attempts_of(old_retry), 1) << "a row still queued keeps its attempts";
  EXPECT_EQ(attempts_of(old_dead), 1) << "dead letters keep theirs unless --dead";
  EXPECT_EQ(result.transactions, 4) << "one row per transaction: two rows, two attempts";
  EXPECT_GT(result.longest_transaction.count(), 0);

  const auto with_dead = prune(db_, {.cutoff = 500, .dead = true, .pause = {}});
  EXPECT_EQ(with_dead.deliveries, 1);
  EXPECT_FALSE(exists(old_dead));
  EXPECT_EQ(attempts_of(old_dead), 0);
  EXPECT_TRUE(exists(old_pending));
  EXPECT_TRUE(exists(old_retry));
  EXPECT_TRUE(exists(leased_done));
}

TEST_F(Retention, GivesFreedPagesBackOnlyWithIncrementalVacuum) {
  const std::string big(4000, 'x');
  for (int i = 0; i < 300; ++i) {
    const auto id = row("done", 100, ", delivered_at = 110");
    db_.exec("UPDATE webhook_delivery SET payload = '" + big +
             "' WHERE id = " + std::to_string(id));
  }
  auto plain = prune(db_, {.cutoff = 105, .pause = {}});
  EXPECT_EQ(plain.deliveries, 0) << "delivered after the cutoff";
  plain = prune(db_, {.cutoff = 500, .batch_rows = 100, .pause = {}});
  EXPECT_EQ(plain.deliveries, 300);
  EXPECT_FALSE(plain.incremental_vacuum);
  EXPECT_EQ(plain.pages_reclaimed, 0);
  EXPECT_GT(plain.free_pages, 250) << "freed pages stay in the file, for new rows";

  const auto pages_before = query_int(db_, "PRAGMA page_count");
  const auto pages_after_vacuum = enable_incremental_vacuum(db_);
  EXPECT_LT(pages_after_vacuum, pages_before);
  for (int i = 0; i < 300; ++i) {
    const auto id = row("done", 100, ", delivered_at = 110");
    db_.exec("UPDATE webhook_delivery SET payload = '" + big +
             "' WHERE id = " + std::to_string(id));
  }
  const auto grown = query_int(db_, "PRAGMA page_count");
  const auto result = prune(db_, {.cutoff = 500, .pause = {}, .vacuum_pages = 50});
  EXPECT_TRUE(result.incremental_vacuum);
  EXPECT_EQ(result.deliveries, 300);
  EXPECT_GT(result.pages_reclaimed, 250);
  EXPECT_EQ(result.free_pages, 0);
  EXPECT_LT(query_int(db_, "PRAGMA page_count"), grown - 250);
}

}  // namespace
}  // namespace surge::storage::sqlite
