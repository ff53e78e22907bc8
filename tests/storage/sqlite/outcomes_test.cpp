#include "storage/sqlite/outcomes.hpp"

#include <string>

#include <SQLiteCpp/Statement.h>
#include <gtest/gtest.h>

#include "storage/sqlite/claims.hpp"
#include "tests/storage/test_db.hpp"

namespace surge::storage::sqlite {
namespace {

using testing::query_double;
using testing::query_int;
using testing::query_is_null;
using testing::query_text;

std::string of_row(const std::string& column, std::int64_t id) {
  return "SELECT " + column + " FROM webhook_delivery WHERE id = " + std::to_string(id);
}

class Outcomes : public ::testing::Test {
 protected:
  void SetUp() override {
    sub_ = testing::insert_subscriber_old(db_);
    testing::insert_deliveries_old(db_, sub_, 4, 10);
    claimer claims(db_);
    const std::vector<subscriber_demand> demand = {{sub_, 4}};
    rows_ = claims.claim(demand, 100, 30);
    ASSERT_EQ(rows_.size(), 4u);
  }

  outcome make(const claimed_row& row, outcome_kind kind) {
    outcome out;
    out.delivery_id = row.id;
    out.lease = row.lease;
    out.kind = kind;
    out.attempts = row.attempts + 1;
    out.has_attempt = true;
    out.attempt = {row.id, row.subscriber_id, row.attempts + 1, 101.0, 101.5, 0, ""};
    return out;
  }

