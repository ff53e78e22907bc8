#pragma once
// Retention on a SQLite queue file, and giving the space back.
#include <chrono>
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>

#include <SQLiteCpp/Database.h>

#include "storage/connection.hpp"
#include "storage/retention.hpp"
#include "storage/sqlite/delivery_table.hpp"

namespace surge::storage::sqlite {

// Deletes `done` rows (and, with `dead`, dead rows) whose finishing time is before the cutoff:
// delivered_at, or created_at when the writer left delivered_at unset (the steady-state
// drainer does; a dead row has only created_at). A row that is due, leased or retrying is
// never touched: every delete re-checks status and lease under the write lock. Then deletes
// the surge_attempt records finished before the cutoff whose delivery row no longer exists, so
// the audit keeps everything newer than the cutoff and the attempts of rows still queued.
// `progress` (may be empty) is called after each transaction.
prune_result prune(SQLite::Database& db, const prune_options& options,
                   const std::function<void(const prune_result&)>& progress = {});

// prune() on a queue of that shape.
prune_result prune(SQLite::Database& db, const prune_options& options,
                   const std::function<void(const prune_result&)>& progress,
                   const delivery_table& table);

// Switches the file to auto_vacuum=INCREMENTAL and rewrites it (VACUUM): a one-off that holds
// the write lock for the whole rewrite (seconds per hundred MB), after which prune() returns
// freed pages to the file system in short steps. Returns the file's page count afterwards.
std::int64_t enable_incremental_vacuum(SQLite::Database& db);

}  // namespace surge::storage::sqlite
