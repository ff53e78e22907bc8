#pragma once
// Retention: deleting finished rows (and their attempt records) older than a cutoff, in short
// write transactions, then giving the space back. Nothing else ever leaves the queue file.
#include <chrono>
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>

#include <SQLiteCpp/Database.h>
#include "storage/connection.hpp"

namespace surge::storage {

struct prune_options {
  double cutoff = 0;     // Unix seconds: rows finished before this go
  bool dead = false;     // also dead letters (kept by default)
  int batch_rows = 500;  // rows per write transaction
  // Pause between write transactions. A writer waiting for the lock sleeps in SQLite's busy
  // handler (1, 2, 5, 10, 15, 20, 25 ms ...) rather than queueing; with a 2 ms pause it mostly
  // woke to find the next batch holding the lock (measured: p99 wait 43 ms, max 199 ms).
  std::chrono::milliseconds pause{20};
  // Free pages returned to the file system per transaction when the file has
  // auto_vacuum=INCREMENTAL; 0 skips reclaiming.
  int vacuum_pages = 500;
};

struct prune_result {
  std::int64_t deliveries = 0;    // webhook_delivery rows deleted
  std::int64_t attempts = 0;      // surge_attempt rows deleted
  std::int64_t transactions = 0;  // write transactions
  // How long each write transaction held the lock (BEGIN IMMEDIATE to COMMIT): the longest,
  // and the median and 99th percentile over all of them.
  std::chrono::microseconds longest_transaction{0};
  std::chrono::microseconds median_transaction{0};
  std::chrono::microseconds p99_transaction{0};
  std::int64_t pages_reclaimed = 0;
  std::int64_t free_pages = 0;      // left in the file afterwards (reused by new rows)
  bool incremental_vacuum = false;  // the file has auto_vacuum=INCREMENTAL
};

// Deletes `done` rows (and, with `dead`, dead rows) whose finishing time is before the cutoff:
// delivered_at, or created_at when the writer left delivered_at unset (the steady-state
// drainer does; a dead row has only created_at). A row that is due, leased or retrying is
// never touched: every delete re-checks status and lease under the write lock. Then deletes
// the surge_attempt records finished before the cutoff whose delivery row no longer exists, so
// the audit keeps everything newer than the cutoff and the attempts of rows still queued.
// `progress` (may be empty) is called after each transaction.
prune_result prune(SQLite::Database& db, const prune_options& options,
                   const std::function<void(const prune_result&)>& progress = {});

// Where a queue shape keeps what prune deletes (seed001's: storage/seed001/maintenance.cpp).
struct retention_shape {
  const char* deliveries;    // the delivery table
  const char* done;          // condition: delivered
  const char* done_or_dead;  // condition: delivered or dead
  const char* finished_at;   // expression: when a finished row finished, Unix seconds
  // Condition: nobody holds the row at the Unix time in parameter `now` ("?").
  std::string (*free_at)(std::string_view now);
  // A table of Surge's keyed by delivery_id whose rows go with their delivery (or nullptr).
  const char* notes = nullptr;
};
// prune() on a queue of that shape.
prune_result prune(SQLite::Database& db, const prune_options& options,
                   const std::function<void(const prune_result&)>& progress,
                   const retention_shape& shape);

// Switches the file to auto_vacuum=INCREMENTAL and rewrites it (VACUUM): a one-off that holds
// the write lock for the whole rewrite (seconds per hundred MB), after which prune() returns
// freed pages to the file system in short steps. Returns the file's page count afterwards.
std::int64_t enable_incremental_vacuum(SQLite::Database& db);

// SQLite only so far (storage::error, kind unsupported, on PostgreSQL).
prune_result prune(connection& db, const prune_options& options,
                   const std::function<void(const prune_result&)>& progress = {});
std::int64_t enable_incremental_vacuum(connection& db);

}  // namespace surge::storage
