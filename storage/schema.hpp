#pragma once
// Additive, versioned migrations on top of the shared DDL.
#include <SQLiteCpp/Database.h>
#include "storage/connection.hpp"

namespace surge::storage {

// 0 for a database Surge has never migrated.
int schema_version(SQLite::Database& db);
int latest_schema_version();

// Creates the shared tables when absent (an empty file), then applies every missing migration,
// each in its own BEGIN IMMEDIATE transaction, recording the version in surge_schema_version.
// Returns the version now in force. Throws SQLite::Exception on failure.
int migrate(SQLite::Database& db);

// The same on either kind of queue (storage/connection.hpp); throw storage::error.
int schema_version(connection& db);
int migrate(connection& db);

}  // namespace surge::storage
