// One storage cycle in one transaction: outcomes and the next claim commit together,
// fenced as ever, and a page they share is written to the WAL once.
#include <gtest/gtest.h>

#include "storage/sqlite/claims.hpp"
#include "storage/sqlite/cycle.hpp"
#include "storage/sqlite/outcomes.hpp"
#include "storage/sqlite/token_leases.hpp"
#include "storage/sqlite/wal_meter.hpp"
#include "tests/storage/test_db.hpp"

namespace surge::storage::sqlite {
namespace {

std::vector<outcome> done_outcomes(const std::vector<claimed_row>& rows, double now) {
  std::vector<outcome> out;
  for (const auto& row : rows) {
    out.push_back({.delivery_id = row.id,
                   .lease = row.lease,
                   .attempts = row.attempts + 1,
                   .last_status = 200,
                   .finished_at = now,
                   .has_attempt = true,
                   .attempt = {row.id, row.subscriber_id, row.attempts + 1, now, now, 200, ""}});
  }
  return out;
}

class Cycle : public ::testing::Test {
 protected:
  void SetUp() override {
    sub_ = testing::insert_subscriber_old(db_);
    testing::insert_deliveries_old(db_, sub_, 100, 10);
  }
  testing::temp_dir dir_;
  std::string path_ = dir_.file("queue.db");
  SQLite::Database db_ = testing::open_migrated(path_);
  std::int64_t sub_ = 0;
};

TEST_F(Cycle, OutcomesAndTheNextClaimCommitOnce) {
  claimer claims(db_);
  outcome_writer writer(db_);
  token_leaser tokens(db_, 0);
  const std::vector<subscriber_demand> demand{{sub_, 10}};
  const auto first = claims.claim(demand, 100, 30);
  ASSERT_EQ(first.size(), 10u);
  wal_meter meter(db_, {});
  const auto result =
      write_and_claim(db_, writer, claims, tokens, done_outcomes(first, 101), {}, demand, 101, 30);
  EXPECT_EQ(meter.commits(), 1);
  EXPECT_EQ(result.written.applied, 10);
  EXPECT_TRUE(result.written.lost_leases.empty());
  ASSERT_EQ(result.claimed.size(), 10u);
  EXPECT_GT(result.claimed.front().id, first.back().id);
  EXPECT_EQ(testing::query_int(db_, "SELECT count(*) FROM webhook_delivery WHERE status = 'done'"),
            10);
  EXPECT_EQ(testing::query_int(db_, "SELECT count(*) FROM surge_attempt"), 10);
}

TEST_F(Cycle, AnOutcomeWhoseLeaseWasLostIsStillReportedAndTheClaimStillMade) {
  claimer claims(db_);
  outcome_writer writer(db_);
  token_leaser tokens(db_, 0);
  const std::vector<subscriber_demand> demand{{sub_, 1}};
  const auto first = claims.claim(demand, 100, 30);
  ASSERT_EQ(first.size(), 1u);
  auto stale = done_outcomes(first, 101);
  stale.front().lease += 1;  // not the lease the row holds
  const auto result = write_and_claim(db_, writer, claims, tokens, stale, {}, demand, 101, 30);
  EXPECT_EQ(result.written.applied, 0);
  EXPECT_EQ(result.written.lost_leases, (std::vector<std::int64_t>{first.front().id}));
  EXPECT_EQ(result.claimed.size(), 1u);
  EXPECT_EQ(testing::query_text(db_, "SELECT status FROM webhook_delivery WHERE id = " +
                                         std::to_string(first.front().id)),
            "pending");
}

TEST_F(Cycle, NothingToDoTakesNoWriteLock) {
  claimer claims(db_);
  outcome_writer writer(db_);
  token_leaser tokens(db_, 0);
  wal_meter meter(db_, {});
  const std::vector<subscriber_demand> none{{sub_, 0}};
  const auto result = write_and_claim(db_, writer, claims, tokens, {}, {}, none, 100, 30);
  EXPECT_TRUE(result.claimed.empty());
  EXPECT_EQ(meter.commits(), 0);
}

TEST_F(Cycle, TokensAskedRideInTheSameTransactionAsTheClaim) {
  claimer claims(db_);
  outcome_writer writer(db_);
  token_leaser tokens(db_, 0);
  db_.exec(
      "UPDATE webhook_subscriber SET rate_per_sec = 2, burst = 10, tokens = 4, "
      "tokens_updated_at = 100 WHERE id = " +
      std::to_string(sub_));
  wal_meter meter(db_, {});
  const std::vector<subscriber_demand> demand{{.subscriber_id = sub_, .rows = 5, .tokens = 3}};
  const auto result = write_and_claim(db_, writer, claims, tokens, {}, {}, demand, 100.5, 30);
  EXPECT_EQ(meter.commits(), 1);
  EXPECT_EQ(result.claimed.size(), 5u);
  ASSERT_EQ(result.granted.size(), 1u);
  EXPECT_EQ(result.granted.front().tokens, 3);
  // 4 + 2/s since 100, less the 3 taken, as of the cycle's time moved on by what the cycle took
  // before the tokens (a few milliseconds at most here).
  const double stamp = testing::query_double(
      db_, "SELECT tokens_updated_at FROM webhook_subscriber WHERE id = " + std::to_string(sub_));
  EXPECT_GE(stamp, 100.5);
  EXPECT_LT(stamp, 101);
  EXPECT_NEAR(testing::query_double(
                  db_, "SELECT tokens FROM webhook_subscriber WHERE id = " + std::to_string(sub_)),
              4 + 2 * (stamp - 100) - 3, 1e-9);
  // Only tokens asked: still one transaction, and the claim part takes no rows.
  const std::vector<subscriber_demand> only_tokens{{.subscriber_id = sub_, .tokens = 1}};
  const auto second = write_and_claim(db_, writer, claims, tokens, {}, {}, only_tokens, 100.5, 30);
  EXPECT_TRUE(second.claimed.empty());
  ASSERT_EQ(second.granted.size(), 1u);
  EXPECT_EQ(second.granted.front().tokens, 1);
}

// The point of the cycle: the same claims and outcomes as separate transactions write the
// pages they share twice.
TEST_F(Cycle, WritesFewerWalFramesThanSeparateTransactions) {
  auto run = [this](bool together) {
    testing::temp_dir dir;
    const auto path = dir.file("queue.db");
    SQLite::Database db = testing::open_migrated(path);
    const auto sub = testing::insert_subscriber_old(db);
    testing::insert_deliveries_old(db, sub, 200, 10);
    claimer claims(db);
    outcome_writer writer(db);
    token_leaser tokens(db, 0);
    const std::vector<subscriber_demand> demand{{sub, 10}};
    auto held = claims.claim(demand, 100, 30);
    wal_meter meter(db, {});
    for (int round = 0; round < 10; ++round) {
      const double now = 101 + round;
      const auto outcomes = done_outcomes(held, now);
      if (together) {
        held = write_and_claim(db, writer, claims, tokens, outcomes, {}, demand, now, 30).claimed;
      } else {
        writer.write(outcomes);
        held = claims.claim(demand, now, 30);
      }
    }
    return meter.frames();
  };
  const auto separate = run(false);
  const auto together = run(true);
  EXPECT_LT(together, separate);
}

}  // namespace
}  // namespace surge::storage::sqlite
