#pragma once
// What opening a queue needs whichever database holds it: a lock wait a stop can cut short, and
// which file a path names. Opening a SQLite file: storage/sqlite/database.hpp.
#include <atomic>
#include <chrono>
#include <optional>
#include <string>

#include <sys/types.h>

namespace surge::storage {

// A lock wait that a stop can cut short: while `give_up` is true, a statement waiting for
// another writer's lock fails at once (SQLITE_BUSY) instead of waiting out `timeout`. A
// stopping drain must not sit behind a lock for longer than its grace period.
struct interruptible_wait {
  std::chrono::milliseconds timeout{std::chrono::seconds(10)};
  std::atomic<bool> give_up{false};
};

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
