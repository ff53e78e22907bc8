#pragma once
// Additive, versioned migrations on top of the shared DDL.
#include <vector>

#include <SQLiteCpp/Database.h>

#include "storage/connection.hpp"
#include "storage/queue_shape.hpp"

namespace surge::storage {

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

// The same on either kind of queue (storage/connection.hpp); throw storage::error.
int schema_version(connection& db);
// Brings Surge's own tables and columns up to date on a queue of either shape (seed001: Surge's
// own tables and its index only, storage/seed001/schema.cpp), never creating a shape's tables.
// An empty database gets the seed000 tables only with `create_if_empty` (`surge migrate`);
// every other command refuses it like a queue of no known shape (storage::error, bad_shape).
int migrate(connection& db, bool create_if_empty = false);

}  // namespace surge::storage
