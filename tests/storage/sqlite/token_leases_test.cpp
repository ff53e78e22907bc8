// Tokens leased from the persisted bucket (storage/token_leases.hpp), alone, shared by two
// Surge connections, and beside the steady-state drainer's own bucket statements.
#include "storage/sqlite/token_leases.hpp"

#include <gtest/gtest.h>

#include <SQLiteCpp/Transaction.h>

#include "tests/storage/test_db.hpp"
#include "tests/storage/sqlite/other_drainer_sql.hpp"

namespace surge::storage::sqlite {
namespace {

class TokenLeases : public ::testing::Test {
 protected:
  void SetUp() override {
    sub_ = testing::insert_subscriber_old(db_, "*", 2.0, 5);
    set_bucket(3.5, 1000);
  }
  void set_bucket(double tokens, double at) {
    db_.exec("UPDATE webhook_subscriber SET tokens = " + std::to_string(tokens) +
             ", tokens_updated_at = " + std::to_string(at) + " WHERE id = " + std::to_string(sub_));
  }
  double stored(const char* column) {
    return testing::query_double(db_,
                                 std::string("SELECT ") + column +
                                     " FROM webhook_subscriber WHERE id = " + std::to_string(sub_));
  }
  std::vector<token_grant> lease(token_leaser& leaser, double tokens, double now,
                                 double reserve_seconds = 0) {
    SQLite::Transaction transaction(db_, SQLite::TransactionBehavior::IMMEDIATE);
    const std::vector<subscriber_demand> demand{
        {.subscriber_id = sub_, .tokens = tokens, .reserve_seconds = reserve_seconds}};
    auto grants = leaser.lease(demand, now);
    transaction.commit();
    return grants;
  }
  testing::temp_dir dir_;
  std::string path_ = dir_.file("queue.db");
  SQLite::Database db_ = testing::open_migrated(path_);
  std::int64_t sub_ = 0;
};

TEST_F(TokenLeases, TakesWholeTokensRefilledToNowAndWritesWhatIsLeft) {
  token_leaser leaser(db_, 0);
  const auto grants = lease(leaser, 10, 1000.5);  // 3.5 + 2/s x 0.5 s = 4.5
  ASSERT_EQ(grants.size(), 1u);
  EXPECT_EQ(grants[0].subscriber_id, sub_);
  EXPECT_EQ(grants[0].tokens, 4);
  EXPECT_DOUBLE_EQ(stored("tokens"), 0.5);
  EXPECT_DOUBLE_EQ(stored("tokens_updated_at"), 1000.5);
}

// A bucket stamped an hour ahead (another host's clock) or deep in debt would give nothing for
// an hour; it is repaired, said, and written back so that the next read needs no repair.
TEST_F(TokenLeases, ABucketStampedInTheFutureOrDeepInDebtIsRepairedAndWrittenBack) {
  token_leaser leaser(db_, 0);
  set_bucket(0, 1000 + 3600);
  auto grants = lease(leaser, 10, 1000);
  ASSERT_EQ(grants.size(), 1u);
  EXPECT_EQ(grants[0].repaired, "stamped 3600 s in the future");
  EXPECT_DOUBLE_EQ(stored("tokens_updated_at"), 1000);
  grants = lease(leaser, 10, 1001);  // a second's refill at 2/s
  EXPECT_EQ(grants[0].tokens, 2);
  EXPECT_EQ(grants[0].repaired, "");

  set_bucket(-1e9, 1000);
  grants = lease(leaser, 10, 1002);
  EXPECT_NE(grants[0].repaired.find("a debt of 1000000000 tokens"), std::string::npos);
  EXPECT_DOUBLE_EQ(stored("tokens"), 0);
  EXPECT_EQ(lease(leaser, 10, 1003)[0].tokens, 2);

  db_.exec("UPDATE webhook_subscriber SET tokens = 'lots' WHERE id = " + std::to_string(sub_));
  grants = lease(leaser, 10, 1004);
  EXPECT_EQ(grants[0].repaired, "its token count is not a number");
  EXPECT_EQ(grants[0].tokens, 5);  // read as a full bucket
}

TEST_F(TokenLeases, AnAskMayReserveMoreOfTheComingRefillThanTheStoresOwnReserve) {
  // The asker's answers are slow: it reserves a second of refill, as a debt.
  token_leaser leaser(db_, 0.25);
  const auto grants = lease(leaser, 10, 1000.5, 1.0);  // 4.5 now + 2/s x 1 s
  ASSERT_EQ(grants.size(), 1u);
  EXPECT_EQ(grants[0].tokens, 6);
  EXPECT_DOUBLE_EQ(stored("tokens"), -1.5);
  // A smaller reserve asked for leaves the store's own (a new leaser: to this one, the bucket
  // set below would be another drainer's write).
  set_bucket(3.5, 1000);
  token_leaser fresh(db_, 0.25);
  const auto own = lease(fresh, 10, 1000.5, 0.01);  // 4.5 + 2/s x 0.25 s
  ASSERT_EQ(own.size(), 1u);
  EXPECT_EQ(own[0].tokens, 5);
}

// Another drainer (the steady-state one, seed001's worker) wrote the bucket since this leaser
// did: no refill is taken ahead, and the grant says the bucket is shared, for ten seconds after
// the last such write seen.
TEST_F(TokenLeases, ABucketAnotherDrainerWroteSinceIsLeasedWithoutAReserveAndSaidShared) {
  set_bucket(3.5, 1000);
  token_leaser leaser(db_, 0.25);
  auto grants = lease(leaser, 10, 1000.5, 1.0);  // its first read: nothing known of others
  ASSERT_EQ(grants.size(), 1u);
  EXPECT_FALSE(grants[0].shared);
  EXPECT_EQ(grants[0].tokens, 6);         // 4.5 + a second's refill ahead, as a debt
  grants = lease(leaser, 10, 1003, 1.0);  // its own write since: -1.5 + 2/s x 2.5 s, + 2 ahead
  EXPECT_FALSE(grants[0].shared);
  EXPECT_EQ(grants[0].tokens, 5);

  set_bucket(4, 1003.2);  // the other drainer's write
  grants = lease(leaser, 10, 1003.5, 1.0);
  EXPECT_TRUE(grants[0].shared);
  EXPECT_EQ(grants[0].tokens, 4);  // 4 + 0.6 there, nothing ahead (else 6)
  EXPECT_NEAR(stored("tokens"), 0.6, 1e-9);
  EXPECT_TRUE(lease(leaser, 10, 1013, 1.0)[0].shared);  // within ten seconds of that write
  EXPECT_FALSE(lease(leaser, 10, 1013.6, 1.0)[0].shared);
}

TEST_F(TokenLeases, AnEmptyBucketIsReadNotWrittenAndSaysWhenItsNextTokenIsDue) {
  set_bucket(0.5, 1000);
  token_leaser leaser(db_, 0);
  const auto grants = lease(leaser, 3, 1000);
  ASSERT_EQ(grants.size(), 1u);
  EXPECT_EQ(grants[0].tokens, 0);
  EXPECT_DOUBLE_EQ(grants[0].next_token_at, 1000.25);
  EXPECT_DOUBLE_EQ(stored("tokens"), 0.5);
  EXPECT_DOUBLE_EQ(stored("tokens_updated_at"), 1000);
}

TEST_F(TokenLeases, EntriesWithoutTokensAndUnknownSubscribersGetNothing) {
  token_leaser leaser(db_, 0);
  SQLite::Transaction transaction(db_, SQLite::TransactionBehavior::IMMEDIATE);
  const std::vector<subscriber_demand> demand{{.subscriber_id = sub_, .rows = 5},
                                              {.subscriber_id = sub_ + 100, .tokens = 2}};
  const auto grants = leaser.lease(demand, 1001);
  transaction.commit();
  ASSERT_EQ(grants.size(), 1u);
  EXPECT_EQ(grants[0].subscriber_id, sub_ + 100);
  EXPECT_EQ(grants[0].tokens, 0);
  EXPECT_EQ(grants[0].next_token_at, 0);
  EXPECT_DOUBLE_EQ(stored("tokens"), 3.5);  // untouched
}

TEST_F(TokenLeases, UnspentTokensGoBackNeverAboveTheBurst) {
  give_back_tokens(db_, std::vector<unspent_tokens>{{sub_, 1}}, 1000.25);
  EXPECT_DOUBLE_EQ(stored("tokens"), 5);  // 3.5 + 0.5 refill + 1, at the burst of 5
  set_bucket(0, 1000);
  give_back_tokens(db_, std::vector<unspent_tokens>{{sub_, 2}, {sub_ + 100, 3}}, 1000);
  EXPECT_DOUBLE_EQ(stored("tokens"), 2);
  give_back_tokens(db_, std::vector<unspent_tokens>{{sub_, 0}}, 2000);  // nothing to give
  EXPECT_DOUBLE_EQ(stored("tokens_updated_at"), 1000);
}

TEST_F(TokenLeases, ANegativeAskGivesTokensBackInTheCycle) {
  token_leaser leaser(db_, 0);
  SQLite::Transaction transaction(db_, SQLite::TransactionBehavior::IMMEDIATE);
  const std::vector<subscriber_demand> demand{{.subscriber_id = sub_, .tokens = -1}};
  EXPECT_TRUE(leaser.lease(demand, 1000.25).empty());
  transaction.commit();
  EXPECT_DOUBLE_EQ(stored("tokens"), 5);  // 3.5 + 0.5 + 1, at the burst
  EXPECT_DOUBLE_EQ(stored("tokens_updated_at"), 1000.25);
}

// Two Surge connections (each reserving 50 ms of refill ahead) and the steady-state drainer's
// own statements take from one bucket on a simulated clock: all of them together never get more
// than burst + rate x T, plus the 50 ms of refill that may be reserved.
TEST_F(TokenLeases, EveryDrainerTogetherStaysWithinBurstPlusRateTimesT) {
  set_bucket(5, 1000);  // full
  SQLite::Database other_surge = testing::open_migrated(path_);
  SQLite::Database steady_state(path_, SQLite::OPEN_READWRITE, 5000);
  token_leaser first(db_, 0.05);
  token_leaser second(other_surge, 0.05);
  SQLite::Statement read(steady_state, std::string(other_drainer_sql::read_bucket));
  SQLite::Statement write(steady_state, std::string(other_drainer_sql::write_bucket));
  double taken = 0;
  const double start = 1000;
  const double step = 0.01;
  for (int i = 0; i <= 1000; ++i) {
    const double now = start + i * step;
    const std::vector<subscriber_demand> ask{{.subscriber_id = sub_, .tokens = 3}};
    if (i % 3 == 0) {
      SQLite::Transaction transaction(db_, SQLite::TransactionBehavior::IMMEDIATE);
      taken += first.lease(ask, now).front().tokens;
      transaction.commit();
    } else if (i % 3 == 1) {
      SQLite::Transaction transaction(other_surge, SQLite::TransactionBehavior::IMMEDIATE);
      taken += second.lease(ask, now).front().tokens;
      transaction.commit();
    } else {
      // The steady-state drainer: SELECT, and UPDATE when a whole token is there.
      SQLite::Transaction transaction(steady_state);
      read.reset();
      read.bind(1, sub_);
      ASSERT_TRUE(read.executeStep());
      const double tokens = read.getColumn(0).getDouble();
      const double at = read.getColumn(1).getDouble();
      read.reset();
      const double refilled = std::min(5.0, tokens + std::max(0.0, now - at) * 2.0);
      if (refilled >= 1) {
        write.reset();
        write.bind(1, refilled - 1);
        write.bind(2, now);
        write.bind(3, sub_);
        write.exec();
        taken += 1;
      }
      transaction.commit();
    }
    EXPECT_LE(taken, 5 + 2.0 * (now - start + 0.05) + 1e-9) << "at " << now;
  }
  // And the bucket was not starved: over 10 s at 2/s nearly everything was handed out.
  EXPECT_GE(taken, 5 + 2.0 * 10 - 1);
}

}  // namespace
}  // namespace surge::storage::sqlite
