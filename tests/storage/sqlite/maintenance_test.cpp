// Housekeeping sweeps: rows no claim can ever match are dead-lettered with a reason, and other
// Surge processes' live leases are found for the start-up warning.
#include "storage/sqlite/maintenance.hpp"

#include <string>

#include <gtest/gtest.h>

#include "storage/sqlite/claims.hpp"
#include "tests/storage/test_db.hpp"

namespace surge::storage::sqlite {
namespace {

using testing::query_double;
using testing::query_text;

class Maintenance : public ::testing::Test {
 protected:
  void SetUp() override {
    sub_a_ = testing::insert_subscriber_old(db_);
    sub_b_ = testing::insert_subscriber_old(db_);
  }
  void set(std::int64_t id, const std::string& assignment) {
    db_.exec("UPDATE webhook_delivery SET " + assignment + " WHERE id = " + std::to_string(id));
  }
  std::string column(std::int64_t id, const std::string& name) {
    return query_text(db_,
                      "SELECT " + name + " FROM webhook_delivery WHERE id = " + std::to_string(id));
  }

  testing::temp_dir dir_;
  SQLite::Database db_ = testing::open_migrated(dir_.file("queue.db"));
  std::int64_t sub_a_ = 0, sub_b_ = 0;
};

TEST_F(Maintenance, RowsNoClaimCanMatchAreDeadLetteredWithTheirReason) {
  const double now = 1'000'000;
  const double horizon = now + 60 + 3600;
  const auto rows = testing::insert_deliveries_old(db_, sub_a_, 8, 10);
  set(rows[0], "next_attempt_at = 'soon'");
  set(rows[1], "next_attempt_at = ''");
  set(rows[2], "locked_until = 'forever'");
  set(rows[3], "locked_until = 9e12");
  set(rows[4], "locked_until = 1000030");                            // a live, plausible lease
  set(rows[5], "next_attempt_at = 'soon', locked_until = 1000030");  // leased: left alone now
  set(rows[6], "next_attempt_at = '12.5'");  // REAL affinity stores it as the number 12.5
  set(rows[7], "next_attempt_at = 'soon', status = 'done'");  // finished: nothing to fix
  // Far ahead, but a Surge claimer recorded it: a drain with a long --lease holds this row.
  const auto recorded = testing::insert_deliveries_old(db_, sub_a_, 1, 10)[0];
  db_.exec("INSERT INTO surge_lease VALUES (1100000.5, 'surge@long:9', 1000000)");
  set(recorded, "locked_until = 1100000.5");
  const auto other = testing::insert_deliveries_old(db_, sub_b_, 1, 10)[0];
  set(other, "next_attempt_at = 'soon'");

  const auto found =
      dead_letter_malformed(db_, now, horizon, *proto::id_set::parse(std::to_string(sub_a_)));
  EXPECT_EQ(found.next_attempt_at, 2);
  EXPECT_EQ(found.locked_until, 1);
  EXPECT_EQ(found.far_lease, 1);
  EXPECT_EQ(found.total(), 4);
  EXPECT_EQ(column(rows[0], "last_error"), "malformed next_attempt_at: 'soon'");
  EXPECT_EQ(column(rows[1], "last_error"), "malformed next_attempt_at: ''");
  EXPECT_EQ(column(rows[2], "last_error"), "malformed locked_until: 'forever'");
  EXPECT_EQ(column(rows[3], "last_error"),
            "implausible locked_until: 9000000000000.0 is 8999999000000 s ahead, beyond any "
            "lease");
  for (const auto id : {rows[0], rows[1], rows[2], rows[3]}) {
    EXPECT_EQ(column(id, "status"), "dead") << id;
    EXPECT_EQ(query_double(db_, "SELECT locked_until FROM webhook_delivery WHERE id = " +
                                    std::to_string(id)),
              0);
  }
  for (const auto id : {rows[4], rows[5], rows[6], recorded}) {
    EXPECT_EQ(column(id, "status"), "pending") << id;
  }
  EXPECT_EQ(column(rows[7], "status"), "done");
  EXPECT_EQ(column(other, "status"), "pending") << "not a chosen subscriber";

  // Once the lease has expired the malformed row is swept too; a second pass finds nothing new.
  const auto later = dead_letter_malformed(db_, now + 31, horizon + 31, {});
  EXPECT_EQ(later.next_attempt_at, 2);  // rows[5] and the other subscriber's row
  EXPECT_EQ(later.total(), 2);
  EXPECT_EQ(dead_letter_malformed(db_, now + 31, horizon + 31, {}).total(), 0);
}

TEST_F(Maintenance, OtherLiveOwnersAreNamedWithTheirSubscribers) {
  const double now = 1'000'000;
  const auto a_rows = testing::insert_deliveries_old(db_, sub_a_, 3, 10);
  const auto b_rows = testing::insert_deliveries_old(db_, sub_b_, 2, 10);
  claimer mine(db_, "surge@here:1");
  claimer theirs(db_, "surge@there:2");
  const std::vector<subscriber_demand> a_one = {{sub_a_, 1}};
  const std::vector<subscriber_demand> both = {{sub_a_, 1}, {sub_b_, 1}};
  ASSERT_EQ(mine.claim(a_one, now, 30).size(), 1u);
  ASSERT_EQ(theirs.claim(both, now, 30).size(), 2u);
  // A lease nobody recorded is the steady-state drainer's, which the buckets already share with.
  db_.exec("UPDATE webhook_delivery SET locked_until = 1000030 WHERE id = " +
           std::to_string(b_rows[1]));

  auto holders = other_live_owners(db_, now, {}, "surge@here:1");
  ASSERT_EQ(holders.size(), 1u);
  EXPECT_EQ(holders[0].owner, "surge@there:2");
  EXPECT_EQ(holders[0].subscribers, (std::vector<std::int64_t>{sub_a_, sub_b_}));
  EXPECT_EQ(holders[0].rows, 2);

  // Only the chosen subscribers count, and expired leases do not.
  holders =
      other_live_owners(db_, now, *proto::id_set::parse(std::to_string(sub_b_)), "surge@here:1");
  ASSERT_EQ(holders.size(), 1u);
  EXPECT_EQ(holders[0].subscribers, (std::vector<std::int64_t>{sub_b_}));
  EXPECT_TRUE(other_live_owners(db_, now + 31, {}, "surge@here:1").empty());
  EXPECT_EQ(other_live_owners(db_, now, {}, "nobody").size(), 2u);
}

}  // namespace
}  // namespace surge::storage::sqlite
