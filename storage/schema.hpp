#pragma once
// Additive, versioned migrations on top of the shared DDL.
#include <vector>

#include "storage/connection.hpp"
#include "storage/queue_shape.hpp"

namespace surge::storage {

// On either kind of queue (storage/connection.hpp), as storage/sqlite/schema.hpp describes them on
// a SQLite file; throw storage::error.
int schema_version(connection& db);
// Brings Surge's own tables and columns up to date on a queue of either shape (seed001: Surge's
// own tables and its index only, storage/seed001/schema.cpp), never creating a shape's tables.
// An empty database gets the seed000 tables only with `create_if_empty` (`surge migrate`);
// every other command refuses it like a queue of no known shape (storage::error, bad_shape).
int migrate(connection& db, bool create_if_empty = false);

}  // namespace surge::storage