  testing::temp_dir dir_;
  SQLite::Database db_ = testing::open_migrated(dir_.file("queue.db"));
  std::int64_t sub_ = 0;
  std::vector<claimed_row> rows_;
};

TEST_F(Outcomes, EachKindWritesItsColumnsAndClearsTheLease) {
  std::vector<outcome> batch;
  auto& done = batch.emplace_back(make(rows_[0], outcome_kind::done));
  done.last_status = 204;
  done.finished_at = 101.5;
  done.attempt.status_code = 204;
  auto& retry = batch.emplace_back(make(rows_[1], outcome_kind::retry));
  retry.next_attempt_at = 160;
  retry.last_status = 500;
  retry.last_error = "http 500";
  retry.attempt.status_code = 500;
  auto& dead = batch.emplace_back(make(rows_[2], outcome_kind::dead));
  dead.attempts = 8;
  dead.last_error = "connect timeout";
  dead.attempt.error_class = "timeout";
  auto& release = batch.emplace_back(make(rows_[3], outcome_kind::release));
  release.has_attempt = false;

  outcome_writer writer(db_);
  const auto report = writer.write(batch);
  EXPECT_EQ(report.applied, 4);
  EXPECT_TRUE(report.lost_leases.empty());

  const auto id = [&](int i) { return rows_[static_cast<std::size_t>(i)].id; };
  EXPECT_EQ(query_text(db_, of_row("status", id(0))), "done");
  EXPECT_EQ(query_int(db_, of_row("attempts", id(0))), 1);
  EXPECT_EQ(query_int(db_, of_row("last_status", id(0))), 204);
  EXPECT_TRUE(query_is_null(db_, of_row("last_error", id(0))));
  EXPECT_EQ(query_double(db_, of_row("delivered_at", id(0))), 101.5);

  EXPECT_EQ(query_text(db_, of_row("status", id(1))), "retry");
  EXPECT_EQ(query_double(db_, of_row("next_attempt_at", id(1))), 160);
  EXPECT_EQ(query_int(db_, of_row("last_status", id(1))), 500);
  EXPECT_EQ(query_text(db_, of_row("last_error", id(1))), "http 500");
  EXPECT_TRUE(query_is_null(db_, of_row("delivered_at", id(1))));

  EXPECT_EQ(query_text(db_, of_row("status", id(2))), "dead");
  EXPECT_EQ(query_int(db_, of_row("attempts", id(2))), 8);
  EXPECT_TRUE(query_is_null(db_, of_row("last_status", id(2))));  // no response
  EXPECT_EQ(query_text(db_, of_row("last_error", id(2))), "connect timeout");

  EXPECT_EQ(query_text(db_, of_row("status", id(3))), "pending");
  EXPECT_EQ(query_int(db_, of_row("attempts", id(3))), 0);
  EXPECT_EQ(query_double(db_, of_row("next_attempt_at", id(3))), 10);

  EXPECT_EQ(query_int(db_, "SELECT COUNT(*) FROM webhook_delivery WHERE locked_until != 0"), 0);

  EXPECT_EQ(query_int(db_, "SELECT COUNT(*) FROM surge_attempt"), 3);
  EXPECT_EQ(query_int(db_, "SELECT status_code FROM surge_attempt WHERE delivery_id = " +
                               std::to_string(id(0))),
            204);
  EXPECT_TRUE(query_is_null(
      db_, "SELECT error_class FROM surge_attempt WHERE delivery_id = " + std::to_string(id(0))));
  EXPECT_TRUE(query_is_null(
      db_, "SELECT status_code FROM surge_attempt WHERE delivery_id = " + std::to_string(id(2))));
  EXPECT_EQ(query_text(db_, "SELECT error_class FROM surge_attempt WHERE delivery_id = " +
                                std::to_string(id(2))),
            "timeout");
  EXPECT_EQ(query_double(db_, "SELECT started_at FROM surge_attempt WHERE delivery_id = " +
                                  std::to_string(id(2))),
            101.0);
  EXPECT_EQ(query_int(db_, "SELECT attempt FROM surge_attempt WHERE delivery_id = " +
                               std::to_string(id(2))),
            1);

  // The retried row comes back when due; the released one at once.
  claimer claims(db_);
  const std::vector<subscriber_demand> demand = {{sub_, 10}};
  EXPECT_EQ(claims.claim(demand, 150, 30).size(), 1u);
  EXPECT_EQ(claims.claim(demand, 160, 30).size(), 1u);
}

TEST_F(Outcomes, EveryAttemptOfALargeBatchIsRecordedInBatchOrder) {
  // Records go in several to a statement; 37 is two full statements and five single rows.
  testing::insert_deliveries_old(db_, sub_, 37, 20);
  claimer claims(db_);
  const std::vector<subscriber_demand> demand = {{sub_, 37}};
  const auto rows = claims.claim(demand, 100, 30);
  ASSERT_EQ(rows.size(), 37u);
  std::vector<outcome> batch;
  for (std::size_t i = 0; i < rows.size(); ++i) {
    auto& out = batch.emplace_back(make(rows[i], outcome_kind::done));
    const auto n = static_cast<int>(i);
    out.attempt.started_at = 200.0 + n;
    out.attempt.finished_at = 300.0 + n;
    out.attempt.status_code = n % 3 == 0 ? 0 : 200 + n;
    out.attempt.error_class = n % 3 == 0 ? "timeout " + std::to_string(n) : "";
    out.attempt.batch_lead = n % 2 == 0 ? 0 : rows[0].id;
    out.attempt.batch_size = n % 2 == 0 ? 1 : n;
  }
  outcome_writer writer(db_);
  EXPECT_EQ(writer.write(batch).applied, 37);

  SQLite::Statement records(
      db_,
      "SELECT delivery_id, subscriber_id, attempt, started_at, finished_at, status_code, "
      "error_class, batch_lead, batch_size FROM surge_attempt ORDER BY id");
  std::size_t i = 0;
  for (; records.executeStep(); ++i) {
    ASSERT_LT(i, batch.size());
    const auto& want = batch[i].attempt;
    EXPECT_EQ(records.getColumn(0).getInt64(), want.delivery_id) << i;
    EXPECT_EQ(records.getColumn(1).getInt64(), want.subscriber_id) << i;
    EXPECT_EQ(records.getColumn(2).getInt64(), want.attempt) << i;
    EXPECT_EQ(records.getColumn(3).getDouble(), want.started_at) << i;
    EXPECT_EQ(records.getColumn(4).getDouble(), want.finished_at) << i;
    EXPECT_EQ(records.getColumn(5).isNull(), want.status_code == 0) << i;
    if (want.status_code != 0) {
      EXPECT_EQ(records.getColumn(5).getInt(), want.status_code) << i;
    }
    EXPECT_EQ(records.getColumn(6).isNull(), want.error_class.empty()) << i;
    EXPECT_EQ(records.getColumn(6).getString(), want.error_class) << i;
    EXPECT_EQ(records.getColumn(7).isNull(), want.batch_lead == 0) << i;
    EXPECT_EQ(records.getColumn(7).getInt64(), want.batch_lead) << i;
    EXPECT_EQ(records.getColumn(8).getInt64(), want.batch_size) << i;
  }
  EXPECT_EQ(i, batch.size());
}

TEST_F(Outcomes, WrongLeaseChangesNothingButIsReported) {
  std::vector<outcome> batch = {make(rows_[0], outcome_kind::done),
                                make(rows_[1], outcome_kind::release),
                                make(rows_[2], outcome_kind::done)};
  batch[0].lease += 0.5;
  batch[1].lease += 0.5;
  outcome_writer writer(db_);
  const auto report = writer.write(batch);
  EXPECT_EQ(report.applied, 1);
  EXPECT_EQ(report.lost_leases, (std::vector<std::int64_t>{rows_[0].id, rows_[1].id}));
  EXPECT_EQ(query_text(db_, of_row("status", rows_[0].id)), "pending");
  EXPECT_EQ(query_double(db_, of_row("locked_until", rows_[0].id)), rows_[0].lease);
  EXPECT_EQ(query_double(db_, of_row("locked_until", rows_[1].id)), rows_[1].lease);
  EXPECT_EQ(query_text(db_, of_row("status", rows_[2].id)), "done");
  // The requests were made either way.
  EXPECT_EQ(query_int(db_, "SELECT COUNT(*) FROM surge_attempt"), 3);
  // Writing again after success: the fence no longer matches.
  EXPECT_EQ(writer.write(std::span(batch).subspan(2)).lost_leases,
            (std::vector<std::int64_t>{rows_[2].id}));
}

TEST_F(Outcomes, DeactivatesSubscribers) {
  const auto other = testing::insert_subscriber_old(db_);
  outcome_writer writer(db_);
  const std::vector<std::int64_t> deactivate = {sub_};
  const std::vector<outcome> batch = {make(rows_[0], outcome_kind::dead)};
  EXPECT_EQ(writer.write(batch, deactivate).applied, 1);
  EXPECT_EQ(
      query_int(db_, "SELECT active FROM webhook_subscriber WHERE id = " + std::to_string(sub_)),
      0);
  EXPECT_EQ(
      query_int(db_, "SELECT active FROM webhook_subscriber WHERE id = " + std::to_string(other)),
      1);
  // Deactivation alone is a write too.
  db_.exec("UPDATE webhook_subscriber SET active = 1");
  EXPECT_EQ(writer.write({}, deactivate).applied, 0);
  EXPECT_EQ(
      query_int(db_, "SELECT active FROM webhook_subscriber WHERE id = " + std::to_string(sub_)),
      0);
}

TEST_F(Outcomes, EmptyBatchIsANoOp) {
  outcome_writer writer(db_);
  const int changes = db_.getTotalChanges();
  const auto report = writer.write({});
  EXPECT_EQ(report.applied, 0);
  EXPECT_TRUE(report.lost_leases.empty());
  EXPECT_EQ(db_.getTotalChanges(), changes);
}

}  // namespace
}  // namespace surge::storage::sqlite
