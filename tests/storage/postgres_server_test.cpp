// The throwaway PostgreSQL server fixture: databases are separate, and stop()/start() really
// take the server away and bring it back (the fault tests rely on both).
#include "tests/support/postgres_server.hpp"

#include <libpq-fe.h>

#include <gtest/gtest.h>

#include <memory>
#include <set>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

namespace {

struct pg_conn_closer {
  void operator()(PGconn* conn) const { PQfinish(conn); }
};
using pg_conn = std::unique_ptr<PGconn, pg_conn_closer>;

pg_conn connect(const std::string& uri) { return pg_conn(PQconnectdb(uri.c_str())); }

bool connected(const pg_conn& conn) { return conn && PQstatus(conn.get()) == CONNECTION_OK; }

// The first column of the first row, or throws with the server's message.
std::string query_value(const pg_conn& conn, const std::string& sql) {
  PGresult* result = PQexec(conn.get(), sql.c_str());
  const auto status = result == nullptr ? PGRES_FATAL_ERROR : PQresultStatus(result);
  std::string value;
  if (status == PGRES_TUPLES_OK && PQntuples(result) > 0) value = PQgetvalue(result, 0, 0);
  PQclear(result);
  if (status != PGRES_TUPLES_OK && status != PGRES_COMMAND_OK) {
    throw std::runtime_error(sql + ": " + PQerrorMessage(conn.get()));
  }
  return value;
}

// Puts the server back whatever a fault test's assertions did, so the tests after it in the
// same process still have one.
struct restart_on_exit {
  surge::testing::postgres_server* server;
  ~restart_on_exit() {
    try {
      if (!server->running()) server->start();
    } catch (const std::exception& e) {
      ADD_FAILURE() << "restarting the test server: " << e.what();
    }
  }
};

TEST(PostgresServer, DatabasesAreSeparate) {
  SURGE_REQUIRE_POSTGRES(server);
  const std::string first = server->create_database();
  const std::string second = server->create_database();
  ASSERT_NE(first, second);

  const pg_conn a = connect(first);
  const pg_conn b = connect(second);
  ASSERT_TRUE(connected(a)) << PQerrorMessage(a.get());
  ASSERT_TRUE(connected(b)) << PQerrorMessage(b.get());
  EXPECT_NE(query_value(a, "SELECT current_database()"),
            query_value(b, "SELECT current_database()"));
  EXPECT_EQ(query_value(a, "SELECT current_user"), "surge");

  query_value(a, "CREATE TABLE only_in_first (id bigint PRIMARY KEY)");
  query_value(a, "INSERT INTO only_in_first VALUES (1), (2)");
  EXPECT_EQ(query_value(a, "SELECT count(*) FROM only_in_first"), "2");
  // to_regclass is NULL (an empty value in libpq) when the table does not exist.
  EXPECT_EQ(query_value(a, "SELECT to_regclass('public.only_in_first') IS NOT NULL"), "t");
  EXPECT_EQ(query_value(b, "SELECT to_regclass('public.only_in_first') IS NOT NULL"), "f");
  EXPECT_THROW(query_value(b, "SELECT count(*) FROM only_in_first"), std::runtime_error);
}

TEST(PostgresServer, UriNamesTheDatabase) {
  SURGE_REQUIRE_POSTGRES(server);
  const std::string uri = server->create_database();
  const std::string name = uri.substr(std::string("postgresql:///").size(),
                                      uri.find('?') - std::string("postgresql:///").size());
  EXPECT_EQ(server->uri(name), uri);
  EXPECT_NE(uri.find("host=" + server->socket_dir().string()), std::string::npos) << uri;
  const pg_conn conn = connect(uri);
  ASSERT_TRUE(connected(conn)) << PQerrorMessage(conn.get());
  EXPECT_EQ(query_value(conn, "SELECT current_database()"), name);
  EXPECT_EQ(query_value(conn, "SHOW fsync"), "off");
}

TEST(PostgresServer, CreateDatabaseFromSeveralThreads) {
  SURGE_REQUIRE_POSTGRES(server);
  std::vector<std::string> uris(4);
  std::vector<std::thread> threads;
  for (auto& uri : uris) {
    threads.emplace_back([&uri, server] { uri = server->create_database(); });
  }
  for (auto& thread : threads) thread.join();
  EXPECT_EQ(std::set<std::string>(uris.begin(), uris.end()).size(), uris.size());
  for (const auto& uri : uris) EXPECT_TRUE(connected(connect(uri))) << uri;
}

TEST(PostgresServer, StopAndStart) {
  SURGE_REQUIRE_POSTGRES(server);
  const restart_on_exit restart{server};
  const std::string uri = server->create_database();
  {
    const pg_conn conn = connect(uri);
    ASSERT_TRUE(connected(conn)) << PQerrorMessage(conn.get());
    query_value(conn, "CREATE TABLE kept (id bigint)");
    query_value(conn, "INSERT INTO kept VALUES (7)");
  }
  const pg_conn open_before = connect(uri);
  ASSERT_TRUE(connected(open_before));

  ASSERT_TRUE(server->running());
  server->stop();
  EXPECT_FALSE(server->running());
  const pg_conn while_stopped = connect(uri);
  EXPECT_FALSE(connected(while_stopped));
  // The fast shutdown ended the session that was open.
  EXPECT_THROW(query_value(open_before, "SELECT 1"), std::runtime_error);

  server->start();
  EXPECT_TRUE(server->running());
  const pg_conn after = connect(uri);
  ASSERT_TRUE(connected(after)) << PQerrorMessage(after.get());
  // Same data dir: what was committed before the stop is still there.
  EXPECT_EQ(query_value(after, "SELECT id FROM kept"), "7");
}

}  // namespace
