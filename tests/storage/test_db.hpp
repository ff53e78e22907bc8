#pragma once
// Shared fixtures for the storage tests: real files in a private temporary directory.
#include <chrono>
#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include <SQLiteCpp/Database.h>
#include <gtest/gtest.h>

#include "storage/error.hpp"
#include "tests/support/temp_dir.hpp"

namespace surge::storage::testing {

using surge::testing::temp_dir;

// open_database + migrate, as Surge opens a file.
SQLite::Database open_migrated(const std::string& path,
                               std::chrono::milliseconds busy_timeout = std::chrono::seconds(5));

// What another program does: the shared DDL, verbatim, on a plain connection.
void create_shared_tables(SQLite::Database& db);

// Turns a fully migrated file back into what a Surge build without migration 3 (batches and
// coalescing) left behind: its columns and the later migrations' tables dropped, and their
// version rows deleted.
void drop_version_three(SQLite::Database& db);

// Inserts through the other program's statements (base columns only).
std::int64_t insert_subscriber_old(SQLite::Database& db, const std::string& event_types = "*",
                                   double rate_per_sec = 5.0, int burst = 10);
// `count` rows for one subscriber, all due at `due`, in one transaction; returns their ids.
std::vector<std::int64_t> insert_deliveries_old(SQLite::Database& db, std::int64_t subscriber_id,
                                                int count, double due = 0,
                                                const std::string& event_type = "video.trending");

// Single-value helpers for assertions.
std::int64_t query_int(SQLite::Database& db, const std::string& sql);
double query_double(SQLite::Database& db, const std::string& sql);
std::string query_text(SQLite::Database& db, const std::string& sql);
bool query_is_null(SQLite::Database& db, const std::string& sql);

// The message `call` was refused with as unsupported (storage::error of another kind fails the
// test); "no refusal" when it ran.
template <class Call>
std::string unsupported_refusal(Call&& call) {
  try {
    call();
  } catch (const error& failure) {
    EXPECT_EQ(failure.what_kind(), error::kind::unsupported) << failure.what();
    return failure.what();
  }
  return "no refusal";
}

}  // namespace surge::storage::testing
