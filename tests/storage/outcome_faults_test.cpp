// Outcomes the queue cannot take as they are, through storage's door on each kind of queue: rows
// deleted while in flight, and an attempts count already at the column's limit. The drain's
// message for the first is storage_notices' (StorageNotices.*); the retry rule's verdict at the
// limit is proto's (outcome.attempt_limit).
#include <gtest/gtest.h>

#include <SQLiteCpp/Database.h>

#include <cstdint>
#include <limits>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "proto/clock.hpp"
#include "storage/connection.hpp"
#include "storage/drain_store.hpp"
#include "storage/queue.hpp"
#include "storage/schema.hpp"
#include "storage/subscribers.hpp"
#include "tests/storage/queue_kinds.hpp"
#include "tests/support/postgres_server.hpp"
#include "tests/support/seed001_ddl.hpp"
#include "tests/support/sql_client.hpp"
#include "tests/support/temp_dir.hpp"

namespace surge::storage {
namespace {

using kind = testing::queue_kind;

class OutcomeFaultsOn : public ::testing::TestWithParam<kind> {
 protected:
  // A migrated queue of the kind asked for, one subscriber, `rows` rows due now and a drain's
  // store; false when the kind cannot be had here (the test is then skipped).
  bool open(int rows) {
    if (GetParam() == kind::postgres) {
      std::string why_not;
      auto* server = surge::testing::postgres_server::shared(&why_not);
      if (server == nullptr) return false;
      location_ = server->create_database();
    } else if (GetParam() == kind::seed001) {
      location_ = dir_.file("seed001.db");
      SQLite::Database raw(location_, SQLite::OPEN_READWRITE | SQLite::OPEN_CREATE);
      raw.exec(surge::testing::seed001_ddl);
    } else {
      location_ = dir_.file("queue.db");
    }
    connection db({.location = location_, .create_if_missing = GetParam() == kind::seed000});
    migrate(db, GetParam() != kind::seed001);
    subscriber_row row;
    row.url = "https://partner.example/hook";
    row.secret = "secret";
    row.rate_per_sec = 1000;
    row.burst = 100;
    row.region = "DE";
    subscriber_ = add_subscriber(db, row);
    emit_event(db, "clip.viral", R"({"clip":1})", now_, rows);
    store_ =
        open_drain_store({.location = location_,
                          .shape = GetParam() == kind::seed001 ? std::optional(queue_shape::seed001)
                                                               : std::nullopt});
    store_->renew_ownership(now_);
    return true;
  }
  void claim(int rows) {
    const subscriber_demand demand[] = {{.subscriber_id = subscriber_, .rows = rows}};
    claimed_ = store_->write_and_claim({}, {}, demand, now_, 30, 1 << 20).claimed;
  }
  std::string deliveries() const {
    return GetParam() == kind::seed001 ? "webhook_deliveries" : "webhook_delivery";
  }
  std::string attempts() const { return GetParam() == kind::seed001 ? "attempt" : "attempts"; }
  outcome finished(const claimed_row& row, outcome_kind what, std::int64_t attempts) const {
    return {.delivery_id = row.id,
            .lease = row.lease,
            .kind = what,
            .attempts = attempts,
            .last_status = what == outcome_kind::done ? 200 : 500,
            .last_error = what == outcome_kind::done ? "" : "attempt limit",
            .finished_at = now_ + 1};
  }

  surge::testing::temp_dir dir_;
  std::string location_;
  // The store checks ownership against the wall clock, so the test's clock runs an hour ahead of
  // it: however long the set-up takes on a busy machine, the heartbeat taken at `now_` holds.
  const double now_ = proto::unix_now() + 3600;
  std::int64_t subscriber_ = 0;
  std::unique_ptr<drain_store> store_;
  std::vector<claimed_row> claimed_;
};

// An operator deletes rows while their attempts are out: their outcomes have nowhere to go, and
// the report says they were deleted, not that another drainer took them. The rest are written.
TEST_P(OutcomeFaultsOn, OutcomesOfRowsDeletedInFlightAreReportedAsDeleted) {
  if (!open(3)) GTEST_SKIP() << "no PostgreSQL server here";
  claim(3);
  ASSERT_EQ(claimed_.size(), 3u);
  surge::testing::sql_client sql(location_);
  for (const int i : {0, 1}) {
    sql.exec("DELETE FROM " + deliveries() + " WHERE id = ?", {std::to_string(claimed_[i].id)});
  }
  std::vector<outcome> outcomes;
  for (const auto& row : claimed_) outcomes.push_back(finished(row, outcome_kind::done, 1));
  const auto report = store_->write_outcomes(outcomes, {});
  EXPECT_EQ(report.deleted, (std::vector<std::int64_t>{claimed_[0].id, claimed_[1].id}));
  EXPECT_EQ(report.lost_leases, report.deleted);
  EXPECT_EQ(report.applied, 1);
}

// A row whose attempts count another program left at the column's largest value is claimed
// with a count that leaves room for one more, and its dead outcome is written at the largest
// value every kind of queue holds; the row beside it is written as well.
TEST_P(OutcomeFaultsOn, AnAttemptsCountAtItsLimitNeitherOverflowsNorStopsTheOthers) {
  if (!open(2)) GTEST_SKIP() << "no PostgreSQL server here";
  surge::testing::sql_client sql(location_);
  const std::string most = GetParam() == kind::postgres
                               ? std::to_string(std::numeric_limits<std::int32_t>::max())
                               : std::to_string(std::numeric_limits<std::int64_t>::max());
  sql.exec("UPDATE " + deliveries() + " SET " + attempts() + " = " + most +
           " WHERE id = (SELECT MIN(id) FROM " + deliveries() + ")");
  claim(2);
  ASSERT_EQ(claimed_.size(), 2u);
  const auto& worn = claimed_[0].attempts > claimed_[1].attempts ? claimed_[0] : claimed_[1];
  const auto& fresh = &worn == &claimed_[0] ? claimed_[1] : claimed_[0];
  EXPECT_EQ(worn.attempts, std::numeric_limits<std::int32_t>::max() - 1);
  const outcome outcomes[] = {finished(worn, outcome_kind::dead, worn.attempts + 1),
                              finished(fresh, outcome_kind::done, 1)};
  const auto report = store_->write_outcomes(outcomes, {});
  EXPECT_EQ(report.applied, 2);
  EXPECT_TRUE(report.lost_leases.empty());
  EXPECT_EQ(sql.number("SELECT " + attempts() + " FROM " + deliveries() + " WHERE id = ?",
                       {std::to_string(worn.id)}),
            std::numeric_limits<std::int32_t>::max());
}

INSTANTIATE_TEST_SUITE_P(Kinds, OutcomeFaultsOn, testing::all_queue_kinds(),
                         testing::queue_kind_name);

}  // namespace
}  // namespace surge::storage
