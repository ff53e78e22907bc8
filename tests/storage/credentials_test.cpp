// Per-subscriber credentials (extra headers, client certificate files) in Surge's own table, on
// each kind of queue: seed000 and seed001 SQLite files and PostgreSQL. The shapes' own subscriber
// tables are never changed by them.
#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <vector>

#include <SQLiteCpp/Database.h>

#include "storage/connection.hpp"
#include "storage/error.hpp"
#include "storage/sqlite/schema.hpp"
#include "storage/sqlite/subscribers.hpp"
#include "tests/support/postgres_server.hpp"
#include "tests/support/seed001_ddl.hpp"
#include "tests/support/sql_client.hpp"
#include "tests/support/temp_dir.hpp"

namespace surge::storage {
namespace {

subscriber_row new_subscriber() {
  subscriber_row row;
  row.url = "https://partner.example/hook";
  row.secret = "s";
  row.rate_per_sec = 1;  // whole requests per minute, as seed001 stores them
  row.region = "DE";
  return row;
}

// Sets, replaces and removes the credentials of one subscriber, and checks another keeps none.
void round_trip(connection& db) {
  auto row = new_subscriber();
  row.id = add_subscriber(db, row);
  auto other = new_subscriber();
  other.id = add_subscriber(db, other);

  row.extra_headers = {{"Authorization", "Bearer a: b"}, {"X-Api-Key", "k"}};
  row.client_cert_file = "/etc/surge/partner.crt";
  row.client_key_file = "/etc/surge/partner.key";
  set_subscriber_credentials(db, row);
  auto loaded = load_subscriber(db, row.id);
  ASSERT_TRUE(loaded);
  EXPECT_EQ(loaded->extra_headers, row.extra_headers);
  EXPECT_EQ(loaded->client_cert_file, row.client_cert_file);
  EXPECT_EQ(loaded->client_key_file, row.client_key_file);
  EXPECT_TRUE(load_subscriber(db, other.id)->extra_headers.empty());

  // Changing the subscriber's own settings leaves its credentials alone.
  loaded->burst = 7;
  update_subscriber(db, *loaded);
  const auto all = load_subscribers(db);
  ASSERT_EQ(all.size(), 2u);
  EXPECT_EQ(all[0].burst, 7);
  EXPECT_EQ(all[0].extra_headers.size(), 2u);
  EXPECT_TRUE(all[1].extra_headers.empty());
  EXPECT_EQ(all[1].client_cert_file, "");

  row.extra_headers = {{"X-Api-Key", "k2"}};
  row.client_cert_file.clear();
  row.client_key_file.clear();
  set_subscriber_credentials(db, row);
  loaded = load_subscriber(db, row.id);
  EXPECT_EQ(loaded->extra_headers, row.extra_headers);
  EXPECT_EQ(loaded->client_cert_file, "");

  // A proxy alone is kept (schema 10), and cleared with the rest.
  row.extra_headers.clear();
  row.proxy = "http://egress.internal:3128";
  set_subscriber_credentials(db, row);
  EXPECT_EQ(load_subscriber(db, row.id)->proxy, row.proxy);
  EXPECT_TRUE(load_subscriber(db, row.id)->extra_headers.empty());
  EXPECT_EQ(load_subscriber(db, other.id)->proxy, "");

  row.proxy.clear();
  set_subscriber_credentials(db, row);
  EXPECT_TRUE(load_subscriber(db, row.id)->extra_headers.empty());
  EXPECT_EQ(load_subscriber(db, row.id)->proxy, "");
}

// The producer deletes a subscriber with its own plain SQL and inserts the next one with the same
// id, as SQLite does by itself when the deleted row was the highest (PostgreSQL when the producer
// names ids): the new partner must start without the old one's header and certificate.
void deleted_subscribers_take_their_credentials(connection& db, const std::string& table,
                                                const std::string& insert_with_id) {
  auto kept = new_subscriber();
  kept.id = add_subscriber(db, kept);
  auto gone = new_subscriber();
  gone.id = add_subscriber(db, gone);
  for (auto* row : {&kept, &gone}) {
    row->extra_headers = {{"Authorization", "Bearer old-partner"}};
    row->client_cert_file = "/etc/surge/old.crt";
    row->client_key_file = "/etc/surge/old.key";
    set_subscriber_credentials(db, *row);
  }

  testing::sql_client producer(db.location());
  EXPECT_EQ(producer.exec("DELETE FROM " + table + " WHERE id = ?", {std::to_string(gone.id)}), 1);
  std::int64_t next = 0;
  if (insert_with_id.empty()) {
    next = add_subscriber(db, new_subscriber());
  } else {
    producer.exec(insert_with_id, {std::to_string(gone.id)});
    next = gone.id;
  }
  ASSERT_EQ(next, gone.id) << "the test needs the id given again";
  const auto fresh = load_subscriber(db, next);
  ASSERT_TRUE(fresh);
  EXPECT_TRUE(fresh->extra_headers.empty());
  EXPECT_EQ(fresh->client_cert_file, "");
  EXPECT_EQ(fresh->client_key_file, "");
  EXPECT_EQ(producer.number("SELECT COUNT(*) FROM surge_subscriber_credential WHERE "
                            "subscriber_id = ?",
                            {std::to_string(gone.id)}),
            0);
  // The other subscriber keeps its own.
  EXPECT_EQ(load_subscriber(db, kept.id)->extra_headers, kept.extra_headers);
}

TEST(Credentials, ADeletedSubscribersCredentialsAreNotGivenToTheNextWithItsIdOnSeed000) {
  testing::temp_dir dir;
  connection db({.location = dir.file("queue.db")});
  migrate(db, true);
  deleted_subscribers_take_their_credentials(db, "webhook_subscriber", "");
}

TEST(Credentials, ADeletedSubscribersCredentialsAreNotGivenToTheNextWithItsIdOnSeed001) {
  testing::temp_dir dir;
  {
    SQLite::Database raw(dir.file("seed001.db"), SQLite::OPEN_READWRITE | SQLite::OPEN_CREATE);
    raw.exec(testing::seed001_ddl);
  }
  connection db({.location = dir.file("seed001.db"), .create_if_missing = false});
  migrate(db);
  deleted_subscribers_take_their_credentials(db, "webhook_subscribers", "");
}

TEST(Credentials, ADeletedSubscribersCredentialsAreNotGivenToTheNextWithItsIdOnPostgres) {
  SURGE_REQUIRE_POSTGRES(server);
  connection db({.location = server->create_database()});
  migrate(db, true);
  deleted_subscribers_take_their_credentials(
      db, "webhook_subscriber",
      "INSERT INTO webhook_subscriber(id, url, secret) VALUES (?, 'https://new.example/', 's')");
}

// Every write of a credentials row fails (as a full disk or a lost lock would make it fail).
constexpr const char* sqlite_refusal =
    "CREATE TRIGGER surge_test_refuse BEFORE INSERT ON surge_subscriber_credential "
    "BEGIN SELECT RAISE(ABORT, 'refused by the test'); END";
constexpr const char* postgres_refusal[] = {
    "CREATE FUNCTION surge_test_refuse() RETURNS trigger LANGUAGE plpgsql AS "
    "$$ BEGIN RAISE EXCEPTION 'refused by the test'; END $$",
    "CREATE TRIGGER surge_test_refuse BEFORE INSERT ON surge_subscriber_credential "
    "FOR EACH ROW EXECUTE FUNCTION surge_test_refuse()"};

// A subscriber and its credentials are written together or not at all: a partner must never be
// sent requests without the header its gateway requires.
template <class Refusal>
void subscriber_and_credentials_are_one_write(connection& db, const Refusal& refusal) {
  auto existing = new_subscriber();
  existing.id = add_subscriber(db, existing);
  testing::sql_client other(db.location());
  for (const auto& statement : refusal) other.exec(statement);

  auto row = new_subscriber();
  row.extra_headers = {{"X-Api-Key", "k"}};
  EXPECT_THROW(add_subscriber(db, row, credentials_write::replace), error);
  EXPECT_EQ(load_subscribers(db).size(), 1u);

  existing.burst = 7;
  existing.extra_headers = {{"X-Api-Key", "k"}};
  EXPECT_THROW(update_subscriber(db, existing, credentials_write::replace), error);
  EXPECT_EQ(load_subscriber(db, existing.id)->burst, 10);

  // Without credentials to write, both go through.
  row.extra_headers.clear();
  EXPECT_NE(add_subscriber(db, row, credentials_write::replace), 0);
  EXPECT_EQ(load_subscribers(db).size(), 2u);
  existing.extra_headers.clear();
  EXPECT_TRUE(update_subscriber(db, existing, credentials_write::replace));
  EXPECT_EQ(load_subscriber(db, existing.id)->burst, 7);
}

TEST(Credentials, ASubscriberAndItsCredentialsAreOneWriteOnSeed000) {
  testing::temp_dir dir;
  connection db({.location = dir.file("queue.db")});
  migrate(db, true);
  subscriber_and_credentials_are_one_write(db, std::vector<std::string>{sqlite_refusal});
}

TEST(Credentials, ASubscriberAndItsCredentialsAreOneWriteOnSeed001) {
  testing::temp_dir dir;
  {
    SQLite::Database raw(dir.file("seed001.db"), SQLite::OPEN_READWRITE | SQLite::OPEN_CREATE);
    raw.exec(testing::seed001_ddl);
  }
  connection db({.location = dir.file("seed001.db"), .create_if_missing = false});
  migrate(db);
  subscriber_and_credentials_are_one_write(db, std::vector<std::string>{sqlite_refusal});
}

TEST(Credentials, ASubscriberAndItsCredentialsAreOneWriteOnPostgres) {
  SURGE_REQUIRE_POSTGRES(server);
  connection db({.location = server->create_database()});
  migrate(db, true);
  subscriber_and_credentials_are_one_write(db, postgres_refusal);
}

TEST(Credentials, RoundTripOnASeed000File) {
  testing::temp_dir dir;
  connection db({.location = dir.file("queue.db")});
  EXPECT_EQ(migrate(db, true), 10);
  round_trip(db);
  SQLite::Database raw(dir.file("queue.db"));
  EXPECT_EQ(raw.execAndGet("SELECT COUNT(*) FROM surge_subscriber_credential").getInt(), 0);
  // The shared table gained no column for them.
  EXPECT_EQ(raw.execAndGet("SELECT COUNT(*) FROM pragma_table_info('webhook_subscriber') "
                           "WHERE name LIKE '%header%' OR name LIKE '%cert%'")
                .getInt(),
            0);
}

TEST(Credentials, RoundTripOnASeed001File) {
  testing::temp_dir dir;
  {
    SQLite::Database raw(dir.file("seed001.db"), SQLite::OPEN_READWRITE | SQLite::OPEN_CREATE);
    raw.exec(testing::seed001_ddl);
  }
  connection db({.location = dir.file("seed001.db"), .create_if_missing = false});
  migrate(db);
  round_trip(db);
}

TEST(Credentials, AFileFromBeforeTheTableListsSubscribersWithout) {
  testing::temp_dir dir;
  connection db({.location = dir.file("queue.db")});
  migrate(db, true);
  {
    SQLite::Database raw(dir.file("queue.db"), SQLite::OPEN_READWRITE);
    raw.exec(
        "DROP TRIGGER surge_subscriber_credential_gone; "
        "DROP TABLE surge_subscriber_credential; "
        "DELETE FROM surge_schema_version WHERE version = 8");
  }
  connection again({.location = dir.file("queue.db"), .create_if_missing = false});
  add_subscriber(again, new_subscriber());
  const auto rows = load_subscribers(again);
  ASSERT_EQ(rows.size(), 1u);
  EXPECT_TRUE(rows[0].extra_headers.empty());
  // Migrating brings the table back.
  EXPECT_EQ(migrate(again), 10);
  auto row = rows[0];
  row.extra_headers = {{"X-Api-Key", "k"}};
  set_subscriber_credentials(again, row);
  EXPECT_EQ(load_subscriber(again, row.id)->extra_headers, row.extra_headers);
}

TEST(Credentials, RoundTripOnPostgres) {
  SURGE_REQUIRE_POSTGRES(server);
  connection db({.location = server->create_database()});
  EXPECT_EQ(migrate(db, true), 11);
  round_trip(db);
}

// A file migrated before schema 10 (credentials without the proxy column) lists its
// subscribers and their credentials; migrating adds the column, and a proxy round-trips.
TEST(Credentials, AFileFromBeforeTheProxyColumnListsSubscribersAndGainsIt) {
  testing::temp_dir dir;
  connection db({.location = dir.file("queue.db")});
  migrate(db, true);
  auto row = new_subscriber();
  row.id = add_subscriber(db, row);
  row.extra_headers = {{"X-Api-Key", "k"}};
  set_subscriber_credentials(db, row);
  {
    SQLite::Database raw(dir.file("queue.db"), SQLite::OPEN_READWRITE);
    raw.exec(
        "ALTER TABLE surge_subscriber_credential DROP COLUMN proxy; "
        "DELETE FROM surge_schema_version WHERE version = 10");
  }
  connection again({.location = dir.file("queue.db"), .create_if_missing = false});
  ASSERT_EQ(load_subscribers(again).size(), 1u);
  EXPECT_EQ(load_subscribers(again)[0].extra_headers, row.extra_headers);
  EXPECT_EQ(migrate(again), 10);
  row.proxy = "http://egress.internal:3128";
  set_subscriber_credentials(again, row);
  EXPECT_EQ(load_subscriber(again, row.id)->proxy, row.proxy);
  EXPECT_EQ(load_subscriber(again, row.id)->extra_headers, row.extra_headers);
}

}  // namespace
}  // namespace surge::storage
