#pragma once
// Opening the queue file with the settings every Surge connection uses.
#include <atomic>
#include <chrono>
#include <optional>
#include <string>

#include <sys/types.h>

#include <SQLiteCpp/Database.h>

namespace surge::storage {

// A lock wait that a stop can cut short: while `give_up` is true, a statement waiting for
// another writer's lock fails at once (SQLITE_BUSY) instead of waiting out `timeout`. A
// stopping drain must not sit behind a lock for longer than its grace period.
struct interruptible_wait {
  std::chrono::milliseconds timeout{std::chrono::seconds(10)};
  std::atomic<bool> give_up{false};
};

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

// Which file a path names: a queue file deleted or replaced under a running drain no longer
// matches the identity it had when it was opened.
struct file_identity {
  dev_t device = 0;
  ino_t inode = 0;
  bool operator==(const file_identity&) const = default;
};
// nullopt when nothing exists at `path`.
std::optional<file_identity> identify_file(const std::string& path);

}  // namespace surge::storage
