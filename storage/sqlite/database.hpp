#pragma once
// Opening a SQLite queue file with the settings every Surge connection uses.
#include <atomic>
#include <chrono>
#include <optional>
#include <string>

#include <sys/types.h>

#include <SQLiteCpp/Database.h>
#include <SQLiteCpp/Exception.h>

#include "storage/database.hpp"
#include "storage/error.hpp"

namespace surge::storage::sqlite {

struct database_config {
  std::string path;
  // How long a statement waits for another writer's lock before SQLITE_BUSY surfaces.
  std::chrono::milliseconds busy_timeout{std::chrono::seconds(10)};
  bool create_if_missing = true;
  bool read_only = false;
  // Page cache of the connection in KiB (PRAGMA cache_size = -N); 0 keeps SQLite's 2 MiB.
  int cache_kib = 0;
  // Replaces busy_timeout when set; it must outlive the connection.
  const interruptible_wait* lock_wait = nullptr;
};

// WAL journal, synchronous=NORMAL, the busy timeout. Throws SQLite::Exception on failure.
SQLite::Database open_database(const database_config& config);

// SQLite's error as a storage::error. SQLITE_BUSY and SQLITE_LOCKED: another writer held the lock
// past the wait; SQLITE_FULL: the disk (or max_page_count) refused to grow the file or its WAL.
error from_sqlite(const SQLite::Exception& failure);

}  // namespace surge::storage::sqlite
