// The coalescing sweep's storage (storage/coalescing.hpp) on SQLite and PostgreSQL: it reads only
// rows due and held by nobody, and marks a row done in favour of its keeper only while both are
// still due and free when the write happens.
#include "storage/coalescing.hpp"

#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "proto/clock.hpp"
#include "storage/claims.hpp"
#include "storage/drain_store.hpp"
#include "storage/schema.hpp"
#include "storage/subscribers.hpp"
#include "tests/support/postgres_server.hpp"
#include "tests/support/sql_client.hpp"
#include "tests/support/temp_dir.hpp"

namespace surge::storage {
namespace {

using surge::testing::sql_client;

class CoalescingBacklogOn : public ::testing::TestWithParam<bool> {
 protected:
  void SetUp() override {
    if (GetParam()) {
      std::string why_not;
      auto* server = surge::testing::postgres_server::shared(&why_not);
      if (server == nullptr) GTEST_SKIP() << why_not;
      location_ = server->create_database();
    } else {
      location_ = dir_.file("queue.db");
    }
    db_.emplace(connection_config{.location = location_});
    migrate(*db_, true);
    sql_.emplace(location_);
    subscriber_ = add_subscriber(*db_, subscriber_row{.url = "http://a/", .secret = "s"});
  }

  std::int64_t insert(const std::string& status, double next, double locked) {
    return std::stoll(*sql_->query("INSERT INTO webhook_delivery(subscriber_id, event_type, "
                                   "payload, status, next_attempt_at, locked_until, created_at) "
                                   "VALUES (?, 't', '{}', ?, ?, ?, ?) RETURNING id",
                                   {std::to_string(subscriber_), status, std::to_string(next),
                                    std::to_string(locked), std::to_string(now_ - 1)})
                           .at(0)
                           .at(0));
  }
  std::optional<std::string> column(const std::string& name, std::int64_t id) {
    return sql_
        ->query("SELECT " + name + " FROM webhook_delivery WHERE id = ?", {std::to_string(id)})
        .at(0)
        .at(0);
  }

