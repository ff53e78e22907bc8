#include "storage/sqlite/database.hpp"

#include <chrono>
#include <cstdint>
#include <thread>

#include <sqlite3.h>

#include <SQLiteCpp/Exception.h>

namespace surge::storage::sqlite {

namespace {

// SQLite's own busy timeout sleeps until it runs out, deaf to a stop; this one waits in short
// steps and checks the give-up flag between them.
int wait_for_lock(void* context, int calls) {
  const auto& wait = *static_cast<const interruptible_wait*>(context);
  if (wait.give_up.load(std::memory_order_relaxed)) return 0;
  using namespace std::chrono_literals;
  const auto step = calls < 10 ? 1ms : 5ms;
  const auto waited = calls < 10 ? calls * 1ms : 10ms + (calls - 10) * 5ms;
  if (waited >= wait.timeout) return 0;
  std::this_thread::sleep_for(step);
  return 1;
}

// Puts the file in WAL mode, a no-op for a file already in it. Two connections switching a new
// file at once deadlock: each holds the shared lock the other must see go, so SQLite answers
// SQLITE_BUSY at once instead of calling the busy handler. One of them then tries again after a
// short, varied sleep, until the busy timeout runs out.
void use_wal(SQLite::Database& db, std::chrono::milliseconds timeout) {
  using clock = std::chrono::steady_clock;
  const auto deadline = clock::now() + timeout;
  // Varied per connection, so two openers do not retry in step.
  unsigned step = 1 + static_cast<unsigned>(reinterpret_cast<std::uintptr_t>(&db) >> 4) % 7;
  for (;;) {
    try {
      db.exec("PRAGMA journal_mode=WAL");
      return;
    } catch (const SQLite::Exception& error) {
      const int code = error.getErrorCode() & 0xff;
      if ((code != SQLITE_BUSY && code != SQLITE_LOCKED) || clock::now() >= deadline) throw;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(step));
    step = step % 13 + 3;
  }
}

}  // namespace

SQLite::Database open_database(const database_config& config) {
  // SQLite's default counts every allocation under a global mutex, for sqlite3_memory_used(),
  // which nothing here reads. It can only be turned off before SQLite initialises: the first
  // open does it, on the thread that starts a program, before any other thread opens a file.
  static const bool configured = [] {
    sqlite3_config(SQLITE_CONFIG_MEMSTATUS, 0);
    return true;
  }();
  (void)configured;
  // NOMUTEX: every connection here is used by one thread at a time (the drain's storage
  // thread, the checkpointer, a tool, or under a lock of its own), so the connection mutex
  // SQLite otherwise takes in every call, several per row, guards nothing.
  int flags = SQLite::OPEN_READONLY | SQLITE_OPEN_NOMUTEX;
  if (!config.read_only) {
    flags = SQLite::OPEN_READWRITE | SQLITE_OPEN_NOMUTEX |
            (config.create_if_missing ? SQLite::OPEN_CREATE : 0);
  }
  SQLite::Database db(config.path, flags, static_cast<int>(config.busy_timeout.count()));
  if (config.lock_wait) {
    sqlite3_busy_handler(db.getHandle(), wait_for_lock,
                         const_cast<interruptible_wait*>(config.lock_wait));
  }
  if (!config.read_only) {
    // WAL lets the other drainer read while we write and makes our commits cheap; it is a
    // property of the file, so this is a no-op when the file is already in WAL mode.
    use_wal(db, config.lock_wait ? config.lock_wait->timeout : config.busy_timeout);
  }
  // NORMAL is durable across process crashes in WAL mode; only an OS crash can lose the last
  // commits, which then come back as due rows (at-least-once holds).
  db.exec("PRAGMA synchronous=NORMAL");
  if (config.cache_kib > 0) db.exec("PRAGMA cache_size=-" + std::to_string(config.cache_kib));
  return db;
}

error from_sqlite(const SQLite::Exception& failure) {
  const int code = failure.getErrorCode() & 0xff;
  const std::string_view message = failure.what();
  switch (code) {
    case SQLITE_BUSY:
    case SQLITE_LOCKED: return error(failure.what(), error::kind::busy);
    case SQLITE_FULL: return error(failure.what(), error::kind::disk_full);
    case SQLITE_READONLY:
    case SQLITE_PERM: return error(failure.what(), error::kind::read_only);
    // A constraint or trigger (RAISE) refused the row, or a value does not fit.
    case SQLITE_CONSTRAINT:
    case SQLITE_MISMATCH:
    case SQLITE_TOOBIG:
    case SQLITE_RANGE: return error(failure.what(), error::kind::row_rejected);
    default: break;
  }
  // A prepared statement whose table was dropped fails when SQLite prepares it again.
  if (code == SQLITE_ERROR &&
      (message.starts_with("no such table") || message.starts_with("no such column"))) {
    return error(failure.what(), error::kind::schema_missing);
  }
  return error(failure.what(), error::kind::other);
}

}  // namespace surge::storage::sqlite
