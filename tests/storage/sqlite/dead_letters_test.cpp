#include "storage/sqlite/dead_letters.hpp"

#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "tests/storage/test_db.hpp"

namespace surge::storage::sqlite {
namespace {

using testing::query_double;
using testing::query_int;
using testing::query_text;

std::vector<std::int64_t> ids_of(const std::vector<dead_row>& rows) {
  std::vector<std::int64_t> ids;
  for (const auto& row : rows) ids.push_back(row.id);
  return ids;
}

class DeadLetters : public ::testing::Test {
 protected:
  void SetUp() override {
    sub_a_ = testing::insert_subscriber_old(db_);
    sub_b_ = testing::insert_subscriber_old(db_);
    // created_at 100, 200, 300 for a; 150, 250 for b; one pending and one done row each.
    for (const double at : {100.0, 200.0, 300.0}) dead(sub_a_, at);
    for (const double at : {150.0, 250.0}) dead(sub_b_, at);
    testing::insert_deliveries_old(db_, sub_a_, 1, 400);
    const auto done = testing::insert_deliveries_old(db_, sub_b_, 1, 400)[0];
    db_.exec("UPDATE webhook_delivery SET status = 'done' WHERE id = " + std::to_string(done));
  }

  std::int64_t dead(std::int64_t subscriber, double created_at) {
    const auto id = testing::insert_deliveries_old(db_, subscriber, 1, created_at)[0];
    db_.exec(
        "UPDATE webhook_delivery SET status = 'dead', attempts = 8, last_status = 503, "
        "last_error = 'attempt limit', locked_until = 0, next_attempt_at = 9999 "
        "WHERE id = " +
        std::to_string(id));
    return id;
  }

  testing::temp_dir dir_;
  SQLite::Database db_ = testing::open_migrated(dir_.file("queue.db"));
  std::int64_t sub_a_ = 0, sub_b_ = 0;
};

TEST_F(DeadLetters, ListsNewestFirstWithFilters) {
  const auto all = list_dead(db_, {});
  EXPECT_EQ(ids_of(all), (std::vector<std::int64_t>{3, 5, 2, 4, 1}));
  EXPECT_EQ(all[0].subscriber_id, sub_a_);
  EXPECT_EQ(all[0].event_type, "video.trending");
  EXPECT_EQ(all[0].attempts, 8);
  EXPECT_EQ(all[0].last_status, 503);
  EXPECT_EQ(all[0].last_error, "attempt limit");
  EXPECT_EQ(all[0].created_at, 300);

  dead_selection only_a;
  only_a.subscribers = *proto::id_set::parse(std::to_string(sub_a_));
  EXPECT_EQ(ids_of(list_dead(db_, only_a)), (std::vector<std::int64_t>{3, 2, 1}));
  only_a.created_since = 200;  // at or after
  EXPECT_EQ(ids_of(list_dead(db_, only_a)), (std::vector<std::int64_t>{3, 2}));
  dead_selection newest;
  newest.limit = 2;
  EXPECT_EQ(ids_of(list_dead(db_, newest)), (std::vector<std::int64_t>{3, 5}));
}

TEST_F(DeadLetters, ReplayPutsTheSelectionBackToPending) {
  dead_selection which;
  which.subscribers = *proto::id_set::parse(std::to_string(sub_a_));
  which.created_since = 150;
  const auto report = replay_dead(db_, which, 5000);
  EXPECT_EQ(report.replayed, 2);
  EXPECT_TRUE(report.inactive_subscribers.empty());
  for (const int id : {2, 3}) {
    const std::string row = " FROM webhook_delivery WHERE id = " + std::to_string(id);
    EXPECT_EQ(query_text(db_, "SELECT status" + row), "pending");
    EXPECT_EQ(query_int(db_, "SELECT attempts" + row), 0);
    EXPECT_EQ(query_double(db_, "SELECT next_attempt_at" + row), 5000);
    EXPECT_EQ(query_double(db_, "SELECT locked_until" + row), 0);
    // A fresh retry window: an old row replayed must not die of its age after one attempt.
    EXPECT_EQ(query_double(db_, "SELECT created_at" + row), 5000);
    // Kept as history until the next attempt overwrites it.
    EXPECT_EQ(query_text(db_, "SELECT last_error" + row), "attempt limit");
  }
  EXPECT_EQ(query_int(db_, "SELECT COUNT(*) FROM webhook_delivery WHERE status = 'dead'"), 3);
  EXPECT_EQ(query_int(db_, "SELECT COUNT(*) FROM webhook_delivery WHERE status = 'done'"), 1);
}

TEST_F(DeadLetters, ReplayWithoutFilterTakesEveryDeadRowAndNamesInactiveSubscribers) {
  db_.exec("UPDATE webhook_subscriber SET active = 0 WHERE id = " + std::to_string(sub_b_));
  const auto orphan = dead(77, 500);  // its subscriber is gone
  const auto report = replay_dead(db_, {}, 5000);
  EXPECT_EQ(report.replayed, 6);
  EXPECT_EQ(report.inactive_subscribers, (std::vector<std::int64_t>{sub_b_, 77}));
  EXPECT_EQ(
      query_text(db_, "SELECT status FROM webhook_delivery WHERE id = " + std::to_string(orphan)),
      "pending");
  EXPECT_EQ(query_int(db_, "SELECT COUNT(*) FROM webhook_delivery WHERE status = 'dead'"), 0);
  EXPECT_EQ(replay_dead(db_, {}, 5000).replayed, 0);
}

TEST_F(DeadLetters, ReplayWithALimitTakesTheNewest) {
  dead_selection newest;
  newest.limit = 2;
  EXPECT_EQ(replay_dead(db_, newest, 5000).replayed, 2);
  EXPECT_EQ(ids_of(list_dead(db_, {})), (std::vector<std::int64_t>{2, 4, 1}));
}

}  // namespace
}  // namespace surge::storage::sqlite
