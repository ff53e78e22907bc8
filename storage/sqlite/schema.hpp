#pragma once
// Surge's migrations of a SQLite queue file, on top of the shared DDL.
#include <string>
#include <utility>
#include <vector>

#include <SQLiteCpp/Database.h>

#include "storage/connection.hpp"
#include "storage/queue_shape.hpp"
#include "storage/schema.hpp"

namespace surge::storage::sqlite {

// 0 for a database Surge has never migrated.
int schema_version(SQLite::Database& db);
int latest_schema_version();

// Creates the shared tables when absent (an empty file), then applies every missing migration,
// each in its own BEGIN IMMEDIATE transaction, recording the version in surge_schema_version.
// Returns the version now in force. Throws SQLite::Exception on failure.
int migrate(SQLite::Database& db);

// Every table of the file with its columns (sqlite_ tables left out), for
// storage/queue_shape.hpp.
std::vector<found_table> list_tables(SQLite::Database& db);
// The file's indexes and triggers, as (type, name), SQLite's own automatic indexes left out.
std::vector<std::pair<std::string, std::string>> list_indexes_and_triggers(SQLite::Database& db);

}  // namespace surge::storage::sqlite
