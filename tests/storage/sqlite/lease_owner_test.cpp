// Who holds a lease: the claimer records its leases in surge_lease, and stats names the holder
// of every leased row (a Surge process by owner, or "other" for the steady-state drainer).
#include <map>
#include <string>
#include <vector>

#include <unistd.h>

#include <SQLiteCpp/Statement.h>
#include <gtest/gtest.h>

#include "storage/sqlite/claims.hpp"
#include "storage/sqlite/queue.hpp"
#include "tests/storage/test_db.hpp"
#include "tests/storage/sqlite/other_drainer_sql.hpp"

namespace surge::storage::sqlite {
namespace {

using testing::query_double;
using testing::query_int;
using testing::query_text;

class LeaseOwner : public ::testing::Test {
 protected:
  void SetUp() override {
    sub_a_ = testing::insert_subscriber_old(db_);
    sub_b_ = testing::insert_subscriber_old(db_);
    sub_c_ = testing::insert_subscriber_old(db_);
  }

  testing::temp_dir dir_;
  SQLite::Database db_ = testing::open_migrated(dir_.file("queue.db"));
  std::int64_t sub_a_ = 0, sub_b_ = 0, sub_c_ = 0;
};

TEST_F(LeaseOwner, DefaultOwnerNamesHostAndPid) {
  const std::string owner = default_lease_owner();
  EXPECT_EQ(owner.rfind("surge@", 0), 0u) << owner;
  EXPECT_NE(owner.find(":" + std::to_string(::getpid())), std::string::npos) << owner;
  EXPECT_EQ(claimer(db_).owner(), owner);
}

TEST_F(LeaseOwner, OneRowPerClaimBatchNotPerRow) {
  testing::insert_deliveries_old(db_, sub_a_, 5, 10);
  testing::insert_deliveries_old(db_, sub_b_, 5, 10);
  claimer claims(db_, "surge@test:1");
  const std::vector<subscriber_demand> demand = {{sub_a_, 3}, {sub_b_, 2}};
  const auto rows = claims.claim(demand, 100, 30);
  ASSERT_EQ(rows.size(), 5u);
  EXPECT_EQ(query_int(db_, "SELECT COUNT(*) FROM surge_lease"), 1);
  EXPECT_EQ(query_double(db_, "SELECT lease FROM surge_lease"), rows[0].lease);
  EXPECT_EQ(query_text(db_, "SELECT owner FROM surge_lease"), "surge@test:1");
  EXPECT_EQ(query_double(db_, "SELECT claimed_at FROM surge_lease"), 100);

  claims.claim(demand, 101, 30);
  EXPECT_EQ(query_int(db_, "SELECT COUNT(*) FROM surge_lease"), 2);
  // A claim that finds nothing due leases nothing and records nothing.
  const std::vector<subscriber_demand> idle = {{sub_c_, 10}};
  EXPECT_TRUE(claims.claim(idle, 102, 30).empty());
  EXPECT_EQ(query_int(db_, "SELECT COUNT(*) FROM surge_lease"), 2);
}

TEST_F(LeaseOwner, RecordsAnHourPastTheirLeaseArePruned) {
  const double now = 1'000'000;
  // Another process's leftovers: one long expired, one recent.
  db_.exec("INSERT INTO surge_lease VALUES (996000.5, 'surge@gone:7', 995970)");
  db_.exec("INSERT INTO surge_lease VALUES (999000.5, 'surge@gone:7', 998970)");
  testing::insert_deliveries_old(db_, sub_a_, 200, 10);
  claimer claims(db_, "surge@test:1");
  const std::vector<subscriber_demand> demand = {{sub_a_, 1}};
  ASSERT_EQ(claims.claim(demand, now, 30).size(), 1u);  // the first claim prunes
  EXPECT_EQ(query_int(db_, "SELECT COUNT(*) FROM surge_lease WHERE owner = 'surge@gone:7'"), 1);

  // Then every 100th claim: the records of claims 1..100, made at `now`, are an hour old by
  // claim 101 and go then, not before.
  for (int i = 1; i < 100; ++i) ASSERT_EQ(claims.claim(demand, now, 30).size(), 1u);
  EXPECT_EQ(query_int(db_, "SELECT COUNT(*) FROM surge_lease WHERE owner = 'surge@test:1'"), 100);
  const double later = now + 30 + 3600 + 1;
  ASSERT_EQ(claims.claim(demand, later, 30).size(), 1u);  // claim 101: prunes
  EXPECT_EQ(query_int(db_, "SELECT COUNT(*) FROM surge_lease"), 1);
  EXPECT_GT(query_double(db_, "SELECT lease FROM surge_lease"), later);
}

TEST_F(LeaseOwner, StatsNameEveryHolderOfLeasedRows) {
  const double now = 1000;
  testing::insert_deliveries_old(db_, sub_a_, 4, 10);
  testing::insert_deliveries_old(db_, sub_b_, 3, 10);
  testing::insert_deliveries_old(db_, sub_c_, 6, 10);

  claimer first(db_, "surge@host-a:11");
  claimer second(db_, "surge@host-b:22");
  const std::vector<subscriber_demand> demand_a = {{sub_a_, 4}, {sub_c_, 1}};
  const std::vector<subscriber_demand> demand_b = {{sub_b_, 2}};
  ASSERT_EQ(first.claim(demand_a, now, 30).size(), 5u);
  ASSERT_EQ(second.claim(demand_b, now, 30).size(), 2u);

  // The steady-state drainer leases 2 of subscriber c's rows with its own statement.
  {
    SQLite::Statement other(db_, other_drainer_sql::claim(std::to_string(sub_c_)));
    other.bind(1, now + 30);
    other.bind(2, now);
    other.bind(3, now);
    other.bind(4, 2);
    ASSERT_EQ(other.exec(), 2);
  }
  // An expired lease of a Surge claimer is nobody's any more.
  db_.exec(
      "UPDATE webhook_delivery SET locked_until = 900 WHERE id = (SELECT id FROM "
      "webhook_delivery WHERE subscriber_id = " +
      std::to_string(sub_b_) + " AND locked_until = 0 LIMIT 1)");

  const auto stats = read_stats(db_, now);
  EXPECT_EQ(stats.total.leased, 9);
  EXPECT_EQ(stats.total.leased_by,
            (std::map<std::string, std::int64_t>{
                {"surge@host-a:11", 5}, {"surge@host-b:22", 2}, {lease_owner_other, 2}}));
  ASSERT_EQ(stats.per_subscriber.size(), 3u);
  EXPECT_EQ(stats.per_subscriber[0].leased_by,
            (std::map<std::string, std::int64_t>{{"surge@host-a:11", 4}}));
  EXPECT_EQ(stats.per_subscriber[1].leased_by,
            (std::map<std::string, std::int64_t>{{"surge@host-b:22", 2}}));
  EXPECT_EQ(stats.per_subscriber[2].leased_by,
            (std::map<std::string, std::int64_t>{{"surge@host-a:11", 1}, {lease_owner_other, 2}}));

  // Once the leases run out nobody holds anything.
  EXPECT_TRUE(read_stats(db_, now + 31).total.leased_by.empty());
}

TEST_F(LeaseOwner, StatsOnAFileWithoutLeaseRecordsCallEveryLeaseOther) {
  testing::insert_deliveries_old(db_, sub_a_, 3, 10);
  db_.exec("UPDATE webhook_delivery SET locked_until = 2000 WHERE id <= 2");
  db_.exec("DROP TABLE surge_lease");  // as before migration 2
  const auto stats = read_stats(db_, 1000);
  EXPECT_EQ(stats.total.leased_by, (std::map<std::string, std::int64_t>{{lease_owner_other, 2}}));
}

}  // namespace
}  // namespace surge::storage::sqlite
