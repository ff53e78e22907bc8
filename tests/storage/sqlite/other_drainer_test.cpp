// The steady-state drainer's own statements, run unchanged on a file Surge has migrated.
#include <algorithm>
#include <string>
#include <vector>

#include <SQLiteCpp/Statement.h>
#include <SQLiteCpp/Transaction.h>
#include <gtest/gtest.h>

#include "storage/sqlite/claims.hpp"
#include "storage/sqlite/outcomes.hpp"
#include "tests/storage/test_db.hpp"
#include "tests/storage/sqlite/other_drainer_sql.hpp"

namespace surge::storage::sqlite {
namespace {

namespace sql = other_drainer_sql;
using testing::query_double;
using testing::query_int;
using testing::query_is_null;
using testing::query_text;

std::string of_row(const std::string& column, std::int64_t id) {
  return "SELECT " + column + " FROM webhook_delivery WHERE id = " + std::to_string(id);
}

TEST(OtherDrainer, StatementsStillWorkOnAMigratedFile) {
  testing::temp_dir dir;
  const auto path = dir.file("queue.db");
  { testing::open_migrated(path); }

  // The old program, on its own plain connection.
  SQLite::Database db(path, SQLite::OPEN_READWRITE, 5000);
  const auto sub = testing::insert_subscriber_old(db, "*", 2.0, 4);
  std::vector<std::int64_t> ids;
  for (int i = 0; i < 5; ++i) ids.push_back(testing::insert_deliveries_old(db, sub, 1, 100 + i)[0]);
  EXPECT_EQ(query_text(db, of_row("status", ids[0])), "pending");
  EXPECT_TRUE(query_is_null(db, of_row("last_status", ids[0])));

  const double now = 200;
  const double lease = now + 30;
  {
    SQLite::Transaction transaction(db, SQLite::TransactionBehavior::IMMEDIATE);
    SQLite::Statement claim(db, sql::claim());
    claim.bind(1, lease);
    claim.bind(2, now);
    claim.bind(3, now);
    claim.bind(4, 3);
    EXPECT_EQ(claim.exec(), 3);
    transaction.commit();
  }
  std::vector<std::int64_t> claimed;
  {
    SQLite::Statement read_back(db, sql::read_back);
    read_back.bind(1, lease);
    while (read_back.executeStep()) {
      claimed.push_back(read_back.getColumn(0).getInt64());
      EXPECT_EQ(read_back.getColumn(1).getInt64(), sub);
      EXPECT_EQ(read_back.getColumn(2).getString(), "video.trending");
      EXPECT_EQ(read_back.getColumn(4).getInt64(), 0);
    }
  }
  std::sort(claimed.begin(), claimed.end());
  EXPECT_EQ(claimed, (std::vector<std::int64_t>{ids[0], ids[1], ids[2]}));

  {
    SQLite::Statement read_bucket(db, sql::read_bucket);
    read_bucket.bind(1, sub);
    ASSERT_TRUE(read_bucket.executeStep());
    EXPECT_EQ(read_bucket.getColumn(0).getDouble(), 10.0);
    EXPECT_EQ(read_bucket.getColumn(1).getDouble(), 0);
    EXPECT_EQ(read_bucket.getColumn(2).getDouble(), 2.0);
    EXPECT_EQ(read_bucket.getColumn(3).getInt64(), 4);
  }
  {
    SQLite::Transaction transaction(db, SQLite::TransactionBehavior::IMMEDIATE);
    SQLite::Statement write_bucket(db, sql::write_bucket);
    write_bucket.bind(1, 3.0);
    write_bucket.bind(2, now);
    write_bucket.bind(3, sub);
    EXPECT_EQ(write_bucket.exec(), 1);

    SQLite::Statement done(db, sql::mark_done);
    done.bind(1, ids[0]);
    EXPECT_EQ(done.exec(), 1);
    SQLite::Statement retry(db, sql::mark_retry);
    retry.bind(1, 260.0);
    retry.bind(2, ids[1]);
    EXPECT_EQ(retry.exec(), 1);
    SQLite::Statement dead(db, sql::mark_dead);
    dead.bind(1, ids[2]);
    EXPECT_EQ(dead.exec(), 1);
    transaction.commit();
  }

  EXPECT_EQ(
      query_double(db, "SELECT tokens FROM webhook_subscriber WHERE id = " + std::to_string(sub)),
      3.0);
  EXPECT_EQ(query_text(db, of_row("status", ids[0])), "done");
  EXPECT_EQ(query_int(db, of_row("attempts", ids[0])), 1);
  EXPECT_EQ(query_text(db, of_row("status", ids[1])), "retry");
  EXPECT_EQ(query_double(db, of_row("next_attempt_at", ids[1])), 260);
  EXPECT_EQ(query_text(db, of_row("status", ids[2])), "dead");
  EXPECT_EQ(query_int(db, "SELECT COUNT(*) FROM webhook_delivery WHERE locked_until != 0"), 0);

  // Surge, on its own connection, picks up where the old program left off.
  SQLite::Database surge_db = testing::open_migrated(path);
  claimer claims(surge_db);
  const std::vector<subscriber_demand> demand = {{sub, 10}};
  auto rows = claims.claim(demand, 270, 30);
  ASSERT_EQ(rows.size(), 3u);
  EXPECT_EQ(rows[0].id, ids[3]);
  EXPECT_EQ(rows[1].id, ids[4]);
  EXPECT_EQ(rows[2].id, ids[1]);
  EXPECT_EQ(rows[2].attempts, 1);
  outcome done;
  done.delivery_id = rows[2].id;
  done.lease = rows[2].lease;
  done.attempts = 2;
  done.last_status = 200;
  done.finished_at = 271;
  outcome_writer writer(surge_db);
  EXPECT_EQ(writer.write(std::span(&done, 1)).applied, 1);
  EXPECT_EQ(query_text(db, of_row("status", ids[1])), "done");
  EXPECT_EQ(query_double(db, of_row("delivered_at", ids[1])), 271);
}

}  // namespace
}  // namespace surge::storage::sqlite