  surge::testing::temp_dir dir_;
  std::string location_;
  std::optional<connection> db_;
  std::optional<sql_client> sql_;
  std::int64_t subscriber_ = 0;
  double now_ = proto::unix_now();
};

TEST_P(CoalescingBacklogOn, OnlyRowsDueAndHeldByNobodyAreReadAndMarked) {
  const auto due = insert("pending", 0, 0);
  const auto retry_due = insert("retry", now_ - 1, 0);
  const auto keeper = insert("pending", 0, 0);
  const auto leased = insert("pending", 0, now_ + 60);
  const auto later = insert("pending", now_ + 60, 0);
  const auto finished = insert("done", 0, 0);

  std::vector<std::int64_t> read;
  for (const auto& row : read_unheld_due_rows(*db_, subscriber_, now_, 100, 1024, 1 << 20).rows) {
    read.push_back(row.id);
  }
  EXPECT_EQ(read, (std::vector<std::int64_t>{due, keeper, retry_due}));
  // The byte budget bounds what one read holds: it stops once passed (each payload is "{}").
  // What the read judged: every row up to the newest queued, which is `finished`, inserted last.
  EXPECT_EQ(read_unheld_due_rows(*db_, subscriber_, now_, 100, 1024, 1 << 20).judged_through,
            finished);
  // A read cut short by its bounds judged only what it read.
  const auto cut_by_bytes = read_unheld_due_rows(*db_, subscriber_, now_, 100, 1024, 3);
  EXPECT_EQ(cut_by_bytes.rows.size(), 2u);
  EXPECT_EQ(cut_by_bytes.judged_through, keeper);
  EXPECT_EQ(read_unheld_due_rows(*db_, subscriber_, now_, 1, 1024, 1 << 20).judged_through, due);
  // A payload over the per-row cap is not read (and so never gets a key).
  EXPECT_EQ(read_unheld_due_rows(*db_, subscriber_, now_, 100, 1, 1 << 20).rows.front().payload,
            "");

  // Meanwhile a drainer leases `due`: the mark must leave it alone, like the others.
  sql_->exec("UPDATE webhook_delivery SET locked_until = ? WHERE id = ?",
             {std::to_string(now_ + 60), std::to_string(due)});
  const std::vector<replacement> marks = {{due, keeper, now_ - 5},
                                          {retry_due, keeper, now_ - 5},
                                          {leased, keeper, now_ - 5},
                                          {later, keeper, now_ - 5},
                                          {finished, keeper, now_ - 5}};
  EXPECT_EQ(mark_coalesced(*db_, marks, now_), 1);
  EXPECT_EQ(column("status", retry_due), "done");
  EXPECT_EQ(column("coalesced_into", retry_due), std::to_string(keeper));
  EXPECT_EQ(column("last_error", retry_due), "coalesced into delivery " + std::to_string(keeper));
  EXPECT_NEAR(std::stod(*column("coalesced_since", keeper)), now_ - 5, 0.01)
      << "the keeper stands for the oldest row merged into it";
  for (const auto untouched : {due, leased, later}) {
    EXPECT_EQ(column("status", untouched), "pending") << untouched;
    EXPECT_EQ(column("coalesced_into", untouched), std::nullopt) << untouched;
  }
  EXPECT_EQ(column("coalesced_into", finished), std::nullopt);
}

TEST_P(CoalescingBacklogOn, NothingIsMarkedWhenTheKeeperIsNoLongerDueAndFree) {
  const auto older = insert("pending", 0, 0);
  const auto keeper = insert("pending", 0, now_ + 60);  // leased: it may be sent any moment
  const std::vector<replacement> marks = {{older, keeper, now_ - 1}};
  EXPECT_EQ(mark_coalesced(*db_, marks, now_), 0);
  EXPECT_EQ(column("status", older), "pending");
}

TEST_P(CoalescingBacklogOn, AClaimTakesACoalescingSubscribersRowsOnlyUpToWhatTheSweepJudged) {
  // Five subscribers, their rows interleaved, so that SQLite's claim sweeps the table for them;
  // one of them coalesces, and a sweep judged its rows up to its third.
  std::vector<std::int64_t> subscribers{subscriber_};
  for (int i = 1; i < 5; ++i) {
    subscribers.push_back(add_subscriber(*db_, subscriber_row{.url = "http://a/", .secret = "s"}));
  }
  std::vector<std::int64_t> coalescing_rows;
  for (int round = 0; round < 10; ++round) {
    for (const auto id : subscribers) {
      const auto row = std::stoll(
          *sql_->query("INSERT INTO webhook_delivery(subscriber_id, event_type, payload, "
                       "next_attempt_at, created_at) VALUES (?, 't', '{}', 0, ?) RETURNING id",
                       {std::to_string(id), std::to_string(now_ - 1)})
               .at(0)
               .at(0));
      if (id == subscriber_) coalescing_rows.push_back(row);
    }
  }
  auto store = open_drain_store({.location = location_});
  // The store checks ownership against the wall clock; the fixture's `now_` is older by however
  // long creating the database took on a busy machine, which may pass the heartbeat.
  const double now = proto::unix_now();
  store->renew_ownership(now);
  // Two claims: after the first, SQLite's claim sweeps the table for those it found near.
  std::map<std::int64_t, std::vector<std::int64_t>> claimed;
  for (const int rows : {1, 9}) {
    std::vector<subscriber_demand> demand;
    for (const auto id : subscribers) demand.push_back({.subscriber_id = id, .rows = rows});
    demand.front().judged_through = coalescing_rows[2];
    const auto cycle = store->write_and_claim({}, {}, demand, now, 60, 1 << 20);
    for (const auto& row : cycle.claimed) claimed[row.subscriber_id].push_back(row.id);
  }
  EXPECT_EQ(claimed[subscriber_],
            (std::vector<std::int64_t>(coalescing_rows.begin(), coalescing_rows.begin() + 3)));
  for (std::size_t i = 1; i < subscribers.size(); ++i) {
    EXPECT_EQ(claimed[subscribers[i]].size(), 10u) << "subscriber " << subscribers[i];
  }
  // Before its first sweep, nothing of it is claimed; the others are not held back.
  const auto second =
      store->write_and_claim({}, {},
                             std::vector<subscriber_demand>{
                                 {.subscriber_id = subscriber_, .rows = 10, .judged_through = 0}},
                             now, 60, 1 << 20);
  EXPECT_TRUE(second.claimed.empty());
}

INSTANTIATE_TEST_SUITE_P(Backends, CoalescingBacklogOn, ::testing::Values(false, true),
                         [](const ::testing::TestParamInfo<bool>& info) {
                           return info.param ? "PostgreSQL" : "SQLite";
                         });

}  // namespace
}  // namespace surge::storage
