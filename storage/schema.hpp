#pragma once
// Additive, versioned migrations on top of the shared DDL.
#include <string>
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

// What a migration added to (or dropped from) the queue's schema, found by comparing the tables,
// columns, indexes and triggers before and after it: what `surge migrate` and `surge drain` say.
struct migration_report {
  int version_before = 0;
  int version = 0;
  std::vector<std::string> tables;           // new tables
  std::vector<std::string> columns;          // "table.column" added to tables that were there
  std::vector<std::string> indexes;          // new indexes (not those of a primary key)
  std::vector<std::string> triggers;         // new triggers
  std::vector<std::string> dropped_indexes;  // indexes a migration replaced
  bool changed() const {
    return !tables.empty() || !columns.empty() || !indexes.empty() || !triggers.empty() ||
           !dropped_indexes.empty();
  }
  // "added tables a, b; columns t.c; index i; trigger g; dropped index j", "" when unchanged.
  std::string describe() const;
};
// migrate(), reporting what it changed.
migration_report migrate_reporting(connection& db, bool create_if_empty = false);

}  // namespace surge::storage
