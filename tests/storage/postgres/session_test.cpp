// A PostgreSQL session's queued statements against a real server: they reach it with the next
// statement that takes parameters, in order; the first of them to fail is what throws; and a
// transaction that fails or rolls back leaves the session usable, with nothing written. Statements
// with parameters are prepared once per connection, and prepared again when the connection, a
// failed preparation or a schema change took the old one away.
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
  // How many statements of this text the session has prepared on its connection now (asked
  // without parameters, so the question is not prepared itself).
  std::int64_t prepared_as(const std::string& sql) {
    std::string quoted;
    for (const char c : sql) quoted += c == '\'' ? std::string("''") : std::string(1, c);
    return db.exec("SELECT count(*) FROM pg_prepared_statements WHERE statement = '" + quoted + "'")
        .int64(0, 0);
  }
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

// A role whose own statement_timeout is tiny cancelled every claim of a drain (57014), which then
// delivered nothing: the session puts its own timeouts in force at every connect, over the role's.
// The role's is 100 ms, far below what a claim may take, and far above what the session's own
// SET takes even on a loaded machine (at 1 ms the SET itself was cancelled there).
TEST(PostgresSession, ItsOwnTimeoutsOverrideARolesTinyOne) {
  SURGE_REQUIRE_POSTGRES(server);
  scratch_table table(*server);
  table.other.exec(
      "DO $$ BEGIN CREATE ROLE hasty LOGIN; EXCEPTION WHEN duplicate_object THEN NULL; END $$");
  table.other.exec("ALTER ROLE hasty SET statement_timeout = '100ms'");
  const auto user_at = table.uri.find("user=");
  ASSERT_NE(user_at, std::string::npos) << table.uri;
  session hasty(table.uri.substr(0, user_at) + "user=hasty");
  EXPECT_EQ(hasty.exec("SHOW statement_timeout").text(0, 0), "30s");
  EXPECT_EQ(hasty.exec("SHOW lock_timeout").text(0, 0), "2s");
  EXPECT_NO_THROW(hasty.exec("SELECT pg_sleep($1)", params().add(0.3)));
}

TEST(PostgresSession, AStatementWithParametersIsPreparedOnceAndRunByName) {
  SURGE_REQUIRE_POSTGRES(server);
  scratch_table table(*server);
  const std::string insert = "INSERT INTO t VALUES ($1)";
  table.db.exec(insert, params().add(1));
  table.db.send(insert, params().add(2));  // queued: by the same name, in a pipeline
  table.db.exec(insert, params().add(3));
  EXPECT_EQ(table.prepared_as(insert), 1);
  EXPECT_EQ(table.rows_seen_by_another_session(), 3);
  EXPECT_EQ(table.prepared_as("BEGIN"), 0) << "statements without parameters go unnamed";
  // What decides whether a drain's cycle asks for generic plans (plan_cache_mode, 12 and later).
  EXPECT_EQ(table.db.server_version() / 10000,
            std::stoi(table.db.exec("SHOW server_version_num").text(0, 0).data()) / 10000);
}

TEST(PostgresSession, ANewConnectionPreparesItsStatementsAgain) {
  SURGE_REQUIRE_POSTGRES(server);
  scratch_table table(*server);
  const std::string insert = "INSERT INTO t VALUES ($1)";
  table.db.exec(insert, params().add(1));
  const auto pid = table.db.exec("SELECT pg_backend_pid()").int64(0, 0);
  table.other.exec("SELECT pg_terminate_backend(" + std::to_string(pid) + ")");
  // The lost connection costs one failed call; the next connects and prepares anew.
  try {
    table.db.exec(insert, params().add(2));
  } catch (const error& lost) {
    EXPECT_EQ(lost.what_kind(), error::kind::unreachable) << lost.what();
  }
  table.db.exec(insert, params().add(3));
  EXPECT_EQ(table.db.connections(), 2);
  EXPECT_EQ(table.prepared_as(insert), 1);
  EXPECT_EQ(table.other.number("SELECT count(*) FROM t WHERE n = 3"), 1);
}

TEST(PostgresSession, AStatementThatFailedToPrepareIsPreparedAgainOnceItCan) {
  SURGE_REQUIRE_POSTGRES(server);
  scratch_table table(*server);
  const std::string insert = "INSERT INTO later VALUES ($1)";
  try {
    table.db.exec(insert, params().add(1));
    FAIL() << "a table that does not exist was not reported";
  } catch (const error& missing) {
    EXPECT_NE(std::string(missing.what()).find("42P01"), std::string::npos) << missing.what();
  }
  table.other.exec("CREATE TABLE later (n INTEGER)");
  table.db.exec(insert, params().add(1));
  EXPECT_EQ(table.other.number("SELECT count(*) FROM later"), 1);
  EXPECT_EQ(table.prepared_as(insert), 1);
}

TEST(PostgresSession, AStatementWhosePlanASchemaChangeMadeStaleIsPreparedAfresh) {
  SURGE_REQUIRE_POSTGRES(server);
  scratch_table table(*server);
  table.db.exec("INSERT INTO t VALUES (1)");
  const std::string select = "SELECT * FROM t WHERE n = $1";
  EXPECT_EQ(table.db.exec(select, params().add(1)).columns(), 1);
  table.other.exec("ALTER TABLE t ADD COLUMN m INTEGER");
  // The server refuses the old plan ("cached plan must not change result type"), once at most.
  try {
    table.db.exec(select, params().add(1));
  } catch (const error& stale) {
    EXPECT_NE(std::string(stale.what()).find("0A000"), std::string::npos) << stale.what();
  }
  EXPECT_EQ(table.db.exec(select, params().add(1)).columns(), 2);
}

}  // namespace
}  // namespace surge::storage::pg
