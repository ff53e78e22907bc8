#include "storage/lease_values.hpp"
#include "storage/sqlite/claims.hpp"

#include <algorithm>
#include <map>
#include <random>
#include <cmath>
#include <iomanip>
#include <set>
#include <string>

#include <SQLiteCpp/Statement.h>
#include <gtest/gtest.h>

#include "tests/storage/test_db.hpp"

namespace surge::storage::sqlite {
namespace {

using testing::query_double;
using testing::query_int;
using testing::query_text;

std::vector<std::int64_t> ids_of(const std::vector<claimed_row>& rows) {
  std::vector<std::int64_t> ids;
  for (const auto& row : rows) ids.push_back(row.id);
  return ids;
}

class Claims : public ::testing::Test {
 protected:
  void SetUp() override {
    sub_a_ = testing::insert_subscriber_old(db_);
    sub_b_ = testing::insert_subscriber_old(db_);
  }

  testing::temp_dir dir_;
  SQLite::Database db_ = testing::open_migrated(dir_.file("queue.db"));
  std::int64_t sub_a_ = 0;
  std::int64_t sub_b_ = 0;
};

TEST_F(Claims, LeasesOldestDueRowsPerSubscriberInDueOrder) {
  // Inserted out of due order, with a tie at 30 broken by id.
  const auto late = testing::insert_deliveries_old(db_, sub_a_, 1, 50)[0];
  const auto tie_1 = testing::insert_deliveries_old(db_, sub_a_, 1, 30)[0];
  const auto early = testing::insert_deliveries_old(db_, sub_a_, 1, 10)[0];
  const auto tie_2 = testing::insert_deliveries_old(db_, sub_a_, 1, 30)[0];
  const auto b_rows = testing::insert_deliveries_old(db_, sub_b_, 2, 20);

  claimer claims(db_);
  const std::vector<subscriber_demand> demand = {{sub_a_, 3}, {sub_b_, 5}};
  const auto rows = claims.claim(demand, 100, 30);
  EXPECT_EQ(ids_of(rows), (std::vector<std::int64_t>{early, tie_1, tie_2, b_rows[0], b_rows[1]}));
  EXPECT_EQ(rows[0].subscriber_id, sub_a_);
  EXPECT_EQ(rows[0].event_type, "video.trending");
  EXPECT_EQ(rows[0].payload, "{\"n\":0}");
  EXPECT_EQ(rows[0].attempts, 0);
  EXPECT_EQ(rows[0].next_attempt_at, 10);
  EXPECT_EQ(rows[0].created_at, 10);
  for (const auto& row : rows) {
    EXPECT_EQ(row.lease, rows[0].lease);
    EXPECT_EQ(query_double(db_, "SELECT locked_until FROM webhook_delivery WHERE id = " +
                                    std::to_string(row.id)),
              row.lease);
  }
  EXPECT_EQ(query_double(db_, "SELECT locked_until FROM webhook_delivery WHERE id = " +
                                  std::to_string(late)),
            0);
}

TEST_F(Claims, ARowTheLeaseWriteMissesIsNotHandedOut) {
  // The claim reads due rows, then leases each; a row whose lease write changes nothing must
  // not be sent. A trigger that skips one row's update stands in for anything that could.
  const auto ids = testing::insert_deliveries_old(db_, sub_a_, 3, 10);
  db_.exec("CREATE TRIGGER skip_one BEFORE UPDATE ON webhook_delivery WHEN OLD.id = " +
           std::to_string(ids[1]) + " BEGIN SELECT RAISE(IGNORE); END");
  claimer claims(db_);
  const std::vector<subscriber_demand> demand = {{sub_a_, 3}};
  const auto rows = claims.claim(demand, 100, 30);
  EXPECT_EQ(ids_of(rows), (std::vector<std::int64_t>{ids[0], ids[2]}));
  EXPECT_EQ(rows[1].payload, "{\"n\":2}");
  EXPECT_EQ(query_double(db_, "SELECT locked_until FROM webhook_delivery WHERE id = " +
                                  std::to_string(ids[1])),
            0);
}

TEST_F(Claims, ARowMissedAmongSixteenLeasedTogetherIsNotHandedOut) {
  // 25 rows: the first sixteen are leased in one statement, the other nine one by one. A missed
  // row in each part must be left out, and every other row handed out with its own payload.
  const auto a = testing::insert_deliveries_old(db_, sub_a_, 20, 10);
  const auto b = testing::insert_deliveries_old(db_, sub_b_, 5, 10);
  db_.exec("CREATE TRIGGER skip_two BEFORE UPDATE ON webhook_delivery WHEN OLD.id IN (" +
           std::to_string(a[7]) + ", " + std::to_string(b[2]) +
           ") BEGIN SELECT RAISE(IGNORE); END");
  claimer claims(db_);
  const std::vector<subscriber_demand> demand = {{sub_a_, 20}, {sub_b_, 5}};
  const auto rows = claims.claim(demand, 100, 30);
  std::vector<std::int64_t> expected;
  for (const auto id : a) {
    if (id != a[7]) expected.push_back(id);
  }
  for (const auto id : b) {
    if (id != b[2]) expected.push_back(id);
  }
  ASSERT_EQ(ids_of(rows), expected);
  for (const auto& row : rows) {
    EXPECT_EQ(row.payload, query_text(db_, "SELECT payload FROM webhook_delivery WHERE id = " +
                                               std::to_string(row.id)));
    EXPECT_EQ(query_double(db_, "SELECT locked_until FROM webhook_delivery WHERE id = " +
                                    std::to_string(row.id)),
              row.lease);
  }
  EXPECT_EQ(query_int(db_, "SELECT count(*) FROM webhook_delivery WHERE locked_until = 0"), 2);
}

TEST_F(Claims, ASubscriberNamedTwiceGetsEachRowOnce) {
  // Every read comes before the leases are written: the second entry must not read the first
  // entry's rows again. Twenty rows, so some are leased sixteen to a statement.
  const auto ids = testing::insert_deliveries_old(db_, sub_a_, 30, 10);
  claimer claims(db_);
  const std::vector<subscriber_demand> demand = {{sub_a_, 10}, {sub_b_, 2}, {sub_a_, 10}};
  const auto rows = claims.claim(demand, 100, 30);
  EXPECT_EQ(ids_of(rows), std::vector<std::int64_t>(ids.begin(), ids.begin() + 20));
  EXPECT_EQ(query_int(db_, "SELECT count(*) FROM webhook_delivery WHERE locked_until > 0"), 20);
}

TEST_F(Claims, OneBacklogDoesNotStarveAnotherSubscriber) {
  testing::insert_deliveries_old(db_, sub_a_, 500, 1);
  testing::insert_deliveries_old(db_, sub_b_, 3, 2);
  claimer claims(db_);
  const std::vector<subscriber_demand> demand = {{sub_a_, 10}, {sub_b_, 10}};
  const auto rows = claims.claim(demand, 100, 30);
  int a = 0;
  int b = 0;
  for (const auto& row : rows) (row.subscriber_id == sub_a_ ? a : b)++;
  EXPECT_EQ(a, 10);
  EXPECT_EQ(b, 3);
}

TEST_F(Claims, SkipsRowsNotDueLeasedOrFinished) {
  const auto due = testing::insert_deliveries_old(db_, sub_a_, 5, 10);
  testing::insert_deliveries_old(db_, sub_a_, 2, 1000);  // due later
  db_.exec("UPDATE webhook_delivery SET status = 'done' WHERE id = " + std::to_string(due[0]));
  db_.exec("UPDATE webhook_delivery SET status = 'dead' WHERE id = " + std::to_string(due[1]));
  db_.exec("UPDATE webhook_delivery SET status = 'retry' WHERE id = " + std::to_string(due[2]));
  db_.exec("UPDATE webhook_delivery SET locked_until = 200 WHERE id = " + std::to_string(due[3]));

  claimer claims(db_);
  const std::vector<subscriber_demand> demand = {{sub_a_, 100}};
  EXPECT_EQ(ids_of(claims.claim(demand, 100, 30)), (std::vector<std::int64_t>{due[2], due[4]}));
  // Our own fresh leases are not claimable again, the other lease once it has expired.
  EXPECT_TRUE(claims.claim(demand, 110, 30).empty());
  EXPECT_EQ(ids_of(claims.claim(demand, 200, 30)),
            (std::vector<std::int64_t>{due[2], due[3], due[4]}));
}

TEST_F(Claims, NoDemandNoWork) {
  testing::insert_deliveries_old(db_, sub_a_, 3, 0);
  claimer claims(db_);
  EXPECT_TRUE(claims.claim({}, 100, 30).empty());
  const std::vector<subscriber_demand> zero = {{sub_a_, 0}, {sub_b_, -1}, {999, 5}};
  EXPECT_TRUE(claims.claim(zero, 100, 30).empty());
  EXPECT_EQ(query_int(db_, "SELECT COUNT(*) FROM webhook_delivery WHERE locked_until > 0"), 0);
}

TEST_F(Claims, ReusedStatementAcrossManyClaims) {
  testing::insert_deliveries_old(db_, sub_a_, 25, 0);
  claimer claims(db_);
  const std::vector<subscriber_demand> demand = {{sub_a_, 4}};
  std::set<std::int64_t> seen;
  for (int i = 0; i < 10; ++i) {
    for (const auto& row : claims.claim(demand, 100 + i, 1000)) {
      EXPECT_TRUE(seen.insert(row.id).second);
    }
  }
  EXPECT_EQ(seen.size(), 25u);
}

TEST_F(Claims, ReleaseIsFencedOnTheLease) {
  const auto ids = testing::insert_deliveries_old(db_, sub_a_, 3, 0);
  claimer claims(db_);
  const std::vector<subscriber_demand> demand = {{sub_a_, 3}};
  const auto rows = claims.claim(demand, 100, 30);
  ASSERT_EQ(rows.size(), 3u);
  const std::vector<lease_ref> leases = {{rows[0].id, rows[0].lease},
                                         {rows[1].id, rows[1].lease + 1},  // not ours
                                         {rows[2].id, rows[2].lease}};
  EXPECT_EQ(claims.release(leases), 2);
  EXPECT_EQ(claims.release({}), 0);
  EXPECT_EQ(ids_of(claims.claim(demand, 101, 30)), (std::vector<std::int64_t>{ids[0], ids[2]}));
  EXPECT_EQ(
      query_text(db_, "SELECT status FROM webhook_delivery WHERE id = " + std::to_string(ids[0])),
      "pending");
}

TEST_F(Claims, LeasesCarryANonceAndStrictlyIncrease) {
  claimer claims(db_);
  const double now = 1'700'000'000.123456;
  double previous = 0;
  for (int i = 0; i < 100; ++i) {
    const double lease = claims.make_lease(now, 30);
    EXPECT_GT(lease, previous);
    // Never a whole millisecond, so never a whole-second or whole-millisecond `now + 30`.
    const double micros = std::fmod(std::round(lease * 1e6), 1000.0);
    EXPECT_NE(micros, 0.0) << lease;
    previous = lease;
  }
  const double first = claimer(db_).make_lease(now, 30);
  EXPECT_GT(first, now + 30 - 0.001);
  EXPECT_LT(first, now + 30 + 0.001);
  // After a clock step back the lease still goes up.
  EXPECT_GT(claims.make_lease(now - 100, 30), previous);
}

// Many claims within one millisecond bump the lease a whole millisecond each time; the nonce
// digits must come through any number of bumps, even the smallest nonce (a drift of the
// microsecond digits to 000 made a whole-millisecond lease).
TEST(LeaseValues, EveryNonceSurvivesAThousandBumps) {
  for (const int nonce : {1, 2, 500, 998, 999}) {
    lease_values leases(nonce);
    double previous = 0;
    for (int i = 0; i < 1000; ++i) {
      const double lease = leases.next(1'700'000'000.123456, 30);
      ASSERT_GT(lease, previous);
      ASSERT_EQ(static_cast<int>(std::fmod(std::round(lease * 1e6), 1000.0)), nonce)
          << std::setprecision(17) << lease << " after " << i << " bumps";
      previous = lease;
    }
  }
}

TEST_F(Claims, ClaimUsesTheSubscriberDueIndex) {
  SQLite::Statement plan(db_, "EXPLAIN QUERY PLAN " + std::string(claim_statement_text()));
  std::string details;
  while (plan.executeStep()) details += plan.getColumn(3).getString() + "\n";
  EXPECT_NE(details.find("USING INDEX idx_delivery_subscriber_due"), std::string::npos) << details;
  EXPECT_EQ(details.find("TEMP B-TREE"), std::string::npos) << details;
}

TEST_F(Claims, SixteenLeasesAreWrittenByIdNotThroughADueIndex) {
  // Offered the partial due index for `status IN (...)`, the planner scans it instead of
  // seeking the sixteen ids: milliseconds a claim on a large queue.
  SQLite::Statement plan(db_, "EXPLAIN QUERY PLAN " + lease_statement_text());
  std::string details;
  while (plan.executeStep()) details += plan.getColumn(3).getString() + "\n";
  EXPECT_NE(details.find("USING INTEGER PRIMARY KEY"), std::string::npos) << details;
  EXPECT_EQ(details.find("idx_delivery"), std::string::npos) << details;
}

TEST_F(Claims, AnOversizedPayloadIsMeasuredNotRead) {
  const auto small = testing::insert_deliveries_old(db_, sub_a_, 1, 10)[0];
  const auto big = testing::insert_deliveries_old(db_, sub_a_, 1, 20)[0];
  // Bytes, not characters: 4 two-byte characters are 8 bytes, over the cap of 7.
  const auto wide = testing::insert_deliveries_old(db_, sub_a_, 1, 30)[0];
  db_.exec("UPDATE webhook_delivery SET payload = hex(zeroblob(50000)) WHERE id = " +
           std::to_string(big));
  db_.exec("UPDATE webhook_delivery SET payload = '\u00e9\u00e9\u00e9\u00e9' WHERE id = " +
           std::to_string(wide));
  claimer claims(db_);
  const std::vector<subscriber_demand> demand = {{sub_a_, 10}};
  const auto rows = claims.claim(demand, 100, 30, 7);
  ASSERT_EQ(ids_of(rows), (std::vector<std::int64_t>{small, big, wide}));
  EXPECT_EQ(rows[0].payload, "{\"n\":0}");
  EXPECT_EQ(rows[0].payload_bytes, 7);
  EXPECT_EQ(rows[1].payload, "");
  EXPECT_EQ(rows[1].payload_bytes, 100000);
  EXPECT_EQ(rows[2].payload, "");
  EXPECT_EQ(rows[2].payload_bytes, 8);
  // Without a cap every payload is read.
  db_.exec("UPDATE webhook_delivery SET locked_until = 0");
  const auto uncapped = claims.claim(demand, 200, 30);
  ASSERT_EQ(uncapped.size(), 3u);
  EXPECT_EQ(uncapped[1].payload.size(), 100000u);
}

// --- the sweep: rows in table order for subscribers with nothing due behind the cursor ------

// A producer's fan-out: `events` events, one row per subscriber each, in one table order.
class SweepClaims : public ::testing::Test {
 protected:
  void SetUp() override {
    for (int i = 0; i < subscribers; ++i) ids_.push_back(testing::insert_subscriber_old(db_));
    SQLite::Statement insert(db_,
                             "INSERT INTO webhook_delivery(subscriber_id, event_type, "
                             "payload, next_attempt_at, created_at) VALUES (?, 't', '{}', ?, ?)");
    for (int event = 0; event < events; ++event) {
      for (const auto id : ids_) {
        insert.reset();
        insert.bind(1, id);
        insert.bind(2, 100.0 + event);
        insert.bind(3, 100.0 + event);
        insert.exec();
      }
    }
  }
  std::vector<subscriber_demand> each(int rows, int from = 0, int count = subscribers) {
    std::vector<subscriber_demand> demand;
    for (int i = from; i < from + count; ++i)
      demand.push_back({.subscriber_id = ids_[i], .rows = rows});
    return demand;
  }
  // Largest minus smallest id: how far apart in the table the claimed rows lie.
  static std::int64_t spread(const std::vector<claimed_row>& rows) {
    auto [low, high] =
        std::minmax_element(rows.begin(), rows.end(), [](auto& a, auto& b) { return a.id < b.id; });
    return high->id - low->id;
  }

  static constexpr int subscribers = 20;
  static constexpr int events = 200;
  testing::temp_dir dir_;
  SQLite::Database db_ = testing::open_migrated(dir_.file("queue.db"));
  std::vector<std::int64_t> ids_;
  claimer claims_{db_};
};

TEST_F(SweepClaims, AfterOneSeekEachSubscribersRowsComeInTableOrderFromOneWindow) {
  // The first claim seeks for everyone; each then has nothing behind the cursor and is swept.
  auto first = claims_.claim(each(3), 1000, 300);
  ASSERT_EQ(first.size(), 60u);
  // Uneven asks: a sweep never gives a subscriber more than it asked, and the rows it takes lie
  // in one window of the table rather than wherever each subscriber's backlog happens to be.
  auto demand = each(40);
  demand[0].rows = 5;
  const auto swept = claims_.claim(demand, 1000.2, 300);
  std::map<std::int64_t, std::vector<std::int64_t>> per;
  for (const auto& row : swept) per[row.subscriber_id].push_back(row.id);
  for (const auto id : ids_) {
    ASSERT_FALSE(per[id].empty()) << id;
    EXPECT_LE(per[id].size(), id == ids_[0] ? 5u : 40u);
    EXPECT_TRUE(std::is_sorted(per[id].begin(), per[id].end())) << "oldest first";
    // Nothing skipped: each subscriber's rows follow on from the first claim's.
    EXPECT_EQ(query_int(db_, "SELECT COUNT(*) FROM webhook_delivery WHERE subscriber_id = " +
                                 std::to_string(id) + " AND locked_until = 0 AND id < " +
                                 std::to_string(per[id].front())),
              0);
  }
  EXPECT_LE(spread(swept), sweep_cursor::least_window_ids) << "one window of the table";
  // Those cut short by the window, not by a lack of rows, are named, so they ask again at once.
  EXPECT_EQ(claims_.waiting_for_window().size(), static_cast<std::size_t>(subscribers - 1));
}

TEST_F(SweepClaims, ASubscriberThatAsksForNothingHoldsTheWindowOnlyForAMoment) {
  claims_.claim(each(2), 1000, 300);
  // Subscriber 0 asks for nothing now; the others sweep past its rows only after it has held
  // the window back for pin_seconds, and from then on it seeks its own rows, oldest first.
  auto held = claims_.claim(each(30, 1, subscribers - 1), 1000.01, 300);
  const auto window = sweep_cursor::least_window_ids;
  std::int64_t first_of_zero = query_int(
      db_, "SELECT MIN(id) FROM webhook_delivery WHERE locked_until = 0 AND subscriber_id = " +
               std::to_string(ids_[0]));
  for (const auto& row : held) EXPECT_LT(row.id, first_of_zero + window);
  const auto later = claims_.claim(each(30, 1, subscribers - 1), 1000.01 + 0.5, 300);
  ASSERT_FALSE(later.empty());
  const auto again = claims_.claim(each(30, 1, subscribers - 1), 1000.01 + 0.6, 300);
  std::int64_t furthest = 0;
  for (const auto& row : again) furthest = std::max(furthest, row.id);
  EXPECT_GT(furthest, first_of_zero + window) << "no longer held back";
  const std::vector<subscriber_demand> zero = {{.subscriber_id = ids_[0], .rows = 4}};
  const auto own = claims_.claim(zero, 1000.7, 300);
  ASSERT_EQ(own.size(), 4u);
  EXPECT_EQ(own.front().id, first_of_zero) << "its oldest row first, by its own seek";
}

TEST_F(SweepClaims, ARowFallingDueBehindTheCursorIsSeekedWithinASecond) {
  auto first = claims_.claim(each(5), 1000, 300);
  const auto expired = first.front();
  // Its lease runs out (as a crashed drainer's does) once the cursor has moved on.
  db_.exec("UPDATE webhook_delivery SET locked_until = 1000.5 WHERE id = " +
           std::to_string(expired.id));
  claims_.claim(each(5), 1000.3, 300);
  const auto while_swept = claims_.claim(each(5), 1000.6, 300);
  for (const auto& row : while_swept) EXPECT_NE(row.id, expired.id) << "behind the cursor";
  // Every subscriber seeks once a second: the row, its oldest due, comes first.
  const std::vector<subscriber_demand> one = {{.subscriber_id = expired.subscriber_id, .rows = 1}};
  const auto found = claims_.claim(one, 1001.2, 300);
  ASSERT_EQ(found.size(), 1u);
  EXPECT_EQ(found.front().id, expired.id);
}

TEST_F(SweepClaims, EveryRowIsClaimedOnceWhateverTheAsks) {
  std::set<std::int64_t> seen;
  std::mt19937 random(7);
  double now = 1000;
  for (int round = 0; round < 400 && seen.size() < subscribers * events; ++round) {
    std::vector<subscriber_demand> demand;
    for (const auto id : ids_) {
      const int rows = static_cast<int>(random() % 12);
      if (rows > 0) demand.push_back({.subscriber_id = id, .rows = rows});
    }
    now += 0.03;
    for (const auto& row : claims_.claim(demand, now, 300)) {
      EXPECT_TRUE(seen.insert(row.id).second) << "row " << row.id << " claimed twice";
    }
  }
  EXPECT_EQ(seen.size(), static_cast<std::size_t>(subscribers * events));
}

}  // namespace
}  // namespace surge::storage::sqlite
