// A PostgreSQL session's queued statements against a real server: they reach it with the next
// statement that takes parameters, in order; the first of them to fail is what throws; and a
// transaction that fails or rolls back leaves the session usable, with nothing written.
#include "storage/postgres/session.hpp"

#include <gtest/gtest.h>

#include <string>

#include "storage/error.hpp"
#include "tests/support/postgres_server.hpp"
#include "tests/support/sql_client.hpp"

namespace surge::storage::pg {
namespace {

using testing::postgres_server;
using testing::sql_client;

struct scratch_table {
  std::string uri;
  session db;
  sql_client other;  // a second session: sees only what was committed
  explicit scratch_table(postgres_server& server)
      : uri(server.create_database()), db(uri), other(uri) {
    db.exec("CREATE TABLE t (n INTEGER PRIMARY KEY)");
  }
  double rows_seen_by_another_session() { return other.number("SELECT count(*) FROM t"); }
};

TEST(PostgresSession, QueuedStatementsWaitForTheNextExecAndRunBeforeIt) {
  SURGE_REQUIRE_POSTGRES(server);
  scratch_table table(*server);
  table.db.send("INSERT INTO t VALUES ($1)", params().add(1));
  table.db.send("INSERT INTO t VALUES ($1)", params().add(2));
  EXPECT_EQ(table.rows_seen_by_another_session(), 0) << "nothing is sent before the next exec";
  const auto counted = table.db.exec("SELECT count(*) FROM t WHERE n <= $1", params().add(2));
  EXPECT_EQ(counted.int64(0, 0), 2) << "both ran before the statement they went with";
  EXPECT_EQ(table.rows_seen_by_another_session(), 2);
  // A statement without parameters sends what is queued first, in a round trip of its own.
  table.db.send("INSERT INTO t VALUES ($1)", params().add(3));
  EXPECT_EQ(table.db.exec("SELECT count(*) FROM t").int64(0, 0), 3);
}

TEST(PostgresSession, TheFirstFailedQueuedStatementIsWhatThrowsAndTheRestDoNotRun) {
  SURGE_REQUIRE_POSTGRES(server);
  scratch_table table(*server);
  table.db.exec("INSERT INTO t VALUES (1)");
  table.db.send("INSERT INTO t VALUES ($1)", params().add(1));  // a duplicate key
  table.db.send("INSERT INTO t VALUES ($1)", params().add(2));
  try {
    table.db.exec("SELECT count(*) FROM t", params());
    FAIL() << "the duplicate key was not reported";
  } catch (const error& failure) {
    EXPECT_EQ(failure.what_kind(), error::kind::row_rejected) << failure.what();
    EXPECT_NE(std::string(failure.what()).find("23505"), std::string::npos) << failure.what();
  }
  EXPECT_EQ(table.rows_seen_by_another_session(), 1) << "the statements after it did not run";
  // The session goes on: nothing is left queued or half-done.
  EXPECT_EQ(table.db.exec("SELECT count(*) FROM t", params()).int64(0, 0), 1);
  EXPECT_FALSE(table.db.in_transaction());
}

TEST(PostgresSession, ACommitAfterAFailedQueuedStatementWritesNothingAndLeavesNoTransactionOpen) {
  SURGE_REQUIRE_POSTGRES(server);
  scratch_table table(*server);
  table.db.exec("INSERT INTO t VALUES (1)");
  {
    transaction step(table.db);
    table.db.exec("INSERT INTO t VALUES ($1)", params().add(2));
    table.db.send("INSERT INTO t VALUES ($1)", params().add(1));  // fails with the COMMIT
    EXPECT_THROW(step.commit(), error);
  }
  EXPECT_FALSE(table.db.in_transaction());
  EXPECT_EQ(table.rows_seen_by_another_session(), 1) << "the transaction's first insert too";
  // Not inside an aborted transaction: a new one writes and commits.
  transaction next(table.db);
  table.db.exec("INSERT INTO t VALUES ($1)", params().add(3));
  next.commit();
  EXPECT_EQ(table.rows_seen_by_another_session(), 2);
}

TEST(PostgresSession, ATransactionLeftBeforeItsFirstStatementSendsNothing) {
  SURGE_REQUIRE_POSTGRES(server);
  scratch_table table(*server);
  {
    transaction step(table.db);
    EXPECT_TRUE(table.db.in_transaction()) << "its BEGIN waits in the queue";
    table.db.send("INSERT INTO t VALUES ($1)", params().add(1));
  }
  EXPECT_FALSE(table.db.in_transaction());
  EXPECT_EQ(table.db.exec("SELECT count(*) FROM t", params()).int64(0, 0), 0)
      << "the queued insert was discarded with the transaction";
}

}  // namespace
}  // namespace surge::storage::pg
