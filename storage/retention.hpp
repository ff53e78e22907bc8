#pragma once
// Retention: deleting finished rows (and their attempt records) older than a cutoff, in short
// write transactions, then giving the space back. Nothing else ever leaves the queue file.
#include <chrono>
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>

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

// SQLite only so far (storage::error, kind unsupported, on PostgreSQL).
prune_result prune(connection& db, const prune_options& options,
                   const std::function<void(const prune_result&)>& progress = {});
std::int64_t enable_incremental_vacuum(connection& db);

}  // namespace surge::storage
