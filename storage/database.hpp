#pragma once
// Opening the queue file with the settings every Surge connection uses (DESIGN section 1).
#include <chrono>
#include <string>

#include <SQLiteCpp/Database.h>

namespace surge::storage {

struct database_config {
  std::string path;
  // How long a statement waits for another writer's lock before SQLITE_BUSY surfaces.
  std::chrono::milliseconds busy_timeout{std::chrono::seconds(10)};
  bool create_if_missing = true;
  bool read_only = false;
};

// WAL journal, synchronous=NORMAL, the busy timeout. Throws SQLite::Exception on failure.
SQLite::Database open_database(const database_config& config);

// Current wall-clock time as Unix seconds with a fraction, the queue's time unit.
double unix_now();

}  // namespace surge::storage
